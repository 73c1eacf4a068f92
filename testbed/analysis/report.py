"""The report: one self-contained HTML page from a ``zcube run`` folder, rendered from
``templates/report.html.j2`` with its plots embedded (and written under ``DIR/plots/``).  It reads
only what the run wrote, so ``zcube report DIR`` rebuilds it at any time; every number it
states is one summary.json holds.
"""
from __future__ import annotations

import base64
import csv
import io
import json
import os

from testbed.analysis import serving_curve
from testbed.analysis.compare import comparison, load_runs, table_rows, trace_skips
from testbed.analysis.render import render
from testbed.analysis.report_findings import as_text, findings
from testbed.analysis.verdict_table import report_part
from testbed.core import metrics
from testbed.core.fidelity import THRESHOLDS
from testbed.core.tables import fewer
from topologies import load_fabric


def _read_csv(path: str) -> list[dict]:
    with open(path, newline="") if os.path.isfile(path) else io.StringIO() as f:
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
        buf = io.BytesIO()                    # rendered once: the file and the embedded copy
        fig.savefig(buf, format="png", dpi=110)
        png, svg = (os.path.join(self.dir, f"{name}.{ext}") for ext in ("png", "svg"))
        with open(png, "wb") as f:
            f.write(buf.getvalue())
        fig.savefig(svg, metadata={"Date": None})
        for path in (png, svg):
            os.chmod(path, 0o644)
        self.embedded[name] = base64.b64encode(buf.getvalue()).decode()
        return name

    def embed_file(self, name: str) -> None:
        with open(os.path.join(self.dir, f"{name}.png"), "rb") as f:
            self.embedded[name] = base64.b64encode(f.read()).decode()

    def figure(self, name: str, alt: str) -> dict:
        """What the template embeds: ``{"alt", "png"}`` (base64)."""
        return {"alt": alt, "png": self.embedded[name]}


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
    """The rows of repetition 0 (plots over time show one repetition)."""
    return [r for r in links if r.get("rep", "0") in ("0", 0)]


def _link_loads(links: list[dict]) -> dict:
    """:func:`metrics.link_means` of repetition 0's samples (links.csv rows as text)."""
    return metrics.link_means([{"t_s": float(r["t_s"]), "src": r["src"], "dst": r["dst"],
                                "bytes": _num(r["bytes"]) or 0.0, "util": _num(r["util"]) or 0.0}
                               for r in _first_rep(links)])


HEATMAP_FLOOR = 0.01     # the least utilisation, in some sample, of a link the heatmap shows


HEATMAP_LABELS = 120      # links a heatmap names row by row; more share one tall figure


def _heatmap(plots, run, links, vmax: float):
    rows = _first_rep(links)
    if not rows:
        return None
    times = sorted({float(r["t_s"]) for r in rows})
    # links the KV data crossed: a link that carried only acknowledgements (the reverse
    # direction on the emulation) never reaches 1% and would only add rows
    used = sorted({(r["src"], r["dst"]) for r in rows
                   if (_num(r["util"]) or 0) >= HEATMAP_FLOOR})
    if not used:
        return None
    index = {k: i for i, k in enumerate(used)}
    col = {t: j for j, t in enumerate(times)}
    import numpy as np
    grid = np.zeros((len(used), len(times)))
    for r in rows:
        k = (r["src"], r["dst"])
        if k in index:
            grid[index[k], col[float(r["t_s"])]] = _num(r["util"]) or 0.0
    labelled = len(used) <= HEATMAP_LABELS
    fig, ax = _figure(7.0, max(2.5, 0.16 * min(len(used), HEATMAP_LABELS) + 1.2))
    im = ax.imshow(grid, aspect="auto", cmap="inferno", vmin=0, vmax=vmax or 1.0,
                   extent=(0, times[-1], len(used), 0), interpolation="nearest")
    if labelled:
        ax.set_yticks([i + 0.5 for i in range(len(used))])
        ax.set_yticklabels([f"{a}->{b}" for a, b in used], fontsize=5)
    else:                   # thousands of rows: a label each would be unreadable, and slow
        ax.set_ylabel(f"{len(used):,} links, by name")
    ax.set_xlabel("time (s)")
    ax.set_title(f"{run}: links that traffic crossed (repetition 0)", fontsize=9)
    fig.colorbar(im, ax=ax, label="utilisation (same scale for every run)")
    return plots.save(fig, f"heatmap-{run}")


def _hops_plot(plots, transfers: dict) -> None:
    """Transfers per number of switches crossed, one bar per run."""
    fig, ax = _figure()
    names = list(transfers)
    hops = {n: [round(h, 2) for h in (_num(t.get("hops")) for t in transfers[n])
                if h is not None] for n in names}
    values = sorted({h for n in names for h in hops[n]})
    width = 0.8 / max(1, len(names))
    for i, n in enumerate(names):
        counts = [hops[n].count(v) for v in values]
        ax.bar([k + i * width for k in range(len(values))], counts, width, label=n)
    ax.set_xticks([k + width * (len(names) - 1) / 2 for k in range(len(values))])
    ax.set_xticklabels([f"{v:g}" for v in values])
    ax.set_xlabel("switches crossed per transfer (mean over its paths)")
    ax.set_ylabel("transfers")
    ax.legend(fontsize=7)
    plots.save(fig, "hops")


