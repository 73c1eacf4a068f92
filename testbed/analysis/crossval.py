"""``zcube crossval``: one scenario on both backends, and how far the model is from the
emulation.

The scenario runs on the emulation (``DIR/emulation``) and on the flow-level model
(``DIR/model``), same requests; unless ``--fabric-only``, the model also carries the
emulator's single forwarding thread as a shared resource, sized from the emulation's own
calibration, since that is a limit of the emulation and not of the fabric.  For each run it prints P50 and P99 FCT from both and the
model's relative error; for each placement, the ratio of every fabric to the first (e.g.
ROFT / ZCube) on both backends and how far the model's ratio is from the emulation's.  The
targets the project holds the model to: P99 FCT within 15% per fabric, the ratio within 10%.
"""
from __future__ import annotations

import json
import os

P99_TOLERANCE = 0.15
RATIO_TOLERANCE = 0.10


def _get(doc, key, sub):
    return (doc.get(key) or {}).get(sub)


def crossval(emu_runs: dict, model_runs: dict) -> dict:
    """From ``{run: summary}`` of each backend: per-run errors and per-placement ratios."""
    runs = []
    for name, e in emu_runs.items():
        m = model_runs.get(name)
        if m is None:
            continue
        row = {"run": name, "fabric": e.get("fabric"), "placement": e.get("placement")}
        for q in ("p50", "p99"):
            ev, mv = _get(e, "fct_ms", q), _get(m, "fct_ms", q)
            row[f"emulation_{q}_ms"], row[f"model_{q}_ms"] = ev, mv
            row[f"error_{q}"] = None if not ev or mv is None else round(mv / ev - 1, 4)
        runs.append(row)
    ratios = []
    by_placement: dict = {}
    for r in runs:
        by_placement.setdefault(r["placement"], []).append(r)
    for placement, members in by_placement.items():
        ref = members[0]
        for other in members[1:]:
            out = {"placement": placement, "run": other["run"], "reference": ref["run"]}
            for q in ("p50", "p99"):
                e = (other[f"emulation_{q}_ms"] / ref[f"emulation_{q}_ms"]
                     if other[f"emulation_{q}_ms"] and ref[f"emulation_{q}_ms"] else None)
                m = (other[f"model_{q}_ms"] / ref[f"model_{q}_ms"]
                     if other[f"model_{q}_ms"] and ref[f"model_{q}_ms"] else None)
                out[f"emulation_{q}"] = None if e is None else round(e, 4)
                out[f"model_{q}"] = None if m is None else round(m, 4)
                out[f"error_{q}"] = None if e is None or m is None else round(m / e - 1, 4)
            ratios.append(out)
    p99_ok = all(r["error_p99"] is not None and abs(r["error_p99"]) <= P99_TOLERANCE for r in runs)
    ratio_ok = all(r["error_p99"] is not None and abs(r["error_p99"]) <= RATIO_TOLERANCE
                   for r in ratios)
    return {"runs": runs, "ratios": ratios, "p99_within_15pct": p99_ok,
            "ratio_within_10pct": ratio_ok}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.0f}%"


def _ms(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def to_text(doc: dict) -> str:
    lines = ["FCT, emulation against model (error = model / emulation - 1):"]
    head = ("run", "emu p50", "model p50", "error", "emu p99", "model p99", "error")
    body = [(r["run"], _ms(r["emulation_p50_ms"]), _ms(r["model_p50_ms"]), _pct(r["error_p50"]),
             _ms(r["emulation_p99_ms"]), _ms(r["model_p99_ms"]), _pct(r["error_p99"]))
            for r in doc["runs"]]
    lines += _cols(head, body)
    if doc["ratios"]:
        lines.append("")
        lines.append("Ratios between fabrics (run / reference), emulation against model:")
        head = ("placement", "ratio", "emu p50", "model p50", "error", "emu p99", "model p99",
                "error")
        body = [(r["placement"], f"{r['run']}/{r['reference']}", _ms(r["emulation_p50"]),
                 _ms(r["model_p50"]), _pct(r["error_p50"]), _ms(r["emulation_p99"]),
                 _ms(r["model_p99"]), _pct(r["error_p99"])) for r in doc["ratios"]]
        lines += _cols(head, body)
    lines.append("")
    lines.append(f"model P99 FCT within {P99_TOLERANCE:.0%} of the emulation for every run: "
                 f"{'yes' if doc['p99_within_15pct'] else 'no'}; P99 ratios within "
                 f"{RATIO_TOLERANCE:.0%}: {'yes' if doc['ratio_within_10pct'] else 'no'}")
    if not (doc["p99_within_15pct"] and doc["ratio_within_10pct"]):
        lines.append(WHY)
    return "\n".join(lines) + "\n"


WHY = ("Where they differ: the model shares link bandwidth max-min fairly with a fixed "
       "store-and-forward delay per switch; the emulation also queues every packet behind "
       "all others in Open vSwitch's one userspace forwarding thread, which costs more the "
       "more switches a packet crosses and the more transfers overlap, and its TCP flows "
       "share a link less evenly than max-min.  Tails (P99) feel this most.")


def _cols(head, body) -> list[str]:
    widths = [max(len(str(r[i])) for r in [head] + body) for i in range(len(head))]
    return ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                      for i, (c, w) in enumerate(zip(r, widths))) for r in [head] + body]


