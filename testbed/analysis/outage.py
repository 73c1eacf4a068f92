"""What a fault costs each fabric during its outage, against the same fabric, policy and
seeds without it (its twin with ``faults: false``): the share of GPUs that can still reach
every other, transfers lost, and the FCT and TTFT P99 of what the outage touched, paired
per repetition.  The outage of a repetition runs from its first fault to that fault's
restore (or the run's end); it touches the transfers that became ready in it and the
requests those belong to."""
from __future__ import annotations

import csv
import json
import os

from testbed.core.metrics import mean, paired_ratio, percentile
from testbed.core.verdict import verdict

# the verdict on (with the fault) / (without it), in this table's words
SAYS = {"ref": "slower with the fault", "other": "faster with the fault", "level": "level",
        "unclear": "not separated"}

FIELDS = ("fabric", "control", "elements", "gpus_reachable", "transfers", "lost", "cut_off",
          "fct_p99_ms", "fct_p99_ms_control", "fct_ratio", "fct_lo", "fct_hi", "fct_verdict",
          "ttft_p99_ms", "ttft_p99_ms_control", "ttft_ratio", "ttft_lo", "ttft_hi",
          "ttft_verdict")


def twins(summaries: list[dict]) -> list[tuple[dict, dict]]:
    """``(faulted, control)`` summaries of the same builder, parameters, policy and placement,
    one run with faults and one without."""
    def key(s):
        return (s.get("builder"), json.dumps(s.get("params"), sort_keys=True), s.get("policy"),
                s.get("placement"), s.get("_folder"))
    out = []
    for s in summaries:
        if not s.get("faults"):
            continue
        control = next((c for c in summaries if not c.get("faults") and key(c) == key(s)), None)
        if control is not None:
            out.append((s, control))
    return out


def _read(folder: str, name: str) -> list[dict]:
    with open(os.path.join(folder, name), newline="") as f:
        return list(csv.DictReader(f))


def windows(faults: list[dict]) -> dict[int, tuple[float, float, str]]:
    """Per repetition, ``(from, to, element)`` of its first fault that ran: until its
    restore, or the end's."""
    out: dict = {}
    for rec in sorted(faults, key=lambda r: (r.get("rep", 0), r["t_s"])):
        rep = rec.get("rep", 0)
        if rep in out or rec["action"] != "down" or "error" in rec:
            continue
        back = min((r["t_s"] for r in faults if r.get("rep", 0) == rep and r["action"] == "up"
                    and r["t_s"] >= rec["t_s"] and r["element"] in (rec["element"],
                                                                      "(all, at the end)")),
                   default=float("inf"))
        out[rep] = (rec["t_s"], back, rec["element"])
    return out


