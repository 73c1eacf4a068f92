"""Serving curves, as serving benchmarks plot them: each fabric's P99 TTFT against the offered
request rate from a scenario's sweep drawn several times (``sweep.draws``) or run to
saturation (``sweep.until_miss``), its SLO throughput (the largest rate meeting the
objective) with a 95% interval over the draws, and its knee; the SLO throughput's ratio to
the first fabric's, paired by draw (the same requests), with the one verdict rule turned
round, as more throughput is better."""
from __future__ import annotations

import json
import os

from testbed.core.metrics import paired_ratio
from testbed.core.verdict import verdict

POINT_FIELDS = ("fabric", "placement", "rate_per_s", "draw", "seed", "ttft_p99_ms",
                "slo_ttft_ms")
FIELDS = ("fabric", "placement", "slo_ttft_ms", "draws", "slo_throughput_per_s",
          "slo_throughput_ci95", "knee_per_s", "saturated", "ratio", "lo", "hi", "verdict")


def curves(runs: list[dict]) -> list[dict]:
    """The runs whose sweep is a serving curve, in their order."""
    return [r for r in runs if (r.get("sweep") or {}).get("draws")]


def point_rows(runs: list[dict]) -> list[dict]:
    """One row per fabric, rate and draw."""
    out = []
    for r in curves(runs):
        sw = r["sweep"]
        for p in sw["points"]:
            for d, v in enumerate(p["ttft_p99_draws"]):
                out.append({"fabric": r["run"], "placement": sw.get("placement"),
                            "rate_per_s": p["rate_per_s"], "draw": d,
                            "seed": sw["seeds"][d], "ttft_p99_ms": v,
                            "slo_ttft_ms": sw["slo_ttft_ms"]})
    return out


def table(runs: list[dict]) -> list[dict]:
    """Per fabric: SLO throughput, its interval, knee, whether it saturated, and its ratio to
    the first curve's, paired by draw (draws where either met no rate left out)."""
    rows = curves(runs)
    if not rows:
        return []
    ref = rows[0]["sweep"]["slo_throughput_draws"]
    out = []
    for r in rows:
        sw = r["sweep"]
        p = None if r is rows[0] else paired_ratio(ref, sw["slo_throughput_draws"])
        out.append({"fabric": r["run"], "placement": sw.get("placement"),
                    "slo_ttft_ms": sw["slo_ttft_ms"], "draws": sw["draws"],
                    "slo_throughput_per_s": r.get("slo_throughput_per_s"),
                    "slo_throughput_ci95": sw.get("slo_throughput_ci95"),
                    "knee_per_s": sw.get("knee_per_s"), "saturated": sw.get("saturated"),
                    "ratio": p and p["ratio"], "lo": p and p["lo"], "hi": p and p["hi"],
                    "verdict": says(p, rows[0]["run"], r["run"]) if p else ""})
    return out


def says(p: dict, ref: str, other: str) -> str:
    """The verdict on ``other``/``ref`` SLO throughput, in words (higher is better)."""
    return {"other": f"{ref} higher", "ref": f"{other} higher", "level": "level",
            "unclear": "not separated"}[verdict(p)]


def record(runs: list[dict], out: str) -> list[dict]:
    """:func:`table` of ``runs``, with ``serving_curve.csv`` (every point) and
    ``serving_curve.json`` (the table and the points) written into ``out`` when there are
    curves."""
    rows = table(runs)
    if rows:
        from testbed.core.tables import write_csv
        points = point_rows(runs)
        write_csv(points, POINT_FIELDS, os.path.join(out, "serving_curve.csv"))
        with open(os.path.join(out, "serving_curve.json"), "w") as f:
            json.dump({"fabrics": rows, "points": points}, f, indent=1)
    return rows


def to_text(rows: list[dict]) -> str:
    """The SLO-throughput table, a line per fabric, or nothing without curves."""
    if not rows:
        return ""
    lines = [f"serving curve: SLO throughput (largest rate with TTFT p99 <= "
             f"{rows[0]['slo_ttft_ms']:g} ms) over {rows[0]['draws']} draw(s); ratio to "
             f"{rows[0]['fabric']}, paired by draw"]
    for r in rows:
        thr = r["slo_throughput_per_s"]
        ci = f" ±{r['slo_throughput_ci95']:g}" if r["slo_throughput_ci95"] else ""
        ratio = (f"; ratio {r['ratio']:.3f}" + (f" (95% {r['lo']:.3f}-{r['hi']:.3f})"
                                                 if r["lo"] is not None else "")
                 + f": {r['verdict']}") if r["ratio"] is not None else ""
        lines.append(f"  {r['fabric']}: {'none' if thr is None else f'{thr:g}{ci}'} req/s, "
                     f"knee {r['knee_per_s']} req/s"
                     + ("" if r["saturated"] else ", not saturated") + ratio)
    return "\n".join(lines) + "\n"


def draw(ax, runs: list[dict]) -> bool:
    """Every curve's mean P99 TTFT against rate (95% bars) and the objective on ``ax``;
    False when there is none."""
    rows = curves(runs)
    for r in rows:
        pts = [p for p in r["sweep"]["points"] if p["ttft_p99_ms"] is not None]
        ax.errorbar([p["rate_per_s"] for p in pts], [p["ttft_p99_ms"] for p in pts],
                    yerr=[p.get("ttft_p99_ci95") or 0 for p in pts], marker="o",
                    capsize=3, label=r["run"])
    if not rows:
        return False
    ax.axhline(rows[0]["sweep"]["slo_ttft_ms"], color="grey", linestyle="--",
               label="objective")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("P99 TTFT (ms)")
    ax.set_yscale("log")
    ax.grid(alpha=.3)
    ax.legend(fontsize=7)
    return True
