"""The standings: one row per run against its group's first and figure, with the paired ratio,
its 95% interval and verdict (docs/verdicts.md), the kind of comparison, the load, and the
marks (:mod:`.verdict_marks`) of emulator effects that may explain a winner.
"""
from __future__ import annotations

from testbed.analysis.claims import claims, merged
from testbed.analysis.compare import PAIRED, both_faithful, paired_of
from testbed.analysis.verdict_marks import (
    CONTROL,
    LIGHT,
    LIGHT_LOAD,
    LIGHT_WHY,
    SEGMENTS,
    STALLS,
    notes,
)
from testbed.core import verdict as rule

FIELDS = ("scenario", "placement", "reference", "run", "policy", "budget", "metric", "ratio",
          "lo", "hi", "n", "margin", "verdict", "winner", "util_max_ref", "util_max_run",
          "hops_ref", "hops_run", "note", "estimator")


def budget(ref: dict, run: dict) -> str:
    """``equal GPUs`` and how the switch-port bandwidth compares (``equal cost`` within 2%)."""
    a, b = ref.get("cost") or {}, run.get("cost") or {}
    gpus = "equal GPUs" if a.get("gpus") == b.get("gpus") else (
        f"{b.get('gpus')} GPUs against {a.get('gpus')}")
    pa, pb = a.get("switch_port_gbps"), b.get("switch_port_gbps")
    if not pa or not pb:
        return gpus
    if abs(pb / pa - 1) <= 0.02:
        return f"{gpus}, equal cost"
    return f"{gpus}, {pb / pa:.2f}x the switch ports"


def _verdict(p, faithful: bool) -> tuple[str, str]:
    """(verdict, who wins: ``ref``, ``run`` or empty) for one paired ratio."""
    if not faithful:
        return "no verdict: a run was not faithful", ""
    if not p or p.get("lo") is None:
        return "no verdict: one repetition, no interval", ""
    v = rule.verdict(p)
    return {"ref": ("reference lower", "ref"), "other": ("run lower", "run"),
            "level": ("level", ""), "unclear": ("not separated", "")}[v]


def light_load(utils: list, hops: list) -> bool:
    """Whether runs whose busiest links were ``utils`` and whose transfers crossed ``hops``
    switches on average compare at light load across different switch counts."""
    if any(v is None for v in list(utils) + list(hops)):
        return False
    return max(utils) < LIGHT_LOAD and max(hops) - min(hops) >= 0.25


def switches_sentence(hops: dict, utils: list) -> str:
    """The report's reason about switches crossed (``hops``: run -> mean switches per
    transfer), worded for light load where :func:`light_load` holds."""
    said = ("Switches crossed per transfer, on average: "
            + ", ".join(f"{n} {h:.2f}" for n, h in hops.items()) + ". ")
    if light_load(utils, list(hops.values())):
        return said + LIGHT_WHY
    return said + ("Fewer switches means fewer shared links; a transfer that stays on one "
                   "switch is limited only by its NIC ports.")


def tail_stalled(summary: dict) -> bool:
    """Whether more than half of a run's slowest 1% of transfers went through a datapath
    stall (``fidelity.stalled.tail``; runs made before it have none)."""
    sd = (summary.get("fidelity") or {}).get("stalled") or {}
    return "tail" in sd and 2 * sd["tail"] > sd["tail_of"]


def sprayed_in_segments(summary: dict) -> bool:
    """Whether a run sprayed on the emulation in 64 KB segments (``large_segments``)."""
    return (summary.get("backend") == "emulation" and bool(summary.get("large_segments"))
            and str(summary.get("policy", "")).startswith("spray"))


def _note(metric: str, who: str, utils: list, hops: list, segments: bool = False,
          stalled: bool = False) -> str:
    if not who:
        return ""
    fct = metric.startswith("FCT")
    return "; ".join(n for n, on in ((LIGHT, fct and light_load(utils, hops)),
                                     (SEGMENTS, fct and segments),
                                     (STALLS, fct and stalled and "p99" in metric)) if on)


