"""``zcube run``, ``zcube compare``, ``zcube report``: scenarios in, results and a report out."""
from __future__ import annotations

import os

from testbed.analysis.results import run_and_present
from testbed.cli.common import HelpFormatter, add_emulation_args
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


def fabric_names(text: str) -> list[str]:
    """``--fabrics``: names separated by commas."""
    import argparse
    names = [n for n in text.split(",") if n]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names no fabric")
    return names


def with_flags(sc, args):
    """``sc`` with ``--link-mbps``, ``--time-dilation``, ``--repetitions``, ``--seed``,
    ``--order``, ``--tcp-cc``, ``--ecmp`` and ``--fabrics`` in place of its own values, each
    checked as the file's would be (exit 2 before anything starts)."""
    from testbed.cli.common import emulation_flags, in_range
    from testbed.experiment.scenario.limits import LINK_MBPS, REPETITIONS, SEED, TIME_DILATION
    update, shown = {}, []
    if args.link_mbps is not None:
        if args.link_mbps != "auto":
            in_range("--link-mbps", args.link_mbps, *LINK_MBPS)
        update["link_mbps"] = args.link_mbps
        rate = args.link_mbps
        shown.append(f"--link-mbps {rate if rate == 'auto' else format(rate, 'g')}")
    if args.time_dilation is not None:
        in_range("--time-dilation", args.time_dilation, *TIME_DILATION)
        update["time_dilation"] = args.time_dilation
        shown.append(f"--time-dilation {args.time_dilation:g}")
    if args.repetitions is not None:
        in_range("--repetitions", args.repetitions, 1, REPETITIONS)
        update["repetitions"] = args.repetitions
        shown.append(f"--repetitions {args.repetitions}")
    if getattr(args, "seed", None) is not None:
        in_range("--seed", args.seed, 1, SEED)
        update["seed"] = args.seed
        shown.append(f"--seed {args.seed}")
    if getattr(args, "order", None) is not None:
        update["order"] = args.order
        shown.append(f"--order {args.order}")
    emulation, said = emulation_flags(args, sc.emulation)
    if said:
        update["emulation"] = emulation
        shown += said
    if args.fabrics:
        have = [f.name for f in sc.fabrics]
        unknown = [n for n in args.fabrics if n not in have]
        if unknown:
            raise UsageError(f"--fabrics: {sc.name} has no fabric {unknown[0]!r} (it has "
                             f"{', '.join(have)})")
        update["fabrics"] = [f for f in sc.fabrics if f.name in args.fabrics]
        shown.append(f"--fabrics {','.join(f.name for f in update['fabrics'])}")
    return sc.with_flags(update, " ".join(shown)) if update else sc


def cmd_run(args) -> int:
    from testbed.analysis.expect import parse_all
    from testbed.analysis.junit import check_junit_path
    from testbed.analysis.results import Checks
    from testbed.cli.web_args import check_web, serving
    sc = with_flags(load_scenario(args.scenario), args)
    checks = Checks(parse_all(sc, args.expect), args.junit_xml)   # exit 2 before anything
    if args.junit_xml:
        check_junit_path(args.junit_xml)
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
        code = run_and_present(sc, out, args.backend or sc.backend, args.force, htsim,
                               not args.no_report, checks=checks)
    checks.finish()
    return code


def cmd_compare(args) -> int:
    from testbed.analysis.compare import cmd_compare as run
    return run(args)


def cmd_report(args) -> int:
    from testbed.analysis.compare import load_runs
    from testbed.analysis.report import build_report
    load_runs([args.dir])                      # a folder without results fails here, in one line
    print(build_report(args.dir))
    return 0


