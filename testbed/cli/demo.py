"""``zcube demo``: ZCube n=4 against a full-bisection ROFT of the same 16 GPUs: cost and route
checks, the shipped scenarios ``demo`` (aligned) and ``cross-rail`` (crossed, where ECMP
collides), the crossed case on the flow-level model over many ECMP draws, and one table of
verdicts.
"""
from __future__ import annotations

import json
import os
import sys

from controller.routing import RouteTable
from controller.verify import verify
from testbed.core.tables import fewer, text_table
from testbed.errors import UsageError
from topologies.cost import cost, cost_table

NETWORK_BOUND = "cross-rail"       # the second scenario the demo runs (into DIR/cross-rail)
CASES = [("zcube", "zcube"), ("zcube", "zcube-short"), ("roft", "ecmp"), ("roft", "shortest")]
MATRICES = ["all-to-all", "pd"]


def _fabric_util(rep) -> tuple[float, float]:
    """Highest utilisation on switch-to-switch links and on links into hosts."""
    fabric = max((v["util_max"] for k, v in rep.loads.items()
                  if "host" not in k), default=0.0)
    edge = max((v["util_max"] for k, v in rep.loads.items() if k.endswith("->host")), default=0.0)
    return fabric, edge


def _table(head, rows) -> None:
    print("\n".join(text_table(head, rows, align="l" * len(head))))


def run_demo(out_dir: str, backend: str = "emulation", checks=None) -> int:
    """Cost and route checks (pure), then on ``backend`` the embedded scenario
    ``scenarios/demo.yaml`` (both fabrics, rank layouts aligned, light load) and
    ``scenarios/cross-rail.yaml`` (crossed layouts where ECMP collides, with a spraying
    Clos beside them), each with its comparison and report; each scenario run is a suite
    of ``checks`` (:class:`testbed.analysis.results.Checks`)."""
    from testbed.analysis.results import Checks
    from testbed.experiment.pipeline import load_scenario, shipped
    checks = checks if checks is not None else Checks()
    os.makedirs(out_dir, exist_ok=True)
    sc = load_scenario(shipped("demo"))
    fabrics = {f.name: f.build() for f in sc.fabrics}
    print(f"ZCube versus ROFT, 16 GPUs, 4 per server, 400 Gb/s NIC per GPU -> {out_dir}/\n")

    costs = [cost(f) for f in fabrics.values()]
    print("Cost (ratio = ZCube / ROFT):")
    print(cost_table(costs))
    with open(os.path.join(out_dir, "cost.json"), "w") as f:
        json.dump(costs, f, indent=1)

    rows, reports = [], {}
    for kind, policy in CASES:
        table = RouteTable(fabrics[kind], policy)
        for tm in MATRICES:
            rep = verify(table, traffic=tm, line_rate=True)
            reports[f"{kind}/{policy}/{tm}"] = rep.to_dict()
            sw_util, edge_util = _fabric_util(rep)
            rows.append((fabrics[kind].label, policy, tm, "ok" if rep.ok else "FAILED",
                         f"{rep.stretch_max:.1f}", f"{sw_util:.2f}", f"{edge_util:.2f}"))
            if not rep.ok:
                print(rep.to_text(), file=sys.stderr)
    with open(os.path.join(out_dir, "routes.json"), "w") as f:
        json.dump(reports, f, indent=1)
    print("\nRoutes: every GPU offers its full NIC rate (utilisation > 1 means that link "
          "caps the transfer):")
    _table(("fabric", "policy", "traffic", "check", "stretch", "max util sw-sw",
            "max util ->GPU"), rows)
    if not all(r[3] == "ok" for r in rows):
        return 1

    from testbed.experiment.pipeline import EXIT_INTERRUPTED
    code = _run_scenario(sc, out_dir, backend, checks)
    if code == EXIT_INTERRUPTED:
        return code
    net = load_scenario(shipped(NETWORK_BOUND))
    print(f"\nWhere the network decides ({NETWORK_BOUND}.yaml): the same 16 GPUs, crossed rank "
          f"layouts, both prefill instances sending at once, ZCube against ROFT with ECMP "
          f"and with spraying -> {out_dir}/{NETWORK_BOUND}/", flush=True)
    code = max(code, _run_scenario(net, os.path.join(out_dir, NETWORK_BOUND), backend,
                                   checks))
    if code != EXIT_INTERRUPTED:
        code = max(code, model_draws(out_dir, os.path.join(out_dir, NETWORK_BOUND), backend,
                                     checks))
    if code != EXIT_INTERRUPTED:
        net_dir = os.path.join(out_dir, NETWORK_BOUND)
        model_dir = os.path.join(out_dir, f"{NETWORK_BOUND}-model")
        _standings([out_dir, net_dir], {net_dir: model_dir}
                   if backend != "model" and os.path.isdir(model_dir) else None)
    return code


MODEL_DRAWS = 400   # ECMP draws of the crossed case on the flow-level model: seconds, not hours