def standings(groups: list[dict], runs: dict, controls: dict | None = None) -> list[dict]:
    """The rows (module docstring) of ``groups`` (:func:`testbed.analysis.compare.comparison`)
    over the summaries ``runs`` (run name -> summary.json); ``controls``: (placement,
    reference, run, figure) -> its estimate with the model as a control
    (:func:`testbed.analysis.compare.controlled`: ECMP runs')."""
    out, controls = [], controls or {}
    for g in groups:
        names = g["runs"]
        if len(names) < 2:
            continue
        rows = {r["metric"]: r for r in g["rows"]}
        util = rows["link util max"]["values"]
        ref = runs[names[0]]
        for i, name in enumerate(names[1:], start=1):
            run = runs[name]
            for metric in PAIRED:
                p = paired_of(rows[metric], i)
                c = controls.get((g["placement"], names[0], name, metric))
                used = bool(c)
                p = c if used else p
                verdict, who = _verdict(p, both_faithful(g, i))
                hops = [ref.get("hops_mean"), run.get("hops_mean")]
                out.append({
                    "scenario": run.get("scenario"), "placement": g["placement"],
                    "reference": names[0], "run": name, "policy": run.get("policy"),
                    "budget": budget(ref, run), "metric": metric,
                    "ratio": (p or {}).get("ratio"), "lo": (p or {}).get("lo"),
                    "hi": (p or {}).get("hi"), "n": (p or {}).get("n"),
                    "margin": (p or {}).get("margin"),
                    "verdict": verdict,
                    "winner": {"ref": names[0], "run": name}.get(who, ""),
                    "util_max_ref": util[0], "util_max_run": util[i],
                    "hops_ref": hops[0], "hops_run": hops[1],
                    "note": "; ".join(n for n in (
                        _note(metric, who, [util[0], util[i]], hops,
                              sprayed_in_segments(ref) or sprayed_in_segments(run),
                              tail_stalled(ref) or tail_stalled(run)),
                        CONTROL if used else "") if n),
                    "estimator": "control" if used else "paired"})
    return out


ALIGN = "lllllrrrlr"          # how :func:`table`'s columns align as text


def table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Header and body as the report and ``zcube demo`` show them."""
    head = ["scenario", "placement", "run / reference", "budget", "figure", "ratio",
            "95% interval", "margin", "verdict", "busiest link (ref, run)"]
    body = []
    for r in rows:
        interval = f"{r['lo']:.3f}-{r['hi']:.3f}" if r["lo"] is not None else "-"
        verdict = f"{r['winner']} lower" if r["winner"] else r["verdict"]
        if r.get("note"):
            verdict += f" ({r['note']})"
        util = (f"{r['util_max_ref']:.2f}, {r['util_max_run']:.2f}"
                if r["util_max_ref"] is not None and r["util_max_run"] is not None else "-")
        body.append([r["scenario"] or "-", r["placement"],
                     f"{r['run']} ({r['policy']}) / {r['reference']}", r["budget"],
                     r["metric"][:-3], f"{r['ratio']:.3f}" if r["ratio"] else "-", interval,
                     f"{r['margin']:.1%}" if r.get("margin") else "-", verdict, util])
    return head, body


def report_part(groups: list[dict], runs: dict, out_dir: str) -> dict:
    """The report's ``standings`` table and ``claims``; the rows also go to
    ``out_dir/standings.csv``."""
    import os

    from testbed.core.tables import write_csv
    rows = standings(groups, runs)
    write_csv(rows, FIELDS, os.path.join(out_dir, "standings.csv"))
    head, body = table(rows)
    return {"standings": {"head": head, "rows": body, "note": " ".join(notes(rows)) or None},
            "claims": claims(rows, runs, groups)}


def of_folders(dirs: list[str], models: dict | None = None) -> tuple[list[dict], list[str]]:
    """The rows and claim sentences of several scenarios' output folders, each folder on its
    own (run names repeat across scenarios); ``models``: folder -> the folder of the same
    scenario on the flow-level model over the same seeds and more, whose draws control its
    ECMP runs'."""
    from testbed.analysis.compare import comparison, controlled, load_runs
    rows, said = [], []
    for d in dirs:
        found = load_runs([d])
        runs = {r["run"]: r for r in found}
        groups = comparison(found)
        controls = {(c["placement"], c["ref"], c["run"], c["metric"]): c
                    for c in controlled(found, _runs_or_none(models, d))}
        mine = standings(groups, runs, controls)
        rows += mine
        said += claims(mine, runs, groups)
    return rows, merged(said)


def _runs_or_none(models: dict | None, d: str) -> list[dict]:
    """The model's runs for folder ``d`` (none where it has no folder or that no run)."""
    from testbed.analysis.compare import load_runs
    from testbed.errors import UsageError
    try:
        return load_runs([models[d]]) if d in (models or {}) else []
    except UsageError:
        return []