def _add_replacing_flags(r, number) -> None:
    """``zcube run``'s flags that replace a scenario file's values (:func:`with_flags`)."""
    r.add_argument("--link-mbps", type=link_rate, metavar="R|auto", default=None,
                   help="emulated NIC rate per GPU in Mb/s, in place of the scenario's "
                        "link_mbps; auto (emulation): the largest rate whose peak offered "
                        "load stays under a quarter of the forwarding ceiling measured on each "
                        "fabric")
    r.add_argument("--time-dilation", type=number(float), metavar="D", default=None,
                   help="from 1 to 100, in place of the scenario's time_dilation (see "
                        "time_dilation below); halving --link-mbps and doubling D sends the "
                        "same KV bytes at half the rate")
    r.add_argument("--repetitions", type=number(int), metavar="N", default=None,
                   help="in place of the scenario's repetitions (and a fabric's own): runs "
                        "per fabric and placement, repetition k with seed+k (on a Clos under "
                        "ECMP each is a new hash draw; its tail needs many to narrow)")
    r.add_argument("--seed", type=number(int), metavar="S", default=None,
                   help="in place of the scenario's seed: repetition k uses seed S+k on every "
                        "fabric; new seeds are new requests (and new ECMP draws), the way to "
                        "check that a named winner repeats")
    r.add_argument("--order", choices=("fabric", "mirrored"), default=None,
                   help="emulation, in place of the scenario's order: fabric (each fabric's "
                        "repetitions in one bring-up, one after the other) or mirrored (in "
                        "halves, A1 B1 ... B2 A2, so that a drift of the datapath's pace falls "
                        "on every fabric alike)")
    r.add_argument("--fabrics", type=fabric_names, metavar="NAME[,NAME...]", default=None,
                   help="run only these of the scenario's fabrics (its names, in the file's "
                        "order: the first is the one ratios are taken against); each run's "
                        "scenario.yaml begins with a comment naming the flags that replaced "
                        "the file's values")
    add_emulation_args(r, "in place of the scenario's")


def add_junit_arg(p) -> None:
    p.add_argument("--junit-xml", metavar="PATH", default=None,
                   help="also write a JUnit XML file for CI: one testsuite per scenario run, "
                        "a test case per expectation and, per run, all transfers verified "
                        "and faithful (not judged: skipped, with the reason)")


def add_parsers(sub, number) -> dict:
    from testbed.experiment.scenario import describe
    r = sub.add_parser(
        "run", help="run a scenario on each of its fabrics and write results and a report",
        description="Run a scenario file's PD workload on each of its fabrics in turn "
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
    _add_replacing_flags(r, number)
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
    r.add_argument("--expect", action="append", default=[], metavar="EXPR",
                   help="a check on the results, after the scenario's own expect list "
                        "(repeatable), such as 'fct_ms.p99[roft] / fct_ms.p99[zcube] > 1.2' "
                        "or 'verdict(fct_ms.p99, roft, zcube) == \"zcube lower\"'; printed as "
                        "a check table after the comparison; exit 3 when one fails, 4 when one "
                        "cannot be judged (docs/reference.md, Expectations)")
    add_junit_arg(r)
    from testbed.cli.web_args import add_web_args
    add_web_args(r, "it stops when the run ends")
    r.set_defaults(func=cmd_run)

    c = _add_compare(sub)

    p = sub.add_parser("report", help="(re)build report.html from a run's output folder",
                       description="Rebuild DIR/report.html and DIR/plots/ from what 'zcube "
                                   "run' wrote in DIR.")
    p.add_argument("dir", metavar="DIR", help="a 'zcube run' output folder")
    p.set_defaults(func=cmd_report)
    from testbed.analysis.crossval import add_parser as add_crossval
    return {"run": r, "compare": c, "report": p, "crossval": add_crossval(sub)}


def _add_compare(sub):
    c = sub.add_parser("compare", help="table of each metric per fabric with ratios",
                       description="Print each metric (cost, switch ports, FCT p50/p99, TTFT "
                                   "p99, requests/s, SLO throughput, link utilisation) per run, "
                                   "grouped by placement, with the ratio to the group's first "
                                   "run and 95% confidence half-widths across repetitions; "
                                   "each paired ratio's verdict names a winner only where its "
                                   "95% interval lies wholly outside the figure's equivalence "
                                   "margin (docs/verdicts.md).")
    c.add_argument("dirs", nargs="+", metavar="DIR",
                   help="a 'zcube run' output folder, or one run's folder; several output "
                        "folders stand side by side in the order given, each run compared "
                        "with the first of its own folder")
    c.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (default), csv (long format for pandas) or json")
    c.set_defaults(func=cmd_compare)
    return c