def model_draws(out_dir: str, above: str, backend: str, checks=None) -> int:
    """The crossed case on the flow-level model over :data:`MODEL_DRAWS` ECMP draws (each
    repetition draws its connections' source ports, so its spines), into
    ``out_dir/cross-rail-model``: its paired lines, narrow where the demo's few draws are
    wide, and for each figure whether the ``backend`` run in ``above`` has an interval that
    holds the model's ratio.  The model run's exit status (a suite of ``checks``)."""
    from testbed.analysis.compare import comparison, load_runs, paired_lines
    from testbed.experiment.pipeline import EXIT_OK, load_scenario, run_and_check, shipped
    sc = load_scenario(shipped(NETWORK_BOUND))
    few = sc.repetitions_said()
    sc = sc.with_flags({"repetitions": MODEL_DRAWS}, f"--repetitions {MODEL_DRAWS}")
    out = os.path.join(out_dir, f"{NETWORK_BOUND}-model")
    print(f"\nThe same crossed case on the flow-level model over {MODEL_DRAWS} ECMP draws "
          f"(the run above had {few}, too few to pin ECMP's tail) -> {out}/", flush=True)
    code, summaries = run_and_check(sc, out, "model")
    if checks is not None:
        code = checks.judge(sc, out, "model", code, summaries)
    if code != EXIT_OK or not summaries:
        return code
    try:
        measured = load_runs([above])
    except UsageError:
        measured = []
    there = {g["placement"]: g for g in comparison(measured)} if measured else {}
    model = load_runs([out])
    for g in comparison(model):
        print("\n".join(paired_lines(g) + held_lines(g, there.get(g["placement"]), backend)))
    return code


def held_lines(model: dict, above: dict | None, backend: str) -> list[str]:
    """How the demo's own group ``above`` (its few draws) stands against the model's group
    ``model``, pair by pair: in how many pairs the verdict is the same, and in how many the
    interval holds the model's ratio, naming those where it does not."""
    from testbed.analysis.compare import paired_of
    from testbed.core.verdict import verdict
    if not above or above["runs"] != model["runs"]:
        return []
    names, same, held, missed, n = model["runs"], 0, 0, [], {}
    for row in model["rows"]:
        mine = next((r for r in above["rows"] if r["metric"] == row["metric"]), None)
        for i in range(1, len(names)):
            m, a = paired_of(row, i), mine and paired_of(mine, i)
            if not m or not a or a.get("lo") is None:
                continue
            n[names[i]] = a["n"]
            same += verdict(m) == verdict(a)
            if a["lo"] <= m["ratio"] <= a["hi"]:
                held += 1
            else:
                missed.append(f"{row['metric']} {names[i]}/{names[0]} {a['ratio']:.3f} "
                              f"({a['lo']:.3f}-{a['hi']:.3f}) against {m['ratio']:.3f}")
    if not n:
        return []
    pairs, (most, few) = held + len(missed), fewer(n)
    return [f"(the {backend} run above, {most} draws" + (f" ({few})" if few else "")
            + f": the same verdict in {same} of {pairs} pairs; "
            f"its intervals hold the model's ratio in {held} of {pairs}"
            + (f", not in {'; '.join(missed)}" if missed else "") + ")"]


def _standings(dirs: list[str], models: dict | None = None) -> None:
    """Both scenarios' verdicts in one table (an ECMP run's with the model in ``models``'
    folder as a control), and what they say of the public claims."""
    from testbed.analysis.verdict_marks import notes
    from testbed.analysis.verdict_table import ALIGN, of_folders, table
    try:
        rows, said = of_folders(dirs, models)
    except UsageError:                    # a scenario that wrote nothing
        return
    print("\nWhere each fabric wins and loses (paired by seed"
          + ("; ECMP runs' with the model on the same draws as a control" if models else "")
          + "; a winner only from faithful runs whose interval lies wholly outside the "
          "margin):")
    print("\n".join(text_table(*table(rows), align=ALIGN)))
    for hint in (*notes(rows), draws_hint(rows)):
        if hint:
            print(hint)
    print("\nThe public claims (ZCube against a rail-optimised Clos of the same GPUs):")
    for line in said:
        print(f"- {line}")


def draws_hint(rows: list[dict]) -> str | None:
    """What to run when a crossed verdict against ECMP is not separated: with kept-open
    connections each repetition is one draw of ECMP's hash, and five draws are too few."""
    open_ = [r for r in rows if r["scenario"] == NETWORK_BOUND and r["policy"] == "ecmp"
             and r["verdict"] == "not separated"]
    if not open_:
        return None
    figures = ", ".join(dict.fromkeys(r["metric"] for r in open_))
    return (f"({figures} against ECMP not separated over {open_[0]['n']} repetitions: each is "
            f"one draw of ECMP's hash, a different Clos each time; `zcube run "
            f"{NETWORK_BOUND}-draws` runs 48 draws, about 13 minutes on a 2-core machine.)")