def _p99(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return percentile(values, 99) if values else None


def outage(faulted: dict, control: dict) -> dict:
    """The figures of one twin (:data:`FIELDS`), from their run folders."""
    from controller.failures import Failures, reachable_share
    from topologies import load_fabric
    fdir, cdir = faulted["_dir"], control["_dir"]
    win = windows(faulted["faults"])
    fab = load_fabric(os.path.join(fdir, "fabric.json"))
    reach = min((reachable_share(fab, Failures.parse(fab, [e])) for _, _, e in win.values()),
                default=1.0)
    ft, ct = _read(fdir, "transfers.csv"), _read(cdir, "transfers.csv")
    fr, cr = _read(fdir, "requests.csv"), _read(cdir, "requests.csv")
    fct, ttft = ([], []), ([], [])
    lost = cut = n = 0
    cut_pairs = _cut_pairs(fab, faulted, win)
    for rep, (t0, t1, _) in sorted(win.items()):
        keys = {_key(r) for r in ft if int(r["rep"] or 0) == rep
                and t0 <= float(r["ready_s"]) < t1}
        reqs = {k[0] for k in keys}
        mine = [r for r in ft if int(r["rep"] or 0) == rep and _key(r) in keys]
        n += len(mine)
        bad = [r for r in mine if r["verified"] != "True"]
        cut += sum(1 for r in bad if (r["src"], r["dst"]) in cut_pairs.get(rep, ()))
        lost += sum(1 for r in bad if (r["src"], r["dst"]) not in cut_pairs.get(rep, ()))
        for side, rows, req_rows in ((0, ft, fr), (1, ct, cr)):
            fct[side].append(_p99([_num(r["fct_ms"]) for r in rows
                                   if int(r["rep"] or 0) == rep and _key(r) in keys]))
            ttft[side].append(_p99([_num(r["ttft_ms"]) for r in req_rows
                                    if int(r["rep"] or 0) == rep and r["request"] in reqs]))
    out = {"fabric": faulted.get("run"), "control": control.get("run"),
           "elements": " ".join(sorted({e for _, _, e in win.values()})),
           "gpus_reachable": round(reach, 4), "transfers": n, "lost": lost, "cut_off": cut}
    for name, (with_, without) in (("fct", fct), ("ttft", ttft)):
        p = paired_ratio(without, with_)
        out.update({f"{name}_p99_ms": mean(with_), f"{name}_p99_ms_control": mean(without),
                    f"{name}_ratio": p and p["ratio"], f"{name}_lo": p and p["lo"],
                    f"{name}_hi": p and p["hi"],
                    f"{name}_verdict": SAYS[verdict(p)] if p else "no pair"})
    return out


def _cut_pairs(fab, faulted: dict, win: dict) -> dict:
    """Per repetition, the GPU pairs its fault cut off (answering ``in``)."""
    from controller.failures import CutPairs, Failures
    return {rep: CutPairs(fab, Failures.parse(fab, [elem]))
            for rep, (_, _, elem) in win.items()}


def _key(r: dict) -> tuple:
    return (r["request"], r["chunk"], r["src"], r["dst"])


def _num(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def outages(summaries: list[dict]) -> list[dict]:
    """:func:`outage` of every twin among ``summaries`` (each with ``_dir``, its folder)."""
    return [outage(f, c) for f, c in twins(summaries)]


def record(runs: list[dict], out: str) -> list[dict]:
    """:func:`outages` of ``runs``, written into ``out`` (:func:`write`) when there are any."""
    rows = outages(runs)
    if rows:
        write(rows, out)
    return rows


def write(rows: list[dict], out: str) -> None:
    """``outage.csv`` and ``outage.json`` in the scenario's output folder."""
    from testbed.core.tables import write_csv
    write_csv(rows, FIELDS, os.path.join(out, "outage.csv"))
    with open(os.path.join(out, "outage.json"), "w") as f:
        json.dump(rows, f, indent=1)


def to_text(rows: list[dict]) -> str:
    """The outage table, two lines per fabric, or nothing without twins."""
    if not rows:
        return ""
    lines = ["outage: each fabric's first fault, from its failure to its restore, against "
             "its twin without faults (same seeds)"]
    for r in rows:
        lines.append(f"  {r['fabric']} ({r['elements']} down): {r['gpus_reachable']:.0%} of "
                     f"GPUs reachable; {r['transfers']} transfers ready during it, "
                     f"{r['lost']} lost, {r['cut_off']} cut off")
        parts = []
        for name, label in (("fct", "FCT p99"), ("ttft", "TTFT p99")):
            if r[f"{name}_ratio"] is None:
                parts.append(f"{label}: no pair")
                continue
            ci = (f" (95% {r[f'{name}_lo']:.2f}-{r[f'{name}_hi']:.2f})"
                  if r[f"{name}_lo"] is not None else "")
            parts.append(f"{label} {r[f'{name}_p99_ms']:.1f} ms against "
                         f"{r[f'{name}_p99_ms_control']:.1f}, x{r[f'{name}_ratio']:.2f}{ci}, "
                         f"{r[f'{name}_verdict']}")
        lines.append("    " + "; ".join(parts))
    return "\n".join(lines) + "\n"
