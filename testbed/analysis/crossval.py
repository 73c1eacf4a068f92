"""``zcube crossval``: one scenario on several backends, and how far each backend's FCTs and
ratios between fabrics are from the first backend's (:data:`DESCRIPTION`)."""
from __future__ import annotations

import json
import os

from testbed.core import metrics
from testbed.core.tables import text_table

P99_TOLERANCE = 0.15
RATIO_TOLERANCE = 0.10
DESCRIPTION = (
    "Runs the scenario on each backend of --backends in turn (default the emulation, then the "
    "flow-level model; ns-3 too with emulation,ns3,model) into DIR/BACKEND, with the same "
    "requests; when the emulation runs, and unless --fabric-only, the model also has the "
    "emulator's single forwarding thread as a resource all flows share, sized from the "
    "emulation's own calibration, since that is a limit of the emulation and not of the "
    "fabric.  For each run it prints P50 and P99 FCT from every backend (as zcube compare "
    "shows them) and each one's relative error against the first backend; for each "
    "placement, the ratio of every fabric to the first (over the seeds both ran) on every "
    "backend and how far each is from the first backend's.  The targets: P99 FCT within 15% "
    "per fabric, the ratio within 10%, judged on the runs whose reference run was faithful.")


def _fct(doc: dict, q: str) -> tuple:
    """(value, estimator) of a run's FCT percentile ``q``: what ``zcube compare`` shows
    (:func:`testbed.core.metrics.estimate`)."""
    value, _, estimator = metrics.estimate((doc.get("fct_ms") or {}).get(q),
                                           (doc.get("spread") or {}).get(f"fct_{q}_ms"),
                                           doc.get("repetitions", 1))
    return value, estimator


def _error(value, reference):
    return None if not reference or value is None else round(value / reference - 1, 4)


def _faithful(doc: dict):
    """The run's fidelity verdict (None: the backend keeps no record)."""
    return (doc.get("fidelity") or {}).get("faithful")


def _run_row(name: str, docs: dict, ref: str) -> dict:
    first = docs[ref]
    row = {"run": name, "fabric": first.get("fabric"), "placement": first.get("placement"),
           "faithful": _faithful(first)}
    for q in ("p50", "p99"):
        for b, doc in docs.items():
            value, estimator = _fct(doc, q)
            row[f"{b}_{q}_ms"] = value
            if b == ref:
                row["estimator"] = estimator
        for b in docs:
            if b != ref:
                row[f"{b}_error_{q}"] = _error(row[f"{b}_{q}_ms"], row[f"{ref}_{q}_ms"])
    return row


def _on_shared_seeds(first: dict, other: dict, q: str) -> tuple:
    """Two runs' FCT ``q`` as a ratio between them reads it: each one's own figure
    (:func:`_fct`) where both ran the same seeds, else the means of their per-repetition
    figures over the seeds both ran, so that a ratio never sets one set of seeds against
    another (a fabric of the scenario may run fewer)."""
    from testbed.analysis.compare import per_seed
    a, x = (per_seed(d, lambda rep: rep["fct_ms"][q]) for d in (first, other))
    if not a or not x or set(a) == set(x):
        return _fct(first, q)[0], _fct(other, q)[0]
    both = [k for k in a if a[k] and x.get(k)]
    if not both:
        return None, None
    return sum(a[k] for k in both) / len(both), sum(x[k] for k in both) / len(both)


def _ratio_row(placement: str, first: dict, other: dict, docs: dict, ref: str) -> dict:
    """The ratio ``other / first`` of each FCT percentile on every backend of ``docs``
    (backend -> run name -> summary) and each one's error against ``ref``'s."""
    out = {"placement": placement, "run": other["run"], "reference": first["run"],
           "faithful": first["faithful"] is not False and other["faithful"] is not False}
    backends = list(docs)
    for q in ("p50", "p99"):
        ratio = {}
        for b in backends:
            a, x = _on_shared_seeds(docs[b][first["run"]], docs[b][other["run"]], q)
            ratio[b] = x / a if a and x else None
            out[f"{b}_{q}"] = None if ratio[b] is None else round(ratio[b], 4)
        for b in backends:
            if b != ref:
                out[f"{b}_error_{q}"] = _error(ratio[b], ratio[ref])
    return out


def _within(rows, key: str, tolerance: float):
    """Every judged row's ``key`` within ``tolerance`` (rows whose reference run was not
    faithful are shown but not judged); None when no row can be judged."""
    judged = [r for r in rows if r["faithful"] is not False]
    if not judged:
        return None
    return all(r[key] is not None and abs(r[key]) <= tolerance for r in judged)


