"""The report: one self-contained HTML page (plots embedded) from a ``zcube run`` folder.

It reads only what the run wrote (``run.json`` and each run folder's summary, CSVs and
fabric), so ``zcube report DIR`` rebuilds it at any time.  Plots are also written as PNG
and SVG under ``DIR/plots/``.
"""
from __future__ import annotations

import base64
import csv
import html
import io
import json
import os

from topologies import load_fabric

from testbed.analysis.compare import comparison, load_runs


def _read_csv(path: str) -> list[dict]:
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _figure(w=6.4, h=3.6):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(w, h))
    return fig, fig.add_subplot(111)


class _Plots:
    """Saves each figure as PNG and SVG under plots/ and keeps the PNG for embedding."""

    def __init__(self, out_dir: str):
        self.dir = os.path.join(out_dir, "plots")
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.embedded: dict[str, str] = {}

    def save(self, fig, name: str) -> str:
        fig.tight_layout()
        for ext in ("png", "svg"):
            path = os.path.join(self.dir, f"{name}.{ext}")
            fig.savefig(path, dpi=110 if ext == "png" else None, metadata=(
                {"Date": None} if ext == "svg" else None))
            os.chmod(path, 0o644)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        self.embedded[name] = base64.b64encode(buf.getvalue()).decode()
        return name

    def img(self, name: str, alt: str) -> str:
        return (f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,'
                f'{self.embedded[name]}"><figcaption>{html.escape(alt)}</figcaption></figure>')


def _cdf_plot(plots, name: str, series: dict, xlabel: str, ylabel: str, log: bool = False):
    """One CDF line per run (``series``: run -> values) on one figure, saved as ``name``."""
    fig, ax = _figure()
    for label, values in series.items():
        xs = sorted(values)
        if xs:
            ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post",
                    label=f"{label} (n={len(xs)})")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_xscale("log")
    ax.grid(alpha=.3)
    ax.legend(fontsize=7)
    plots.save(fig, name)


def _first_rep(links: list[dict]) -> list[dict]:
    """The rows of repetition 0 (plots of a run over time show one repetition)."""
    return [r for r in links if r.get("rep", "0") in ("0", 0)]


def _link_loads(links: list[dict]) -> dict:
    """Mean utilisation of each directed link over the samples of repetition 0 in which
    anything moved."""
    rows = _first_rep(links)
    active = sorted({r["t_s"] for r in rows if (_num(r["bytes"]) or 0) > 0}, key=float)
    if not active:
        return {}
    lo, hi = float(active[0]), float(active[-1])
    acc: dict = {}
    for r in rows:
        if lo <= float(r["t_s"]) <= hi:
            acc.setdefault((r["src"], r["dst"]), []).append(_num(r["util"]) or 0.0)
    return {k: sum(v) / len(v) for k, v in acc.items()}


def _heatmap(plots, run, links, vmax: float):
    rows = _first_rep(links)
    if not rows:
        return None
    times = sorted({float(r["t_s"]) for r in rows})
    carried = sorted({(r["src"], r["dst"]) for r in rows if (_num(r["bytes"]) or 0) > 0})
    if not carried:
        return None
    index = {k: i for i, k in enumerate(carried)}
    col = {t: j for j, t in enumerate(times)}
    import numpy as np
    grid = np.zeros((len(carried), len(times)))
    for r in rows:
        k = (r["src"], r["dst"])
        if k in index:
            grid[index[k], col[float(r["t_s"])]] = _num(r["util"]) or 0.0
    fig, ax = _figure(7.0, max(2.5, 0.16 * len(carried) + 1.2))
    im = ax.imshow(grid, aspect="auto", cmap="inferno", vmin=0, vmax=vmax or 1.0,
                   extent=(0, times[-1], len(carried), 0), interpolation="nearest")
    ax.set_yticks([i + 0.5 for i in range(len(carried))])
    ax.set_yticklabels([f"{a}->{b}" for a, b in carried], fontsize=5)
    ax.set_xlabel("time (s)")
    ax.set_title(f"{run}: links that carried traffic (repetition 0)", fontsize=9)
    fig.colorbar(im, ax=ax, label="utilisation (same scale for every run)")
    return plots.save(fig, f"heatmap-{run}")


def _table(head, rows) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
    return "\n".join(out) + "</table>"