WHAT = {"emulation": " (Mininet hosts, Open vSwitch, the Ryu app installing the computed "
                     "routes, real TCP with every byte checked)",
        "model": " (flow-level max-min fair model)",
        "ns3": " (ns-3, packet by packet: TCP over the route table's paths)"}


def _run_scenario(sc, out_dir: str, backend: str, checks=None) -> int:
    """One of the demo's scenarios on ``backend``, with a line saying what it runs."""
    from testbed.analysis.results import run_and_present
    w = sc.workload
    print(f"\nKV-cache transfers on the {backend} backend" + WHAT[backend]
          + f": {w.count} {sc.model.name} requests (Poisson {w.rate:g}/s, "
          f"{w.input_tokens} tokens, TP{sc.deployment.prefill_tp} -> "
          f"TP{sc.deployment.decode_tp}), placements {', '.join(sc.placements)}, "
          f"{sc.repetitions_said()}, NIC {sc.link_mbps:g} Mb/s per GPU "
          f"(KV scaled 1:{400000 / sc.link_mbps:,.0f} like the links).\n", flush=True)
    return run_and_present(sc, out_dir, backend, force=False, report=True, checks=checks)


def cmd_demo(args) -> int:
    import os
    if args.tor_failure and args.full:
        raise UsageError("--tor-failure and --full are two different demos; give one")
    # the top-of-rack failure runs on the model (seconds) unless told otherwise
    backend = "model" if args.no_emulation else (
        args.backend or ("model" if args.tor_failure else "emulation"))
    if backend == "emulation" and os.geteuid() != 0:
        raise UsageError("the demo emulates both fabrics and needs root: run 'sudo make demo', "
                         "or 'zcube demo --backend model' for the flow-level model")
    from testbed.analysis.junit import check_junit_path
    from testbed.analysis.results import Checks
    from testbed.cli.lesson import run_lesson
    from testbed.cli.web_args import check_web, serving
    if args.junit_xml:
        check_junit_path(args.junit_xml)
    check_web(args, backend)
    checks = Checks(junit_path=args.junit_xml)
    with serving(args):
        if args.tor_failure:
            from testbed.cli.tor_lesson import run_tor_lesson
            code = run_tor_lesson(args.output, args.verbose, checks, backend)
        else:
            code = (run_demo(args.output, backend, checks) if args.full else
                    run_lesson(args.output, backend, args.verbose, checks))
    checks.finish()
    return code


def add_parser(sub) -> None:
    d = sub.add_parser("demo", help="the teaching demo, about three minutes (what 'make demo' "
                                    "runs); --full: the whole study",
                       description="ZCube n=4 against a full-bisection ROFT of the same 16 GPUs, "
                                   "as a story in about three minutes on a 2-core machine: the "
                                   "fabrics' cost and route checks; the crossed case "
                                   "(scenarios/cross-rail.yaml), where ECMP can collide on the "
                                   "Clos, on both fabrics brought up in Mininet + OVS (root) with "
                                   "the flow-level model's ECMP draws as a control; the aligned "
                                   "counter-case (scenarios/demo.yaml); the spraying Clos on the "
                                   "model. Each at its scenario's load with 3 repetitions (the "
                                   "aligned case 12 requests each); every verdict follows "
                                   "docs/verdicts.md. --full runs the whole study instead: both "
                                   "scenarios with all their repetitions, the spraying Clos "
                                   "emulated and the rate sweep, about ten minutes.")
    d.add_argument("-o", "--output", metavar="DIR", default="results/demo",
                   help="folder for the demo's files (default results/demo)")
    d.add_argument("--backend", choices=["emulation", "model", "ns3"], default=None,
                   help="emulation (default; needs root), model (the flow-level simulator) or "
                        "ns3 (ns-3, packet by packet); with --tor-failure the default is model")
    d.add_argument("--no-emulation", action="store_true",
                   help="same as --backend model")
    d.add_argument("--full", action="store_true",
                   help="the whole study (about ten minutes): every repetition of both "
                        "scenarios, the spraying Clos emulated, the rate sweep, the model over "
                        f"{MODEL_DRAWS} ECMP draws and the table of every verdict")
    d.add_argument("--tor-failure", action="store_true",
                   help="the top-of-rack failure instead (scenarios/tor-failure.yaml, about "
                        "ten seconds on the flow-level model, a few minutes with --backend "
                        "emulation): how each fabric survives its busiest GPU-facing switch "
                        "failing, against the same requests without the fault")
    d.add_argument("-v", "--verbose", action="store_true",
                   help="print every run's progress lines (always written to DIR/demo.log)")
    from testbed.cli.run import add_junit_arg
    add_junit_arg(d)
    from testbed.cli.web_args import add_web_args
    add_web_args(d, "it follows the demo from fabric to fabric and stops when it ends "
                    "(for a class: open the page on the projector)")
    d.set_defaults(func=cmd_demo)
