"""``zcube crossval``: one scenario on both backends, and how far the model is from the
emulation.

The scenario runs on the emulation (``DIR/emulation``) and on the flow-level model
(``DIR/model``), same requests; unless ``--fabric-only``, the model also carries the
emulator's single forwarding thread as a shared resource, sized from the emulation's own
calibration, since that is a limit of the emulation and not of the fabric.  For each run
it prints P50 and P99 FCT from both (the figures ``zcube compare`` shows: with repetitions,
means of the per-repetition figures) and the model's relative error; for each placement,
the ratio of every fabric to the first (e.g. ROFT / ZCube) on both backends and how far the
model's ratio is from the emulation's.  The targets the project holds the model to: P99 FCT
within 15% per fabric, the ratio within 10%.
"""
from __future__ import annotations

import json
import os

from testbed.core import metrics
from testbed.core.tables import text_table

P99_TOLERANCE = 0.15
RATIO_TOLERANCE = 0.10


def _fct(doc: dict, q: str) -> tuple:
    """(value, estimator) of a run's FCT percentile ``q``: what ``zcube compare`` shows
    (:func:`testbed.core.metrics.estimate`)."""
    value, _, estimator = metrics.estimate((doc.get("fct_ms") or {}).get(q),
                                           (doc.get("spread") or {}).get(f"fct_{q}_ms"),
                                           doc.get("repetitions", 1))
    return value, estimator


def _error(model, emulation):
    return None if not emulation or model is None else round(model / emulation - 1, 4)


def _run_row(name: str, e: dict, m: dict) -> dict:
    row = {"run": name, "fabric": e.get("fabric"), "placement": e.get("placement")}
    for q in ("p50", "p99"):
        (ev, row["estimator"]), (mv, _) = _fct(e, q), _fct(m, q)
        row[f"emulation_{q}_ms"], row[f"model_{q}_ms"] = ev, mv
        row[f"error_{q}"] = _error(mv, ev)
    return row


def _ratio_row(placement: str, ref: dict, other: dict) -> dict:
    out = {"placement": placement, "run": other["run"], "reference": ref["run"]}
    for q in ("p50", "p99"):
        ratio = {}
        for b in ("emulation", "model"):
            a, x = ref[f"{b}_{q}_ms"], other[f"{b}_{q}_ms"]
            ratio[b] = x / a if a and x else None
            out[f"{b}_{q}"] = None if ratio[b] is None else round(ratio[b], 4)
        out[f"error_{q}"] = _error(ratio["model"], ratio["emulation"])
    return out


def crossval(emu_runs: dict, model_runs: dict) -> dict:
    """From ``{run: summary}`` of each backend: per-run errors and per-placement ratios."""
    runs = [_run_row(name, e, model_runs[name]) for name, e in emu_runs.items()
            if name in model_runs]
    by_placement: dict = {}
    for r in runs:
        by_placement.setdefault(r["placement"], []).append(r)
    ratios = [_ratio_row(placement, members[0], other)
              for placement, members in by_placement.items() for other in members[1:]]
    p99_ok = all(r["error_p99"] is not None and abs(r["error_p99"]) <= P99_TOLERANCE
                 for r in runs)
    ratio_ok = all(r["error_p99"] is not None and abs(r["error_p99"]) <= RATIO_TOLERANCE
                   for r in ratios)
    return {"runs": runs, "ratios": ratios, "p99_within_15pct": p99_ok,
            "ratio_within_10pct": ratio_ok}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.0f}%"


def _ms(x) -> str:
    return "-" if x is None else f"{x:.2f}"


RUN_HEAD = ("run", "emu p50", "model p50", "error", "emu p99", "model p99", "error")
RATIO_HEAD = ("placement", "ratio", "emu p50", "model p50", "error", "emu p99", "model p99",
              "error")
RUN_HEAD_PAGE = ("run", "emulation p50 ms", "model p50 ms", "error", "emulation p99 ms",
                 "model p99 ms", "error")
RATIO_HEAD_PAGE = ("placement", "ratio", "emulation p50", "model p50", "error",
                   "emulation p99", "model p99", "error")


def _run_body(doc: dict) -> list[tuple]:
    return [(r["run"], _ms(r["emulation_p50_ms"]), _ms(r["model_p50_ms"]), _pct(r["error_p50"]),
             _ms(r["emulation_p99_ms"]), _ms(r["model_p99_ms"]), _pct(r["error_p99"]))
            for r in doc["runs"]]


def _ratio_body(doc: dict) -> list[tuple]:
    return [(r["placement"], f"{r['run']}/{r['reference']}", _ms(r["emulation_p50"]),
             _ms(r["model_p50"]), _pct(r["error_p50"]), _ms(r["emulation_p99"]),
             _ms(r["model_p99"]), _pct(r["error_p99"])) for r in doc["ratios"]]


def verdict(doc: dict) -> str:
    return (f"model P99 FCT within {P99_TOLERANCE:.0%} of the emulation for every run: "
            f"{'yes' if doc['p99_within_15pct'] else 'no'}; P99 ratios within "
            f"{RATIO_TOLERANCE:.0%}: {'yes' if doc['ratio_within_10pct'] else 'no'}")