def _draw_fabrics(plots, runs: dict, links: dict) -> list[dict]:
    """Each run's fabric with its cables coloured by mean utilisation (repetition 0)."""
    from topologies.draw import draw
    out = []
    for n, r in runs.items():
        fab = load_fabric(os.path.join(r["_dir"], "fabric.json"))
        loads = _link_loads(links[n])
        for ext in ("png", "svg"):
            path = os.path.join(plots.dir, f"fabric-{n}.{ext}")
            draw(fab, path, loads=loads or None, title=f"{n}: mean link utilisation")
            os.chmod(path, 0o644)
        plots.embed_file(f"fabric-{n}")
        out.append(plots.figure(f"fabric-{n}", f"{fab.label} ({n}): cables coloured by mean "
                                               f"utilisation while traffic flowed"))
    return out


def _plots(out_dir: str, runs: dict) -> dict:
    """Every figure of the page, from the run folders' CSVs and fabrics."""
    plots = _Plots(out_dir)
    read = {k: {n: _read_csv(os.path.join(r["_dir"], f"{k}.csv")) for n, r in runs.items()}
            for k in ("transfers", "requests", "links")}
    transfers, links = read["transfers"], read["links"]
    drawn = _draw_fabrics(plots, runs, links)
    _cdf_plot(plots, "fct-cdf", {n: [v for v in (_num(t["fct_ms"]) for t in transfers[n])
                                     if v is not None] for n in runs},
              "flow completion time (ms)", "fraction of transfers", log=True)
    _cdf_plot(plots, "ttft-cdf", {n: [v for v in (_num(q["ttft_ms"]) for q in read["requests"][n])
                                      if v is not None] for n in runs},
              "time to first token (ms)", "fraction of requests")
    _hops_plot(plots, transfers)
    vmax = max((_num(r["util"]) or 0.0 for n in runs for r in _first_rep(links[n])),
               default=1.0)
    heat = [h for h in (_heatmap(plots, n, links[n], vmax) for n in runs) if h]
    fig, ax = _figure()
    curve = serving_curve.draw(ax, list(runs.values())) and plots.save(fig, "serving-curve")
    return {"fabrics": drawn,
            "curve": plots.figure(curve, "P99 TTFT against offered rate") if curve else None,
            "cdfs": [plots.figure("fct-cdf", "FCT CDF per run"),
                     plots.figure("ttft-cdf", "TTFT CDF per run")],
            "hops": plots.figure("hops", "switches crossed per transfer"),
            "heatmaps": [plots.figure(h, h.replace("heatmap-", "")
                                      + ": utilisation per link over time") for h in heat]}


def _comparison_tables(groups: list[dict]) -> list[dict]:
    """The comparison as ``zcube compare`` prints it, with its footnote, per placement."""
    out = []
    for g in groups:
        head, body = table_rows(g)
        head[0] = f"placement {g['placement']}"
        out.append({"head": head, "rows": body,
                    "note": f"{g['footnote']}; a ratio is run / {g['runs'][0]}."})
    return out


def _spread_rows(runs: dict) -> list[list]:
    return [[n, k, *(as_text(s[x]) for x in ("mean", "ci95", "sd", "min", "max")), s["n"]]
            for n, r in runs.items() for k, s in (r.get("spread") or {}).items() if s]


def _fault_rows(runs: dict) -> list[list]:
    return [[n, f.get("rep"), f["element"], f.get("action", "down"), f["t_s"],
             as_text(1000 * f["late_s"], 1) if f.get("late_s") is not None else "-",
             as_text(1000 * f["since_injection_s"], 1) if f.get("since_injection_s") else "-",
             *(as_text(f.get(f"transfers_{k}")) for k in ("affected", "retried", "lost",
                                                        "cut_off")),
             (f.get("first_byte_after_ms") or {}).get("max", "-"), f.get("error") or (
                 "its cables were already down" if f.get("unchanged") else "-")]
            for n, r in runs.items() for f in r.get("faults") or []]


def _outage_rows(runs_list: list[dict]) -> list[list]:
    """The outage table's rows (:mod:`testbed.analysis.outage`), one per faulted fabric."""
    from testbed.analysis.outage import outages

    def ratio(r, k):
        if r[f"{k}_ratio"] is None:
            return "-"
        ci = f" ({r[f'{k}_lo']:.3f}-{r[f'{k}_hi']:.3f})" if r[f"{k}_lo"] is not None else ""
        return f"{r[f'{k}_ratio']:.3f}{ci} {r[f'{k}_verdict']}"
    return [[r["fabric"], r["control"], r["elements"], f"{r['gpus_reachable']:.1%}",
             r["transfers"], r["lost"], r["cut_off"], as_text(r["fct_p99_ms"], 1),
             as_text(r["fct_p99_ms_control"], 1), ratio(r, "fct"),
             as_text(r["ttft_p99_ms"], 1), as_text(r["ttft_p99_ms_control"], 1),
             ratio(r, "ttft")] for r in outages(runs_list)]


