"""The one verdict rule (docs/verdicts.md): who is lower on a figure, from a paired ratio's 95%
interval against an equivalence margin's band: a winner only where the whole interval lies
outside it, "level" where wholly inside, otherwise "not separated".
"""
from __future__ import annotations

import math
from typing import Optional

from testbed.core.metrics import t95

__all__ = ["FLOOR", "MARGINS", "margin_for", "verdict", "words", "repetitions_for",
           "describe_margin"]

FLOOR = 0.01    # no difference under 1% is called, whatever a backend repeats

# the largest offset one bring-up gave every repetition of a copy of one fabric (bench_aa.py),
# where over the floor: the simulators compute copies identically
MARGINS = {
    "emulation": {"FCT p50 ms": FLOOR, "FCT p99 ms": 0.011, "TTFT p99 ms": FLOOR},
    "model": {},
    "ns3": {},
}

# verdict codes: "other" (the other run is lower), "ref" (the reference is lower), "level",
# "unclear" (not separated)
WINNERS = ("other", "ref")


def margin_for(metric: str, *backends: Optional[str]) -> float:
    """The equivalence margin of ``metric`` between runs on ``backends``: the largest of
    theirs (a backend not in :data:`MARGINS` has the floor)."""
    return max([FLOOR] + [MARGINS.get(b or "", {}).get(metric, FLOOR) for b in backends])


def _band(margin: float) -> tuple[float, float]:
    return 1 / (1 + margin), 1 + margin


def verdict(p: Optional[dict], margin: Optional[float] = None) -> str:
    """``"other"``, ``"ref"``, ``"level"`` or ``"unclear"`` for a lower-is-better paired
    ratio ``p`` (``{"ratio", "lo", "hi", ...}``, ``margin`` or ``p["margin"]`` or the floor):
    see the module docstring. No interval gives ``"unclear"``."""
    if not p or p.get("lo") is None:
        return "unclear"
    low, high = _band(margin if margin is not None else p.get("margin") or FLOOR)
    if p["hi"] < low:
        return "other"
    if p["lo"] > high:
        return "ref"
    if p["lo"] >= low and p["hi"] <= high:
        return "level"
    return "unclear"


def words(p: Optional[dict], ref: str, other: str) -> str:
    """:func:`verdict` in words: ``"<name> lower"``, ``"level"`` or ``"not separated"``."""
    return {"other": f"{other} lower", "ref": f"{ref} lower", "level": "level",
            "unclear": "not separated"}[verdict(p)]


def describe_margin(p: Optional[dict]) -> str:
    """How the margin a verdict used reads in a line of output: ``"margin 1.0%"``."""
    return f"margin {(p or {}).get('margin') or FLOOR:.1%}"


def repetitions_for(p: Optional[dict], margin: Optional[float] = None,
                    most: int = 1000) -> Optional[int]:
    """About how many repetitions would give a not-separated ratio ``p`` a verdict (the
    interval wholly outside the margin's band, or wholly inside it) if the ratio and the
    spread of the per-repetition log ratios stayed as measured; ``p["n"]`` where it has one
    already; None without an interval or spread, on the band's edge, or beyond ``most``."""
    if not p or p.get("lo") is None or p["n"] < 2 or p["lo"] <= 0:
        return None
    if verdict(p, margin) != "unclear":
        return p["n"]
    n = p["n"]
    edge = math.log(1 + (margin if margin is not None else p.get("margin") or FLOOR))
    sd = (math.log(p["hi"]) - math.log(p["lo"])) / 2 * math.sqrt(n) / t95(n)
    target = abs(abs(math.log(p["ratio"])) - edge)   # the half-width that clears the edge
    if sd <= 0 or target <= 0:
        return None
    for k in range(n + 1, most + 1):
        if t95(k) * sd / math.sqrt(k) < target:
            return k
    return None
