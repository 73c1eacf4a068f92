"""Where each fabric wins and loses, and which public claims a set of runs reproduces.

One row per (scenario, placement, run compared with the group's first run, figure): the
paired ratio ``run / first`` with its 95% interval
(:func:`testbed.analysis.compare.paired_of`) and the verdict it supports
(:func:`testbed.core.verdict.verdict`), beside what kind of comparison it is (the run's
routing policy, equal GPUs or equal switch-port budget) and the load it was measured at (the
busiest link's utilisation). A winner is named only where both runs were faithful and the
whole interval lies outside the figure's equivalence margin; a run that was not faithful, or
one repetition (no interval), gives no verdict, whatever its numbers. An FCT winner at light
load (no link of either run above ``LIGHT_LOAD`` in any 0.5 s window) between fabrics whose
transfers cross different numbers of switches is marked ``light load``: transfers hardly
met, so the difference is what each switch crossed costs at these scaled-down rates (a
switch forwards a whole segment before the next hop starts: milliseconds here, nanoseconds
at 400 Gb/s), not contention in the fabric. One where either run sprayed (``spray``
policies) on the emulation with ``large_segments`` is marked ``64 KB segments``: sprayed
sub-flows of a few whole segments that meet take turns a segment at a time, which lengthened
the spraying Clos's tail. An FCT P99 winner where more than half of either run's slowest 1%
of transfers went through a stall of the emulator's datapath (the fidelity record's
``stalled.tail``) is marked ``datapath stalls``. Given the flow-level model's runs of the
same scenario over the same seeds and more, an ECMP run's rows take the ratio with the model
as a control variate (:func:`testbed.analysis.compare.controlled`) in place of the plain
one, marked ``model as control``; spraying runs keep the plain one. The lines under the
table that say why, once per mark, are :func:`testbed.analysis.marks.notes`.

The public claims on ZCube against a rail-optimised Clos of the same GPUs (press on the
GLM-5.1 deployment, May 2026: switch and optics capex -33%, TTFT P99 -40.6%, inference
throughput +15%) are then checked against those rows: reproduced, in direction only, not at
this load, or contradicted.
"""
from __future__ import annotations