def _curve_rows(runs_list: list[dict]) -> list[list]:
    """The SLO-throughput table's rows (:mod:`testbed.analysis.serving_curve`)."""
    def ratio(r):
        if r["ratio"] is None:
            return "-"
        ci = f" ({r['lo']:.3f}-{r['hi']:.3f})" if r["lo"] is not None else ""
        return f"{r['ratio']:.3f}{ci} {r['verdict']}"
    return [[r["fabric"], r["draws"], as_text(r["slo_throughput_per_s"], 2),
             as_text(r["slo_throughput_ci95"], 2), as_text(r["knee_per_s"], 2),
             "yes" if r["saturated"] else "no", ratio(r)]
            for r in serving_curve.table(runs_list)]


def _fidelity_rows(runs: dict) -> list[list]:
    out = []
    for n, r in runs.items():
        f = r.get("fidelity")
        if not f:
            continue
        cells = [as_text((f.get(d) or {}).get(k), 3) for d, k in (
            ("lateness_ms", "p99"), ("datapath", "p99"), ("machine_idle", "mean"),
            ("machine_steal", "max"), ("isolated", "p50"), ("isolated", "p99"),
            ("loss", "lost_in_emulator"), ("loss", "queue_drops"),
            ("loss", "retransmitted_segments"), ("saturated", "share"),
            ("stolen", "share"), ("probe", "p99_ms"), ("probe", "max_ms"),
            ("probe", "stalls"), ("stalled", "share"), ("probe", "wake_p99_ms"))]
        sd = f.get("stalled") or {}
        tail = f"{sd['tail']} of {sd['tail_of']}" if "tail" in sd else "-"
        again = len(f.get("set_aside") or ())
        if stops := f.get("not_run_again"):      # held back, kept: the cause came back
            again = f"{again} ({len(stops)} late again, kept)"
        out.append([n, "yes" if f["faithful"] else "NO", *cells[:-1], tail, cells[-1], again,
                    "; ".join(f["reasons"]) or "-"])
    return out


def _scale(first: dict) -> dict:
    scale = first.get("scale") or {}
    link = scale.get("link")
    return {"link_mbps": as_text(first.get("link_mbps"), 0),
            "nic_gbps": as_text(first.get("nic_gbps"), 0),
            "link": as_text(link, 6), "one_in": as_text(1 / link, 0) if link else "-",
            "size": as_text(scale.get("size"), 6), "auto": scale.get("link_mbps_auto")}


def _repetitions(runs_list: list[dict], seeds: list) -> str:
    """``10 repetition(s) each (seeds 1, ..., 10)``, and which runs ran only the first
    of them."""
    most, few = fewer({r["run"]: r.get("repetitions", 1) for r in runs_list},
                      "{} the first {}")
    return (f"{most} repetition(s) each (seeds {', '.join(map(str, seeds))}"
            + (f"; {few}" if few else "") + ")")


def report_context(out_dir: str) -> dict:
    """Everything the page shows (the template's context), from ``out_dir``'s runs; the
    plots are written on the way."""
    from topologies.cost import cost_table
    runs_list = load_runs([out_dir])
    meta = {}
    if os.path.isfile(os.path.join(out_dir, "run.json")):
        with open(os.path.join(out_dir, "run.json")) as f:
            meta = json.load(f)
    runs = {r["run"]: r for r in runs_list}
    groups = comparison(runs_list)
    first = runs_list[0]
    return {
        "scenario": str(meta.get("scenario", first.get("scenario"))),
        "backend": first.get("backend", "?"), "runs": list(runs),
        "repetitions": _repetitions(runs_list, meta.get("seeds", [])),
        "findings": findings(groups, runs), **report_part(groups, runs, out_dir),
        "comparison": _comparison_tables(groups),
        "spread": {"head": ["run", "metric", "mean", "ci95", "sd", "min", "max", "n"],
                   "rows": _spread_rows(runs)},
        "cost": cost_table(list({r["fabric"]: r["cost"] for r in runs_list}.values())),
        "plots": _plots(out_dir, runs),
        "scale": _scale(first),
        "versions": [[k, v if v is not None else "-"]
                     for k, v in (meta.get("versions") or {}).items()],
        "faults": _fault_rows(runs),
        "outage": _outage_rows(runs_list),
        "curve": _curve_rows(runs_list),
        "calibration": [[n, c["aggregate_mbps"], c["aggregate_shaped_mbps"],
                         runs[n].get("offered_mbps")] for n, c in
                        ((n, r.get("calibration")) for n, r in runs.items()) if c],
        "trace_skips": trace_skips(first),
        "fidelity": _fidelity_rows(runs),
        "thresholds": THRESHOLDS,
    }


def build_report(out_dir: str) -> str:
    """Write ``out_dir/report.html`` (and plots/); returns its path."""
    path = os.path.join(out_dir, "report.html")
    with open(path, "w") as f:
        f.write(render("report.html.j2", **report_context(out_dir)))
    os.chmod(path, 0o644)
    return path