def crossval(runs_by_backend: dict) -> dict:
    """From ``{backend: {run: summary}}`` (the first backend the reference, e.g. the
    emulation): per-run figures and errors against the reference, per-placement ratios
    between fabrics on every backend and their errors, and whether each backend is within
    the targets on the runs whose reference was faithful."""
    backends = list(runs_by_backend)
    ref = backends[0]
    names = [n for n in runs_by_backend[ref]
             if all(n in runs_by_backend[b] for b in backends)]
    runs = [_run_row(n, {b: runs_by_backend[b][n] for b in backends}, ref) for n in names]
    by_placement: dict = {}
    for r in runs:
        by_placement.setdefault(r["placement"], []).append(r)
    ratios = [_ratio_row(placement, members[0], other, runs_by_backend, ref)
              for placement, members in by_placement.items() for other in members[1:]]
    within = {b: {"p99_within_15pct": _within(runs, f"{b}_error_p99", P99_TOLERANCE),
                  "ratio_within_10pct": _within(ratios, f"{b}_error_p99", RATIO_TOLERANCE)}
              for b in backends[1:]}
    return {"reference": ref, "backends": backends, "runs": runs, "ratios": ratios,
            "within": within,
            "p99_within_15pct": all(w["p99_within_15pct"] for w in within.values()),
            "ratio_within_10pct": all(w["ratio_within_10pct"] for w in within.values())}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.0f}%"


def _ms(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _short(b: str) -> str:
    return {"emulation": "emu"}.get(b, b)


def _heads(doc: dict, page: bool) -> tuple:
    """The two tables' headings: every backend's p50 then p99, with each non-reference
    backend's error beside it."""
    name = (lambda b: b) if page else _short
    unit = " ms" if page else ""
    cols = []
    for q in ("p50", "p99"):
        for b in doc["backends"]:
            cols.append(f"{name(b)} {q}")
            if b != doc["reference"]:
                cols.append("error")
    return (("run", *(c + unit if c != "error" else c for c in cols)),
            ("placement", "ratio", *cols))


def _cells(doc: dict, row: dict, fmt: str) -> list:
    out = []
    for q in ("p50", "p99"):
        for b in doc["backends"]:
            out.append(_ms(row[fmt.format(b=b, q=q)]))
            if b != doc["reference"]:
                out.append(_pct(row[f"{b}_error_{q}"]))
    return out


def _mark(row: dict) -> str:
    return "" if row["faithful"] is not False else " (not faithful)"


def _run_body(doc: dict) -> list[tuple]:
    return [(r["run"] + _mark(r), *_cells(doc, r, "{b}_{q}_ms")) for r in doc["runs"]]


def _ratio_body(doc: dict) -> list[tuple]:
    return [(r["placement"], f"{r['run']}/{r['reference']}" + _mark(r),
             *_cells(doc, r, "{b}_{q}")) for r in doc["ratios"]]


def _yes(x) -> str:
    return {True: "yes", False: "no", None: "not judged (no faithful reference run)"}[x]


def verdict(doc: dict) -> str:
    ref = doc["reference"]
    return "; ".join(
        f"{b}: P99 FCT within {P99_TOLERANCE:.0%} of the {ref} for every run: "
        f"{_yes(w['p99_within_15pct'])}, P99 ratios within {RATIO_TOLERANCE:.0%}: "
        f"{_yes(w['ratio_within_10pct'])}" for b, w in doc["within"].items())


def estimator_note(doc: dict) -> str:
    """Which figures are compared (as ``zcube compare`` shows them)."""
    if any(r.get("estimator") == metrics.MEAN_OF_REPS for r in doc["runs"]):
        note = ("FCT figures are means of per-repetition figures, as zcube compare shows "
                "them; a run of one repetition has its figure pooled over its transfers.")
    else:
        note = "FCT figures are pooled over each run's transfers: one repetition."
    if any(r["faithful"] is False for r in doc["runs"]):
        note += (f" A run whose {doc['reference']} run was not faithful is shown but not "
                 f"judged.")
    return note


def to_text(doc: dict) -> str:
    others = ", ".join(doc["backends"][1:])
    run_head, ratio_head = _heads(doc, page=False)
    lines = [f"FCT, {doc['reference']} against {others} (error = backend / "
             f"{doc['reference']} - 1):"]
    lines += text_table(run_head, _run_body(doc))
    if doc["ratios"]:
        lines.append("")
        lines.append(f"Ratios between fabrics (run / reference), {doc['reference']} against "
                     f"{others}:")
        lines += text_table(ratio_head, _ratio_body(doc))
    lines.append("")
    lines.append(f"({estimator_note(doc)})")
    lines.append(verdict(doc))
    if "model" in doc["within"] and not all(doc["within"]["model"].values()):
        lines.append(WHY)
    return "\n".join(lines) + "\n"


WHY = ("Where they differ: the model shares link bandwidth max-min fairly with a fixed "
       "store-and-forward delay per switch; the emulation also queues every packet behind "
       "all others in Open vSwitch's one userspace forwarding thread, which costs more the "
       "more switches a packet crosses and the more transfers overlap, and its TCP flows "
       "share a link less evenly than max-min.  Tails (P99) feel this most.")


BACKENDS = ("emulation", "model", "ns3")


def _datapath_options(emulated: list) -> dict:
    """The model of the emulator: its one forwarding thread as a shared resource, at what
    the calibration measured on each fabric (its forwarding per CPU second times one core; in
    older runs, the aggregate's forwarding)."""
    options = {}
    for r in emulated:
        cal = r.get("calibration") or {}
        ceiling = cal.get("datapath_ceiling_switch_mbps") or cal.get("aggregate_switch_mbps")
        if ceiling:
            options[r["fabric_name"]] = {"datapath_mbps": ceiling}
    return options


def _run_backends(args, sc, out: str) -> tuple[int, dict]:
    """Each backend's run, in order, into ``out/BACKEND``; (exit code, model options)."""
    from testbed.analysis.compare import load_runs
    from testbed.analysis.results import run_and_present
    options: dict = {}
    emulated: list = []                  # the emulation's summaries, once it has run
    for b in args.backends:
        if b == "model" and emulated and not args.fabric_only:
            options = _datapath_options(emulated)
        print(f"== {b}" + ("" if b != "model" or not options else
                          " (with the emulator's datapath: " + ", ".join(
                              f"{k} {v['datapath_mbps']:,.0f} Mb/s x switches"
                              for k, v in options.items()) + ")"), flush=True)
        code = run_and_present(sc, os.path.join(out, b), b, args.force,
                               report=not args.no_report,
                               model_options=options if b == "model" else None)
        if code:
            return code, options
        if b == "emulation":
            emulated = load_runs([os.path.join(out, "emulation")])
            if emulated and sc.link_mbps == "auto":    # the others at the rate it picked
                sc = sc.with_rate(emulated[0]["link_mbps"],
                                  emulated[0]["scale"].get("link_mbps_auto"))
    return 0, options


def _write(out: str, name: str, text: str) -> str:
    path = os.path.join(out, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


def cmd_crossval(args) -> int:
    from testbed.analysis.compare import load_runs
    from testbed.experiment.pipeline import load_scenario
    sc = load_scenario(args.scenario)
    out = args.output or os.path.join("results", f"crossval-{sc.name}")
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o755)
    code, options = _run_backends(args, sc, out)
    if code:
        return code
    doc = crossval({b: {r["run"]: r for r in load_runs([os.path.join(out, b)])}
                    for b in args.backends})
    doc["model_options"] = options
    path = _write(out, "crossval.json", json.dumps(doc, indent=1))
    html_path = _write(out, "crossval.html", to_html(doc, sc.name))
    print()
    print(to_text(doc), end="")
    print(f"wrote {path} and {html_path}")
    return 0


def to_html(doc: dict, name: str) -> str:
    """The same comparison as a page beside the backends' reports."""
    from testbed.analysis.render import render
    run_head, ratio_head = _heads(doc, page=True)
    why = "model" in doc["within"] and not all(doc["within"]["model"].values())
    return render("crossval.html.j2", name=name, reference=doc["reference"],
                  backends=doc["backends"],
                  runs={"head": run_head, "rows": _run_body(doc)},
                  ratios={"head": ratio_head, "rows": _ratio_body(doc)},
                  verdict=verdict(doc) + ".", note=estimator_note(doc),
                  why=WHY if why else None)


def _backends(text: str) -> list:
    """``--backends``: two or more distinct backends, the first the reference."""
    import argparse
    names = [b.strip() for b in text.split(",") if b.strip()]
    bad = [b for b in names if b not in BACKENDS]
    if bad or len(names) < 2 or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"{text!r}: two or more of {', '.join(BACKENDS)}, comma-separated, each once")
    return names


