"""The one verdict rule: who is lower on a figure, given a paired ratio and its interval.

A ratio ``other / ref`` is compared with an equivalence margin ``m`` (symmetric in logs: the
band from ``1 / (1 + m)`` to ``1 + m``). A winner is named only where the whole 95% interval
lies outside the band; "level" where it lies wholly inside; otherwise "not separated" (two
one-sided tests, as in equivalence testing). The margin is the larger of 1% and the offset
one bring-up adds to every repetition of a run, which no interval within one run can see:
:data:`MARGINS` holds it per backend and figure, as ``benchmarks/bench_aa.py`` measures it
(one fabric run as several copies of itself). Differences smaller than the margin are not
this testbed's to call.
"""
from __future__ import annotations

import math
from typing import Optional

from testbed.core.metrics import t95

__all__ = ["FLOOR", "MARGINS", "margin_for", "verdict", "words", "repetitions_for",
           "describe_margin"]

FLOOR = 0.01    # no difference under 1% is called, whatever a backend repeats

# The largest offset between copies of one fabric in one run (bench_aa.py), where it exceeds
# the floor. On the emulation one bring-up moved every repetition of a copy by up to 0.7% at
# the median, 1.1% at the FCT P99 and 0.3% at the TTFT P99; the flow model and ns-3 compute
# copies identically (no offset), so the floor holds there.
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