def estimator_note(doc: dict) -> str:
    """Which figures are compared (as ``zcube compare`` shows them)."""
    if any(r.get("estimator") == metrics.MEAN_OF_REPS for r in doc["runs"]):
        return ("FCT figures are means of per-repetition figures, as zcube compare shows "
                "them; a run of one repetition has its figure pooled over its transfers.")
    return "FCT figures are pooled over each run's transfers: one repetition."


def to_text(doc: dict) -> str:
    lines = ["FCT, emulation against model (error = model / emulation - 1):"]
    lines += text_table(RUN_HEAD, _run_body(doc))
    if doc["ratios"]:
        lines.append("")
        lines.append("Ratios between fabrics (run / reference), emulation against model:")
        lines += text_table(RATIO_HEAD, _ratio_body(doc))
    lines.append("")
    lines.append(f"({estimator_note(doc)})")
    lines.append(verdict(doc))
    if not (doc["p99_within_15pct"] and doc["ratio_within_10pct"]):
        lines.append(WHY)
    return "\n".join(lines) + "\n"


WHY = ("Where they differ: the model shares link bandwidth max-min fairly with a fixed "
       "store-and-forward delay per switch; the emulation also queues every packet behind "
       "all others in Open vSwitch's one userspace forwarding thread, which costs more the "
       "more switches a packet crosses and the more transfers overlap, and its TCP flows "
       "share a link less evenly than max-min.  Tails (P99) feel this most.")


def cmd_crossval(args) -> int:
    from testbed.analysis.compare import load_runs
    from testbed.analysis.present import run_and_present
    from testbed.experiment.pipeline import load_scenario
    sc = load_scenario(args.scenario)
    out = args.output or os.path.join("results", f"crossval-{sc.name}")
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o755)
    print("== emulation", flush=True)
    code = run_and_present(sc, os.path.join(out, "emulation"), "emulation", args.force,
                           report=not args.no_report)
    if code:
        return code
    options = {}
    emulated = load_runs([os.path.join(out, "emulation")])
    if sc.link_mbps == "auto" and emulated:           # the model at the rate auto picked
        sc = sc.with_rate(emulated[0]["link_mbps"], emulated[0]["scale"].get("link_mbps_auto"))
    if not args.fabric_only:
        # the model of the emulator: its one forwarding thread as a shared resource, at
        # what the calibration measured on each fabric (its forwarding per CPU second times
        # one core; runs from before that was recorded: what the aggregate carried)
        for r in emulated:
            cal = r.get("calibration") or {}
            ceiling = cal.get("datapath_ceiling_switch_mbps") or cal.get("aggregate_switch_mbps")
            if ceiling:
                options[r["fabric_name"]] = {"datapath_mbps": ceiling}
    print("== model" + ("" if args.fabric_only else " (with the emulator's datapath: "
                        + ", ".join(f"{k} {v['datapath_mbps']:,.0f} Mb/s x switches"
                                    for k, v in options.items()) + ")"), flush=True)
    code = run_and_present(sc, os.path.join(out, "model"), "model", args.force,
                           report=not args.no_report, model_options=options)
    if code:
        return code
    runs = {b: {r["run"]: r for r in load_runs([os.path.join(out, b)])}
            for b in ("emulation", "model")}
    doc = crossval(runs["emulation"], runs["model"])
    doc["model_options"] = options
    path = os.path.join(out, "crossval.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    os.chmod(path, 0o644)
    html_path = os.path.join(out, "crossval.html")
    with open(html_path, "w") as f:
        f.write(to_html(doc, sc.name))
    os.chmod(html_path, 0o644)
    print()
    print(to_text(doc), end="")
    print(f"wrote {path} and {html_path}")
    return 0


def to_html(doc: dict, name: str) -> str:
    """The same comparison as a page beside the two backends' reports."""
    from testbed.analysis.render import render
    return render("crossval.html.j2", name=name,
                  runs={"head": RUN_HEAD_PAGE, "rows": _run_body(doc)},
                  ratios={"head": RATIO_HEAD_PAGE, "rows": _ratio_body(doc)},
                  verdict=(f"Model P99 FCT within {P99_TOLERANCE:.0%} of the emulation for "
                           f"every run: {'yes' if doc['p99_within_15pct'] else 'no'}. P99 "
                           f"ratios between fabrics within {RATIO_TOLERANCE:.0%}: "
                           f"{'yes' if doc['ratio_within_10pct'] else 'no'}."),
                  note=estimator_note(doc),
                  why=None if doc["p99_within_15pct"] and doc["ratio_within_10pct"] else WHY)


def add_parser(sub):
    c = sub.add_parser("crossval", help="run a scenario on both backends and compare FCTs",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    c.add_argument("scenario", metavar="SCENARIO.yaml",
                   help="scenario file or the name of a shipped one (e.g. demo)")
    c.add_argument("-o", "--output", metavar="DIR", default=None,
                   help="results folder (default results/crossval-<scenario name>); the "
                        "backends write DIR/emulation and DIR/model")
    c.add_argument("--force", action="store_true",
                   help="run the emulation even above the calibrated load")
    c.add_argument("--no-report", action="store_true", help="skip the two HTML reports")
    c.add_argument("--fabric-only", action="store_true",
                   help="model the fabric alone; by default the model also has the emulator's "
                        "one forwarding thread as a resource all flows share, at the capacity "
                        "the emulation's calibration measured (Mb/s times switches crossed)")
    c.set_defaults(func=cmd_crossval)
    return c
