"""The public claims on ZCube against a rail-optimised Clos of the same GPUs (switch and optics
capex -33%, TTFT P99 -40.6%, inference throughput +15%), each checked against the standings
rows (:mod:`.verdict_table`): reproduced, in direction only, not at this load, or contradicted.
"""
from __future__ import annotations

from testbed.analysis.compare import both_faithful

# (the claim's wording, the figure it is about, ZCube's figure over the Clos's as claimed)
CLAIMS = (("TTFT P99 -40.6%", "TTFT p99 ms", 1 - 0.406),
          ("switch and optics capex -33%", "switch port Tb/s", 1 - 0.33),
          ("inference throughput +15%", "SLO throughput req/s", 1.15))


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
            if not both_faithful(g, i):
                out.append(f"{claim}: {ref.get('scenario')}, {g['placement']}, {name}: no "
                           "verdict: a run was not faithful.")
                continue
            if (ref.get("sweep") or {}).get("draws") and (runs[name].get("sweep") or {}).get(
                    "draws"):
                out.append(_curve_claim(claim, target, g["placement"], ref, runs[name]))
                continue
            z = slo[0] / slo[i]
            out.append(f"{claim}: {ref.get('scenario')}, {g['placement']}: ZCube's SLO "
                       f"throughput is {z:.3f}x {name}'s ({slo[0]:g} against {slo[i]:g} "
                       f"req/s, one rate sweep, no interval; claim {target:.2f}x).")
    if not out:
        out.append(f"{claim}: not measured here (no rate sweep compares ZCube with a Clos of "
                   "the same GPUs).")
    return out


def _curve_claim(claim: str, target: float, placement: str, ref: dict, run: dict) -> str:
    """From two serving curves: ZCube's SLO throughput over the Clos's, paired by draw."""
    from testbed.core.metrics import paired_ratio
    from testbed.core.verdict import verdict
    p = paired_ratio(run["sweep"]["slo_throughput_draws"], ref["sweep"]["slo_throughput_draws"])
    where = f"{ref.get('scenario')}, {placement}, {run['run']} ({run.get('policy')})"
    if p is None or p["lo"] is None:
        return f"{claim}: {where}: no verdict: too few draws met the objective on both."
    measured = (f"ZCube's SLO throughput {p['ratio']:.3f}x the Clos's (95% {p['lo']:.3f}-"
                f"{p['hi']:.3f}, {p['n']} draws of the serving curve; claim {target:.2f}x)")
    # p is ZCube / Clos, higher is better: "ref" means ZCube's is the higher
    says = {"ref": ("reproduced" if p["lo"] <= target <= p["hi"] else
                    "ZCube higher, by more than claimed" if p["lo"] > target else
                    "ZCube higher, by less than claimed"),
            "other": "contradicted: the Clos sustains more here",
            "level": "not reproduced: level", "unclear": "not reproduced: not separated"}
    return f"{claim}: {where}: {measured}; {says[verdict(p)]}."


def merged(said: list[str]) -> list[str]:
    """Claim sentences of several folders, by claim, each once; a claim's ``not measured``
    only where no folder measured it."""
    out = []
    for claim, _, _ in CLAIMS:
        mine = list(dict.fromkeys(s for s in said if s.startswith(claim + ":")))
        measured = [s for s in mine if "not measured here" not in s]
        out += measured or mine
    return out
