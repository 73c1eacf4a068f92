"""``zcube run``, ``zcube compare``, ``zcube report``: scenarios in, results and a report out."""
from __future__ import annotations

import os

from testbed.analysis.present import run_and_present
from testbed.cli.common import HelpFormatter
from testbed.errors import UsageError
from testbed.experiment.pipeline import load_scenario, prepare_out, shipped_names


def link_rate(text: str):
    """``--link-mbps``: a rate above 0, or auto."""
    import argparse
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate above 0 or auto")
    return value


def cmd_run(args) -> int:
    from testbed.cli.web_args import check_web, serving
    sc = load_scenario(args.scenario)
    if args.link_mbps is not None:
        sc = sc.with_rate(args.link_mbps)
    check_web(args, args.backend or sc.backend)
    if args.htsim_time_unit != "ps" and not args.export_htsim:
        raise UsageError("--htsim-time-unit applies with --export only")
    with serving(args):                       # a port in use fails before any folder is made
        out = args.output or os.path.join("results", sc.name)
        prepare_out(out)
        htsim = None
        if args.export_htsim:
            prepare_out(args.export_htsim, "--export")
            from traffic.htsim import Target
            htsim = Target(args.export_htsim, args.htsim_time_unit)
        return run_and_present(sc, out, args.backend or sc.backend, args.force, htsim,
                               not args.no_report)


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
        formatter_class=HelpFormatter)
    r.add_argument("scenario", metavar="SCENARIO.yaml",
                   help="scenario file, or the name of a shipped one ("
                        + ", ".join(shipped_names()) + ")")
    r.add_argument("-o", "--output", metavar="DIR", default=None,
                   help="results folder (default results/<scenario name>)")
    r.add_argument("--backend", choices=["emulation", "model", "ns3"], default=None,
                   help="emulation: Mininet + OVS + the controller, real TCP (root); model: the "
                        "flow-level simulator; ns3: ns-3, packet by packet (the route table's "
                        "paths, the scenario's transport and faults) (default: the "
                        "scenario's own)")
    r.add_argument("--link-mbps", type=link_rate, metavar="R|auto", default=None,
                   help="emulated NIC rate per GPU in Mb/s, in place of the scenario's "
                        "link_mbps; auto (emulation): the largest rate whose peak offered "
                        "load stays under a quarter of the forwarding ceiling measured on each "
                        "fabric")
    r.add_argument("--force", action="store_true",
                   help="run even when the workload offers more than the emulator forwarded "
                        "in calibration")
    r.add_argument("--export", dest="export_htsim", metavar="DIR", default=None,
                   help="also write each run's transfers as an htsim connection matrix to DIR "
                        "(<run>.cm)")
    r.add_argument("--htsim-time-unit", choices=["ps", "us"], default="ps",
                   help="--export: the unit of connection start times: ps (default; what "
                        "csg-htsim's htsim_eqds, htsim_ndp, htsim_roce and htsim_hpcc read) "
                        "or us (htsim_swift)")
    r.add_argument("--no-report", action="store_true", help="skip report.html and the plots")
    from testbed.cli.web_args import add_web_args
    add_web_args(r, "it stops when the run ends")
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