def cmd_crossval(args) -> int:
    from testbed.analysis.compare import load_runs
    from testbed.cli.run import carry, load_scenario
    sc = load_scenario(args.scenario)
    out = args.output or os.path.join("results", f"crossval-{sc.name}")
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o755)
    print("== emulation", flush=True)
    code = carry(sc, os.path.join(out, "emulation"), "emulation", args.force, None,
                 report=not args.no_report)
    if code:
        return code
    options = {}
    if not args.fabric_only:
        # the model of the emulator: its one forwarding thread as a shared resource, at
        # what the calibration measured on each fabric
        for r in load_runs([os.path.join(out, "emulation")]):
            cal = r.get("calibration") or {}
            if cal.get("aggregate_switch_mbps"):
                options[r["fabric_name"]] = {"datapath_mbps": cal["aggregate_switch_mbps"]}
    print("== model" + ("" if args.fabric_only else " (with the emulator's datapath: "
                        + ", ".join(f"{k} {v['datapath_mbps']:,.0f} Mb/s x switches"
                                    for k, v in options.items()) + ")"), flush=True)
    code = carry(sc, os.path.join(out, "model"), "model", args.force, None,
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
    import html as h

    def table(head, rows):
        out = "<table><tr>" + "".join(f"<th>{h.escape(c)}</th>" for c in head) + "</tr>"
        for r in rows:
            out += "<tr>" + "".join(f"<td>{h.escape(str(c))}</td>" for c in r) + "</tr>"
        return out + "</table>"
    runs = table(["run", "emulation p50 ms", "model p50 ms", "error", "emulation p99 ms",
                  "model p99 ms", "error"],
                 [(r["run"], _ms(r["emulation_p50_ms"]), _ms(r["model_p50_ms"]),
                   _pct(r["error_p50"]), _ms(r["emulation_p99_ms"]), _ms(r["model_p99_ms"]),
                   _pct(r["error_p99"])) for r in doc["runs"]])
    ratios = table(["placement", "ratio", "emulation p50", "model p50", "error",
                    "emulation p99", "model p99", "error"],
                   [(r["placement"], f"{r['run']}/{r['reference']}", _ms(r["emulation_p50"]),
                     _ms(r["model_p50"]), _pct(r["error_p50"]), _ms(r["emulation_p99"]),
                     _ms(r["model_p99"]), _pct(r["error_p99"])) for r in doc["ratios"]])
    verdict = (f"Model P99 FCT within {P99_TOLERANCE:.0%} of the emulation for every run: "
               f"{'yes' if doc['p99_within_15pct'] else 'no'}. P99 ratios between fabrics "
               f"within {RATIO_TOLERANCE:.0%}: {'yes' if doc['ratio_within_10pct'] else 'no'}.")
    why = "" if doc["p99_within_15pct"] and doc["ratio_within_10pct"] else f"<p>{h.escape(WHY)}</p>"
    return ("<!doctype html><html><head><meta charset=utf-8><title>Cross-validation: "
            f"{h.escape(name)}</title><style>body{{font-family:sans-serif;max-width:1000px;"
            "margin:2em auto}td,th{border:1px solid #ccc;padding:.2em .5em}table{border-"
            "collapse:collapse}</style></head><body>"
            f"<h1>Model against emulation: {h.escape(name)}</h1><h2>FCT per run</h2>{runs}"
            f"<h2>Ratios between fabrics</h2>{ratios}<p>{h.escape(verdict)}</p>{why}"
            "<p>The two backends' own reports: <a href=emulation/report.html>emulation</a>, "
            "<a href=model/report.html>model</a>.</p></body></html>")


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