from testbed.analysis.compare import PAIRED, paired_of
from testbed.analysis.marks import (
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

# (claim, figure it is about, ZCube's figure over the Clos's, the claim's wording)
CLAIMS = (("TTFT P99 -40.6%", "TTFT p99 ms", 1 - 0.406),
          ("switch and optics capex -33%", "switch port Tb/s", 1 - 0.33),
          ("inference throughput +15%", "SLO throughput req/s", 1.15))


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


def _both_faithful(g: dict, i: int) -> bool:
    """Whether neither the group's first run nor its run ``i`` was marked not faithful."""
    faithful = g.get("faithful") or [None] * len(g["runs"])
    return faithful[0] is not False and faithful[i] is not False


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
                verdict, who = _verdict(p, _both_faithful(g, i))
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


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _is_zcube_vs_clos(ref: dict, run: dict) -> bool:
    return (ref.get("builder") == "zcube" and run.get("builder") in ("roft", "fattree")
            and run.get("policy") in ("ecmp", "shortest")
            and (ref.get("cost") or {}).get("gpus") == (run.get("cost") or {}).get("gpus"))


def claims(rows: list[dict], runs: dict, groups: list[dict]) -> list[str]:
    """One sentence per public claim (module docstring) about what these runs show."""
    pairs = [r for r in rows if _is_zcube_vs_clos(runs[r["reference"]], runs[r["run"]])]
    out = []
    for claim, metric, target in CLAIMS:
        if metric == "TTFT p99 ms":
            out += _ttft_claim(claim, target, [r for r in pairs if r["metric"] == metric])
        elif metric == "switch port Tb/s":
            out += _cost_claim(claim, target, pairs, runs)
        else:
            out += _throughput_claim(claim, target, groups, runs)
    return out


def _ttft_claim(claim: str, target: float, rows: list[dict]) -> list[str]:
    """ZCube's TTFT P99 over the Clos's is ``1 / ratio`` (rows hold Clos / ZCube)."""
    out = []
    for r in rows:
        where = (f"{r['scenario']}, {r['placement']}, {r['run']} ({r['policy']}; busiest "
                 f"link {_util(r)})")
        if r["verdict"].startswith("no verdict"):
            out.append(f"{claim}: {where}: {r['verdict']}.")
            continue
        z, lo, hi = 1 / r["ratio"], 1 / r["hi"], 1 / r["lo"]
        measured = (f"ZCube's TTFT P99 {_pct(z - 1)} against the Clos's (95% {_pct(lo - 1)} "
                    f"to {_pct(hi - 1)})")
        if r["winner"] == r["reference"]:
            says = ("reproduced" if lo <= target <= hi else
                    "ZCube lower, by less than claimed" if target < lo else
                    "ZCube lower, by more than claimed")
        elif r["winner"] == r["run"]:
            says = "contradicted: the Clos is lower here"
        else:
            says = f"not reproduced: {r['verdict']}"
        out.append(f"{claim}: {where}: {measured}; {says}.")
    return out


def _util(r: dict) -> str:
    a, b = r["util_max_ref"], r["util_max_run"]
    if a is None or b is None:
        return "utilisation not measured"
    return f"{a:.2f} on ZCube, {b:.2f} on the Clos"


def _cost_claim(claim: str, target: float, rows: list[dict], runs: dict) -> list[str]:
    seen, out = set(), []
    for r in rows:
        key = (runs[r["reference"]]["fabric"], runs[r["run"]]["fabric"])
        if key in seen:
            continue
        seen.add(key)
        a = runs[r["reference"]]["cost"]["switch_port_gbps"]
        b = runs[r["run"]]["cost"]["switch_port_gbps"]
        out.append(f"{claim}: {key[0]} has {a / b:.3f}x the switch-port bandwidth of {key[1]} "
                   f"({_pct(a / b - 1)}; claim {_pct(target - 1)}), from the cost model by "
                   "construction, not measured; prices are not modelled.")
    return out


def _throughput_claim(claim: str, target: float, groups: list[dict], runs: dict) -> list[str]:
    out = []
    for g in groups:
        rows = {r["metric"]: r for r in g["rows"]}
        slo = rows["SLO throughput req/s"]["values"]
        ref = runs[g["runs"][0]]
        for i, name in enumerate(g["runs"][1:], start=1):
            if not _is_zcube_vs_clos(ref, runs[name]) or not slo[0] or not slo[i]:
                continue
            if not _both_faithful(g, i):
                out.append(f"{claim}: {ref.get('scenario')}, {g['placement']}, {name}: no "
                           "verdict: a run was not faithful.")
                continue
            z = slo[0] / slo[i]
            out.append(f"{claim}: {ref.get('scenario')}, {g['placement']}: ZCube's SLO "
                       f"throughput is {z:.3f}x {name}'s ({slo[0]:g} against {slo[i]:g} "
                       f"req/s, one rate sweep, no interval; claim {target:.2f}x).")
    if not out:
        out.append(f"{claim}: not measured here (no rate sweep compares ZCube with a Clos of "
                   "the same GPUs).")
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
    return rows, _merge(said)


def _runs_or_none(models: dict | None, d: str) -> list[dict]:
    """The model's runs for folder ``d`` (none where it has no folder or that no run)."""
    from testbed.analysis.compare import load_runs
    from testbed.errors import UsageError
    try:
        return load_runs([models[d]]) if d in (models or {}) else []
    except UsageError:
        return []


def _merge(said: list[str]) -> list[str]:
    """Claim sentences of several folders, by claim, each once; a claim's ``not measured``
    only where no folder measured it."""
    out = []
    for claim, _, _ in CLAIMS:
        mine = list(dict.fromkeys(s for s in said if s.startswith(claim + ":")))
        measured = [s for s in mine if "not measured here" not in s]
        out += measured or mine
    return out
