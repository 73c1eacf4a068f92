"""``zcube run``, ``zcube compare``, ``zcube report``: scenarios in, results and a report out."""
from __future__ import annotations

import os
import sys

from testbed.errors import UsageError

SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "scenarios")


def log(msg: str) -> None:
    print(f"[zcube] {msg}", file=sys.stderr, flush=True)


def load_scenario(path: str):
    from testbed.experiment.scenario import ScenarioError, load
    if not os.path.exists(path) and os.path.isfile(os.path.join(SCENARIOS, path + ".yaml")):
        path = os.path.join(SCENARIOS, path + ".yaml")        # a shipped scenario by name
    try:
        return load(path)
    except ScenarioError as err:
        raise UsageError(str(err)) from None


def _prepare_out(out: str) -> None:
    """Refuse an output path that cannot become a folder (missing parents are created)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"-o {out}: exists and is not a folder")
    parent = os.path.dirname(os.path.abspath(out))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"-o {out}: {parent} is not a folder")


def carry(sc, out: str, backend: str, force: bool, htsim: str | None, report: bool,
          model_options: dict | None = None) -> int:
    """Run a validated scenario and print the comparison; the exit status."""
    from testbed.cli.up import _terminate_on_sigterm, check_can_emulate
    from testbed.analysis.compare import comparison, load_runs, to_text
    from testbed.experiment.runner import RunError, run_scenario
    if backend == "emulation":
        check_can_emulate(None)
        _terminate_on_sigterm()
        from mininet.log import setLogLevel
        setLogLevel("warning")
    os.makedirs(out, exist_ok=True)
    try:
        summaries = run_scenario(sc, out, backend=backend, force=force, log=log,
                                 htsim_dir=htsim, model_options=model_options)
    except RunError as err:
        log(f"error: {err}")
        return 1
    except KeyboardInterrupt:
        log("interrupted; torn down")
        return 130
    print(to_text(comparison(load_runs([out]))), end="")
    if report:
        from testbed.analysis.report import build_report
        path = build_report(out)
        print(f"report: {path}")
    def cut(s):
        return sum(f.get("transfers_cut_off", 0) for f in s.get("faults") or [])
    # a transfer a fault cut off (its GPU unreachable) is failed by design, not lost
    ok = all(s["transfers_verified"] + cut(s) == s["transfers_total"] for s in summaries.values())
    if not ok:
        log("some transfers did not complete verified; see 'failed' in each summary.json")
    return 0 if ok else 1


def cmd_run(args) -> int:
    sc = load_scenario(args.scenario)
    backend = args.backend or sc.backend
    out = args.output or os.path.join("results", sc.name)
    _prepare_out(out)
    return carry(sc, out, backend, args.force, args.export_htsim, not args.no_report)


def cmd_compare(args) -> int:
    from testbed.analysis.compare import cmd_compare as run
    return run(args)


def cmd_report(args) -> int:
    from testbed.analysis.compare import load_runs
    from testbed.analysis.report import build_report
    load_runs([args.dir])                      # a folder without results fails here, in one line
    print(build_report(args.dir))
    return 0


def add_parsers(sub, number) -> dict:
    from testbed.experiment.scenario import describe
    r = sub.add_parser(
        "run", help="carry a scenario on each of its fabrics and write results and a report",
        description="Carry a scenario file's PD workload on each of its fabrics in turn "
                    "(same requests on every fabric, repetition k with seed+k), then write "
                    "DIR/<run>/ (scenario.yaml, fabric.json, routes.txt, transfers.csv, "
                    "links.csv, requests.csv, summary.json), DIR/report.html and DIR/plots/, "
                    "and print the comparison.  The emulation backend needs root.\n\n"
                    "Scenario keys:\n" + describe(),
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    r.add_argument("scenario", metavar="SCENARIO.yaml",
                   help="scenario file, or the name of a shipped one (demo, layouts, incast, "
                        "mooncake, equal-cost, zcube-policies)")
    r.add_argument("-o", "--output", metavar="DIR", default=None,
                   help="results folder (default results/<scenario name>)")
    r.add_argument("--backend", choices=["emulation", "model"], default=None,
                   help="emulation: Mininet + OVS + the controller, real TCP (root); model: the "
                        "flow-level simulator (default: the scenario's own)")
    r.add_argument("--force", action="store_true",
                   help="run even when the workload offers more than the emulator forwarded "
                        "in calibration")
    r.add_argument("--export", dest="export_htsim", metavar="DIR", default=None,
                   help="also write each run's transfers as an htsim connection matrix to DIR "
                        "(<run>.cm)")
    r.add_argument("--no-report", action="store_true", help="skip report.html and the plots")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("compare", help="table of each metric per fabric with ratios",
                       description="Print each metric (cost, switch ports, FCT p50/p99, TTFT "
                                   "p99, requests/s, SLO throughput, link utilisation) per run, "
                                   "grouped by placement, with the ratio to the group's first "
                                   "run and 95%% confidence half-widths across repetitions.")
    c.add_argument("dirs", nargs="+", metavar="DIR",
                   help="a 'zcube run' output folder, or one run's folder; several are "
                        "compared together in the order given")
    c.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (default), csv (long format for pandas) or json")
    c.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="(re)build report.html from a run's output folder",
                       description="Rebuild DIR/report.html and DIR/plots/ from what 'zcube "
                                   "run' wrote in DIR.")
    p.add_argument("dir", metavar="DIR", help="a 'zcube run' output folder")
    p.set_defaults(func=cmd_report)
    from testbed.analysis.crossval import add_parser as add_crossval
    return {"run": r, "compare": c, "report": p, "crossval": add_crossval(sub)}