def _fmt(v, digits=2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def findings(groups: list[dict], runs: dict, requests: dict) -> list[str]:
    """Plain-language statements drawn from the numbers: who wins which metric, by how much,
    and the measured reasons offered alongside (switches crossed, prefill share of TTFT)."""
    out = []
    for g in groups:
        names = g["runs"]
        if len(names) < 2:
            continue
        ref = names[0]
        rows = {r["metric"]: r for r in g["rows"]}
        for other_i, other in enumerate(names[1:], start=1):
            for metric, better in (("FCT p50 ms", "lower"), ("FCT p99 ms", "lower"),
                                   ("TTFT p99 ms", "lower")):
                row = rows[metric]
                a, b = row["values"][0], row["values"][other_i]
                if a is None or b is None or not a:
                    continue
                ratio = b / a
                ci_a, ci_b = row["ci95"][0] or 0.0, row["ci95"][other_i] or 0.0
                overlap = abs(b - a) <= ci_a + ci_b
                if abs(ratio - 1) < 0.05 or overlap:
                    verdict = (f"{ref} and {other} are level on {metric[:-3]} "
                               f"({_fmt(a)} vs {_fmt(b)} ms"
                               + (", within the confidence intervals)" if overlap else ")"))
                else:
                    winner, loser = (ref, other) if b > a else (other, ref)
                    verdict = (f"{winner} wins on {metric[:-3]}: {_fmt(min(a, b))} ms against "
                               f"{_fmt(max(a, b))} ms for {loser} ({max(a, b) / min(a, b):.2f}x)")
                out.append(f"[{g['placement']}] {verdict}.")
        hops = {n: runs[n].get("hops_mean") for n in names}
        if all(h is not None for h in hops.values()):
            out.append(f"[{g['placement']}] Switches crossed per transfer, on average: "
                       + ", ".join(f"{n} {h:.2f}" for n, h in hops.items())
                       + ". Fewer switches means fewer shared links; a transfer that stays on "
                         "one switch is limited only by its NIC ports.")
        ttfb = {n: runs[n].get("ttfb_p50_ms") for n in names}
        slow = {n: (runs[n].get("slowdown") or {}).get("p50") for n in names}
        if all(v is not None for v in ttfb.values()) and all(v is not None for v in slow.values()):
            out.append(f"[{g['placement']}] Median time from a transfer's start to its first "
                       f"byte at the receiver: " + ", ".join(f"{n} {v:.1f} ms" for n, v in ttfb.items())
                       + "; median FCT over the time its bytes need at the full NIC rate: "
                       + ", ".join(f"{n} {v:.2f}x" for n, v in slow.items())
                       + ". Where both are far above 1x the transfers are short enough that "
                         "connection start-up and per-hop latency, not bandwidth, set the FCT.")
        share = {n: requests[n] for n in names if requests.get(n) is not None}
        if share:
            out.append(f"[{g['placement']}] Prefill (queueing included) is "
                       + ", ".join(f"{100 * s:.0f}% of the mean TTFT on {n}" for n, s in share.items())
                       + ": where it dominates, fabric differences move TTFT little.")
    costs = {}
    for n, s in runs.items():
        costs.setdefault(s["fabric"], s["cost"])
    if len(costs) >= 2:
        (fa, ca), *rest = list(costs.items())
        for fb, cb in rest:
            out.append(f"Cost: {fa} uses {ca['switches']} switches and "
                       f"{ca['switch_port_gbps'] / 1000:.1f} Tb/s of switch ports; {fb} uses "
                       f"{cb['switches']} switches and {cb['switch_port_gbps'] / 1000:.1f} Tb/s "
                       f"({ca['switch_port_gbps'] / cb['switch_port_gbps']:.2f}x).")
    return out


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}td,th{border:1px solid #ccc;
padding:.25em .6em;text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f3f5f8}figure{display:inline-block;margin:.5em}img{max-width:100%}
figcaption{font-size:.85em;color:#555}.note{color:#555;font-size:.9em}li{margin:.3em 0}"""


def build_report(out_dir: str) -> str:
    """Write ``out_dir/report.html`` (and plots/); returns its path."""
    from topologies.cost import cost_table
    from topologies.draw import draw
    runs_list = load_runs([out_dir])
    meta = {}
    if os.path.isfile(os.path.join(out_dir, "run.json")):
        with open(os.path.join(out_dir, "run.json")) as f:
            meta = json.load(f)
    runs = {r["run"]: r for r in runs_list}
    plots = _Plots(out_dir)
    transfers = {n: _read_csv(os.path.join(r["_dir"], "transfers.csv")) for n, r in runs.items()}
    reqs = {n: _read_csv(os.path.join(r["_dir"], "requests.csv")) for n, r in runs.items()}
    links = {n: _read_csv(os.path.join(r["_dir"], "links.csv")) for n, r in runs.items()}
    for n, r in runs.items():
        hops = [_num(t["hops"]) for t in transfers[n] if _num(t.get("hops")) is not None]
        r["hops_mean"] = sum(hops) / len(hops) if hops else None
        gaps = sorted(_num(t["first_byte_s"]) - _num(t["start_s"]) for t in transfers[n]
                      if _num(t.get("first_byte_s")) is not None and _num(t.get("start_s")) is not None)
        r["ttfb_p50_ms"] = 1000 * gaps[len(gaps) // 2] if gaps else None
    prefill_share = {}
    for n, rows in reqs.items():
        done = [q for q in rows if _num(q["ttft_ms"]) is not None]
        if done:
            pre = sum((_num(q["queue_s"]) + _num(q["prefill_s"])) * 1000 for q in done)
            prefill_share[n] = pre / sum(_num(q["ttft_ms"]) for q in done)
    groups = comparison(runs_list)
    parts = []

    # drawings coloured by utilisation
    drawn = []
    for n, r in runs.items():
        fab = load_fabric(os.path.join(r["_dir"], "fabric.json"))
        loads = _link_loads(links[n])
        for ext in ("png", "svg"):
            draw(fab, os.path.join(plots.dir, f"fabric-{n}.{ext}"), loads=loads or None,
                 title=f"{n}: mean link utilisation")
            os.chmod(os.path.join(plots.dir, f"fabric-{n}.{ext}"), 0o644)
        with open(os.path.join(plots.dir, f"fabric-{n}.png"), "rb") as f:
            plots.embedded[f"fabric-{n}"] = base64.b64encode(f.read()).decode()
        drawn.append(plots.img(f"fabric-{n}", f"{fab.label} ({n}): cables coloured by mean "
                                              f"utilisation while traffic flowed"))
    # CDFs
    _cdf_plot(plots, "fct-cdf", {n: [_num(t["fct_ms"]) for t in transfers[n]
                                      if _num(t["fct_ms"]) is not None] for n in runs},
              "flow completion time (ms)", "fraction of transfers", log=True)
    _cdf_plot(plots, "ttft-cdf", {n: [_num(q["ttft_ms"]) for q in reqs[n]
                                       if _num(q["ttft_ms"]) is not None] for n in runs},
              "time to first token (ms)", "fraction of requests")
    fig, ax = _figure()
    names = list(runs)
    values = sorted({round(_num(t["hops"]), 2) for n in names for t in transfers[n]
                     if _num(t.get("hops")) is not None})
    width = 0.8 / max(1, len(names))
    for i, n in enumerate(names):
        counts = [sum(1 for t in transfers[n] if _num(t.get("hops")) is not None
                      and round(_num(t["hops"]), 2) == v) for v in values]
        ax.bar([k + i * width for k in range(len(values))], counts, width, label=n)
    ax.set_xticks([k + width * (len(names) - 1) / 2 for k in range(len(values))])
    ax.set_xticklabels([f"{v:g}" for v in values])
    ax.set_xlabel("switches crossed per transfer (mean over its paths)")
    ax.set_ylabel("transfers")
    ax.legend(fontsize=7)
    plots.save(fig, "hops")
    vmax = max((_num(r["util"]) or 0.0 for n in runs for r in _first_rep(links[n])),
               default=1.0)
    heat = [h for h in (_heatmap(plots, n, links[n], vmax) for n in runs) if h]

    first = runs_list[0]
    scale = first.get("scale") or {}
    parts.append(f"<h1>ZCube testbed report: {html.escape(str(meta.get('scenario', first.get('scenario'))))}</h1>")
    parts.append(f"<p>{len(runs)} runs on the <b>{html.escape(first.get('backend', '?'))}</b> "
                 f"backend: {', '.join(html.escape(n) for n in runs)}. "
                 f"{first.get('repetitions', 1)} repetition(s) each (seeds "
                 f"{html.escape(', '.join(map(str, meta.get('seeds', []))))}); every fabric "
                 f"carried the same requests.</p>")
    parts.append("<h2>What the numbers say</h2><ul>" + "".join(
        f"<li>{html.escape(s)}</li>" for s in findings(groups, runs, prefill_share)) + "</ul>")
    parts.append("<h2>Comparison</h2>")
    for g in groups:
        head = [f"placement {g['placement']}"] + g["runs"] + [f"{n}/{g['runs'][0]}" for n in g["runs"][1:]]
        body = []
        for row in g["rows"]:
            cells = [_fmt(v, row["digits"]) + (f" ±{c:.{max(1, row['digits'])}f}" if c else "")
                     for v, c in zip(row["values"], row["ci95"])]
            body.append([row["metric"]] + cells + [_fmt(r, 3) for r in row["ratios"][1:]])
        parts.append(_table(head, body))
    parts.append("<p class=note>± is the 95% confidence half-width across repetitions "
                 "(Student's t). Percentiles pool every transfer or request of all repetitions.</p>")
    parts.append("<h2>Spread across repetitions</h2>")
    body = []
    for n, r in runs.items():
        for k, s in (r.get("spread") or {}).items():
            if s:
                body.append([n, k, _fmt(s["mean"]), _fmt(s["sd"]), _fmt(s["min"]), _fmt(s["max"]), s["n"]])
    parts.append(_table(["run", "metric", "mean", "sd", "min", "max", "n"], body))
    parts.append("<h2>Cost</h2><pre>" + html.escape(cost_table(
        list({r["fabric"]: r["cost"] for r in runs_list}.values()))) + "</pre>")
    parts.append("<h2>The fabrics, coloured by utilisation</h2>" + "".join(drawn))
    parts.append("<h2>Completion times</h2>" + plots.img("fct-cdf", "FCT CDF per run")
                 + plots.img("ttft-cdf", "TTFT CDF per run"))
    parts.append("<h2>Path lengths</h2>" + plots.img("hops", "switches crossed per transfer"))
    parts.append("<h2>Link utilisation over time</h2>" + "".join(
        plots.img(h, h.replace("heatmap-", "") + ": utilisation per link over time") for h in heat))
    link = scale.get("link")
    parts.append("<h2>Scale</h2><p>Links run at " + _fmt(first.get("link_mbps"), 0)
                 + f" Mb/s per GPU NIC in place of {_fmt(first.get('nic_gbps'), 0)} Gb/s, a factor "
                 f"of {_fmt(link, 6)} (1:{_fmt(1 / link, 0) if link else '-'}); KV-cache sizes are "
                 f"multiplied by the same factor ({_fmt(scale.get('size'), 6)}), so a transfer takes "
                 f"as long here as in the real system, relative to prefill and decode times. "
                 "Absolute FCTs are therefore in real-system milliseconds only up to the "
                 "emulator's own overheads (TCP, queueing in OVS); ratios between fabrics are what "
                 "carries over.</p>")
    ver = meta.get("versions") or {}
    parts.append("<h2>Machine and software</h2>" + _table(
        ["what", "version"], [[k, v if v is not None else "-"] for k, v in ver.items()]))
    fault_rows = [[n, f.get("rep"), f["element"], f["t_s"],
                   _fmt(1000 * f["since_injection_s"], 1) if f.get("since_injection_s") else "-",
                   f.get("transfers_affected"), f.get("transfers_retried"),
                   f.get("transfers_lost"), f.get("transfers_cut_off"),
                   (f.get("first_byte_after_ms") or {}).get("max", "-")]
                  for n, r in runs.items() for f in r.get("faults") or []]
    if fault_rows:
        parts.append("<h2>Faults</h2><p>Each element went down at the time shown (workload "
                     "time, s). Rerouted: from taking the port down to the controller's last "
                     "barrier reply. Affected: transfers in flight whose pair had a path "
                     "through it. Lost: affected transfers that did not complete verified "
                     "although their GPUs stayed connected (0 is the only right answer). "
                     "Resumed: the longest time from the fault to the first byte of an "
                     "attempt started again over another port pairing.</p>" + _table(
                         ["run", "rep", "element", "down at s", "rerouted ms", "affected",
                          "started again", "lost", "cut off", "resumed ms"], fault_rows))
    extra = {n: r.get("calibration") for n, r in runs.items() if r.get("calibration")}
    if extra:
        parts.append("<h2>Calibration (iperf3)</h2>" + _table(
            ["run", "all hosts at once Mb/s", "shaped total Mb/s", "offered Mb/s"],
            [[n, c["aggregate_mbps"], c["aggregate_shaped_mbps"], runs[n].get("offered_mbps")]
             for n, c in extra.items()]))
    doc = ("<!doctype html><html><head><meta charset=utf-8><title>ZCube testbed report</title>"
           f"<style>{CSS}</style></head><body>" + "\n".join(parts) + "</body></html>")
    path = os.path.join(out_dir, "report.html")
    with open(path, "w") as f:
        f.write(doc)
    os.chmod(path, 0o644)
    return path