def add_parser(sub):
    c = sub.add_parser("crossval", help="run a scenario on several backends and compare FCTs",
                       description=DESCRIPTION)
    c.add_argument("scenario", metavar="SCENARIO.yaml",
                   help="scenario file or the name of a shipped one (e.g. demo)")
    c.add_argument("--backends", type=_backends, default=["emulation", "model"],
                   metavar="B1,B2[,B3]",
                   help="backends to run, in order, the first the reference the others' "
                        "errors are measured against: emulation (needs root), model, ns3 "
                        "(default emulation,model; e.g. emulation,ns3,model, or ns3,model "
                        "without root)")
    c.add_argument("-o", "--output", metavar="DIR", default=None,
                   help="results folder (default results/crossval-<scenario name>); each "
                        "backend writes DIR/BACKEND")
    c.add_argument("--force", action="store_true",
                   help="run the emulation even above the calibrated load")
    c.add_argument("--no-report", action="store_true", help="skip the backends' HTML reports")
    c.add_argument("--fabric-only", action="store_true",
                   help="model the fabric alone; by default, when the emulation runs too, the "
                        "model also has the emulator's one forwarding thread as a resource "
                        "all flows share, at the capacity the emulation's calibration "
                        "measured (Mb/s times switches crossed)")
    c.set_defaults(func=cmd_crossval)
    return c
