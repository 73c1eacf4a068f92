"""The ``zcube`` command: a few verbs over one Fabric.

    zcube topo   FABRIC [options] --format json|dot|svg|png|summary|clab|simai
    zcube routes FABRIC [options] --policy P [--check] [--traffic T]
    zcube cost   FABRIC [options] [--vs FABRIC2] [--json]
    zcube up     FABRIC [options] [--policy P] [--link-mbps R] [--cli] [--json]
    zcube clean
    zcube workload FABRIC [options] [--model M] [--placement P] [--arrivals trace|poisson]
    zcube run    SCENARIO.yaml [-o DIR] [--backend emulation|model]
    zcube compare DIR [DIR ...]
    zcube report DIR
    zcube crossval SCENARIO.yaml [-o DIR]
    zcube demo   [-o DIR]

FABRIC is a builder (zcube, roft, fattree) with its options, or a fabric JSON file written
by ``zcube topo ... --format json``.  Exit status: 0 done, 1 a check failed, 2 bad input.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys

from testbed.errors import UsageError
from topologies import BUILDERS, Fabric, FabricError, build, load_fabric

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2

# option -> (builder keyword, the builders it belongs to, type, help)
FABRIC_OPTIONS = {
    "--n": ("n", ("zcube",), int, "zcube: switches per group (GPUs = n*n); default 4"),
    "--gpus-per-server": ("gpus_per_server", ("zcube", "roft", "fattree"), int,
                          "GPUs per server; zcube: must divide n (default n); roft: default 4, "
                          "= number of rails; fattree: must divide k/2 (default 1)"),
    "--parallel": ("parallel", ("zcube",), int,
                   "zcube: parallel cables per (A, B) switch pair (default 1)"),
    "--nic-gbps": ("nic_gbps", ("zcube", "roft", "fattree"), float,
                   "NIC bandwidth per GPU in Gb/s (default 400); zcube splits it over 2 ports"),
    "--servers": ("servers", ("roft",), int, "roft: number of servers (default 4)"),
    "--spines": ("spines", ("roft",), int,
                 "roft: spine switches (default: one cable from every leaf to every spine)"),
    "--oversubscription": ("oversubscription", ("roft",), float,
                           "roft: leaf down:up bandwidth ratio, 1 = full bisection (default 1)"),
    "--radix": ("radix", ("roft",), int, "roft: ports per switch (default 64)"),
    "--k": ("k", ("fattree",), int, "fattree: switch radix k, even (default 4)"),
}


def one_line(text: str) -> str:
    """``text`` with every unprintable character (newlines included) escaped, so an error
    that quotes what the user typed stays on one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


class Parser(argparse.ArgumentParser):
    """argparse that reports bad input in one line and exits 2, never a traceback."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT,
                  f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def _number(kind):
    def parse(text):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {'whole number' if kind is int else 'number'}") from None
    parse.__name__ = kind.__name__
    return parse


def add_fabric_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("fabric", metavar="FABRIC",
                   help=f"builder ({', '.join(BUILDERS)}) or a fabric .json file")
    g = p.add_argument_group("fabric options (each applies to the builders named)")
    for opt, (dest, _, kind, text) in FABRIC_OPTIONS.items():
        g.add_argument(opt, dest=dest, type=_number(kind), default=None, metavar="N" if kind is int else "X",
                       help=text)


def add_policy_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", default=None,
                   help="routing policy: zcube, zcube-short, ecmp, shortest or module:function "
                        "(default: zcube on zcube fabrics, ecmp otherwise)")


def fabric_from_args(args: argparse.Namespace) -> Fabric:
    kind = args.fabric
    given = {opt: getattr(args, dest) for opt, (dest, _, _, _) in FABRIC_OPTIONS.items()
             if getattr(args, dest, None) is not None}
    if kind.endswith(".json"):
        if given:
            raise UsageError(f"{next(iter(given))} does not apply to a fabric file")
        return load_fabric(kind)
    if kind not in BUILDERS:
        raise UsageError(f"unknown fabric {kind!r}; choose one of {', '.join(BUILDERS)} or a "
                         f".json fabric file")
    params = {}
    for opt, value in given.items():
        dest, kinds, _, _ = FABRIC_OPTIONS[opt]
        if kind not in kinds:
            raise UsageError(f"{opt} does not apply to {kind} (it is a {'/'.join(kinds)} option)")
        params[dest] = value
    return build(kind, **params)


def fabric_from_spec(spec: str) -> Fabric:
    """A fabric from a one-string spec such as ``"roft --servers 4 --oversubscription 2"``."""
    p = Parser(prog="--vs", add_help=False)
    add_fabric_args(p)
    try:
        words = shlex.split(spec)
    except ValueError as err:
        raise UsageError(f"--vs {spec!r}: {err}") from None
    return fabric_from_args(p.parse_args(words))


def matched(kind: str, like: Fabric) -> Fabric:
    """A ``kind`` fabric with the same GPUs, GPUs per server and NIC bandwidth as ``like``,
    at full bisection: the fair baseline for a cost comparison."""
    gpus, gps = len(like.hosts), like.params.get("gpus_per_server", 1)
    if kind == "roft":
        return build("roft", servers=max(1, gpus // gps), gpus_per_server=gps,
                     nic_gbps=like.nic_gbps)
    if kind == "zcube":
        n = round(gpus ** 0.5)
        if n * n != gpus:
            raise UsageError(f"no zcube has {gpus} GPUs (it needs a square number)")
        return build("zcube", n=n, gpus_per_server=gps if n % gps == 0 else n,
                     nic_gbps=like.nic_gbps)
    if kind == "fattree":
        k = 2
        while k ** 3 // 4 < gpus:
            k += 2
        return build("fattree", k=k, nic_gbps=like.nic_gbps)
    raise UsageError(f"unknown fabric {kind!r} for --vs")


# -- verbs -------------------------------------------------------------------------------

# topo options that belong to one --format: option -> (attribute, format)
TOPO_FORMAT_OPTIONS = {
    "--controller": ("controller", "clab"), "--image": ("image", "clab"),
    "--policy": ("policy", "clab"),
    "--gpu-type": ("gpu_type", "simai"), "--nvlink-gbps": ("nvlink_gbps", "simai"),
    "--latency-ms": ("latency_ms", "simai"), "--nvlink-latency-ms": ("nvlink_latency_ms", "simai"),
}


def cmd_topo(args) -> int:
    fmt = args.format
    for opt, (dest, owner) in TOPO_FORMAT_OPTIONS.items():
        if getattr(args, dest, None) is not None and fmt != owner:
            raise UsageError(f"{opt} applies to --format {owner} only")
    fab = fabric_from_args(args)
    if fmt == "json":
        return _emit(args, json.dumps(fab.to_json_dict(), indent=1) + "\n")
    if fmt == "clab":
        from controller.flows import compile_host_config
        from controller.routing import RouteTable
        from topologies.clab import to_clab_yaml
        table = RouteTable(fab, args.policy)
        given = {k: v for k, v in (("controller", args.controller), ("image", args.image))
                 if v is not None}
        return _emit(args, to_clab_yaml(fab, host_configs=compile_host_config(table),
                                        policy=table.policy_name, **given))
    if fmt == "simai":
        from topologies import simai
        given = {k: getattr(args, k) for k in ("gpu_type", "nvlink_gbps", "latency_ms",
                                               "nvlink_latency_ms") if getattr(args, k) is not None}
        return _emit(args, simai.to_simai(fab, **given))
    if fmt == "dot":
        from topologies.draw import to_dot
        return _emit(args, to_dot(fab))
    if fmt in ("svg", "png"):
        from topologies.draw import draw
        if not args.output:
            if fmt == "png" and sys.stdout.isatty():
                raise UsageError("--format png writes binary: give -o FILE.png")
            import tempfile
            with tempfile.NamedTemporaryFile(suffix="." + fmt) as tmp:
                draw(fab, tmp.name, fmt=fmt)
                data = open(tmp.name, "rb").read()
            sys.stdout.buffer.write(data)
            return 0
        draw(fab, args.output, fmt=fmt)
        print(f"wrote {args.output}", file=sys.stderr)
        return 0
    from topologies.export import summary
    return _emit(args, summary(fab))


def cmd_routes(args) -> int:
    from controller.routing import RouteTable
    from controller.verify import verify
    fab = fabric_from_args(args)
    table = RouteTable(fab, args.policy)
    if args.check or args.traffic:
        rep = verify(table, traffic=args.traffic, seed=args.seed, line_rate=args.line_rate)
        text = json.dumps(rep.to_dict(), indent=1) + "\n" if args.json else rep.to_text() + "\n"
        _emit(args, text)
        if args.check and not rep.ok:
            print(f"zcube routes: check failed: {rep.violations[0]}", file=sys.stderr)
            return EXIT_CHECK_FAILED
        return 0
    if args.format == "json":
        if len(fab.hosts) > 4096:
            raise UsageError(f"--format json lists every pair; {len(fab.hosts)} hosts is too many "
                             f"(at most 4096)")
        out = open(args.output, "w") if args.output else sys.stdout
        try:
            table.write_json(out)
        finally:
            if args.output:
                out.close()
        return 0
    from topologies.export import route_summary
    return _emit(args, route_summary(table))


def cmd_cost(args) -> int:
    from topologies.cost import cost, cost_table, ratios
    fab = fabric_from_args(args)
    costs = [cost(fab)]
    if args.vs:
        other = (matched(args.vs, fab) if args.vs in BUILDERS
                 else fabric_from_spec(args.vs))
        costs.append(cost(other))
    if args.json:
        doc = costs[0] if len(costs) == 1 else {"fabrics": costs, "ratio": ratios(*costs)}
        return _emit(args, json.dumps(doc, indent=1) + "\n")
    text = cost_table(costs) + "\n"
    if len(costs) == 2:
        text += (f"ratio = {costs[0]['fabric']} / {costs[1]['fabric']}; optics 'switch side' "
                 f"count one module per switch port, 'both ends' one per cable end\n")
    return _emit(args, text)


def cmd_up(args) -> int:
    from testbed.cli.up import cmd_up as run_up
    return run_up(args, fabric_from_args(args))


def cmd_clean(args) -> int:
    from testbed.cli.up import cmd_clean as run_clean
    return run_clean(args)


def cmd_workload(args) -> int:
    from testbed.cli.workload import cmd_workload as run_workload
    if not args.link_mbps > 0:
        raise UsageError(f"--link-mbps must be greater than 0, got {args.link_mbps:g}")
    return run_workload(args, fabric_from_args(args))


def cmd_demo(args) -> int:
    from testbed.cli.demo import run_demo
    import os
    backend = "model" if args.no_emulation else args.backend
    if backend == "emulation" and os.geteuid() != 0:
        raise UsageError("the demo emulates both fabrics and needs root: run 'sudo make demo', "
                         "or 'zcube demo --backend model' for the flow-level model")
    return run_demo(args.output, backend=backend)


def _emit(args, text: str) -> int:
    if getattr(args, "output", None):
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


TOPO_DESCRIPTION = """\
Build a fabric and print it as JSON (networkx node-link), Graphviz DOT, an SVG/PNG drawing,
a text summary, or export it for other tools:

clab   containerlab topology (*.clab.yml): a linux node per GPU (named as in the fabric,
       one interface per NIC port, g3-eth0, g3-eth1, with the fabric's MACs and IPs, and
       the routes and static neighbours of --policy), an ovs-bridge node per switch
       (bridge zca0 for switch a0, port 5 = interface zca0-eth5), a link per cable, and a
       'host' node whose exec sets every bridge's DPID, OpenFlow port numbers and
       --controller after deploy.  Create the bridges first: the file's header lists the
       ovs-vsctl commands.  Then: containerlab deploy -t FILE.
simai  SimAI/astra-sim ns-3 topology: GPU g is node g (0..N-1), whatever its NIC ports; each
       NIC port's cable is its own GPU-switch link (a ZCube GPU has two); one NVSwitch per
       server, numbered after the GPUs, with an NVLink link from each of its GPUs; then
       the fabric's switches in fabric order.  Header: nodes, GPUs per server, NVSwitches,
       other switches, links, GPU type; second line: all switch ids, NVSwitches first.
       Parallel cables between two nodes become one link of their summed rate."""


def make_parser() -> Parser:
    p = Parser(prog="zcube", description=__doc__.split("\n\n")[0],
               epilog="Run 'zcube VERB --help' for the options of a verb.",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    sub.required = True

    t = sub.add_parser("topo", help="build a fabric and print, draw or export it",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=TOPO_DESCRIPTION)
    add_fabric_args(t)
    t.add_argument("--format", choices=["summary", "json", "dot", "svg", "png", "clab", "simai"],
                   default="summary",
                   help="output format (default summary): json (networkx node-link), dot, "
                        "svg, png, clab (containerlab topology), simai (SimAI ns-3 topology)")
    t.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    c = t.add_argument_group("--format clab")
    c.add_argument("--controller", metavar="ADDR", default=None,
                   help="OpenFlow controller the bridges connect to, tcp:IP:PORT or "
                        "ssl:IP:PORT (default tcp:127.0.0.1:6653)")
    c.add_argument("--image", metavar="IMAGE", default=None,
                   help="container image of the GPU nodes; needs iproute2 "
                        "(default nicolaka/netshoot)")
    c.add_argument("--policy", default=None,
                   help="routing policy whose host routes and static neighbours the GPU "
                        "nodes get: zcube, zcube-short, ecmp, shortest or module:function "
                        "(default: zcube on zcube fabrics, ecmp otherwise)")
    m = t.add_argument_group("--format simai")
    m.add_argument("--gpu-type", metavar="NAME", default=None,
                   help="GPU type on the header line (default H100)")
    m.add_argument("--nvlink-gbps", metavar="X", type=_number(float), default=None,
                   help="GPU-NVSwitch link rate in Gb/s (default 2880, SimAI's generator "
                        "default; 3600 for an H100's 900 GB/s)")
    m.add_argument("--latency-ms", metavar="X", type=_number(float), default=None,
                   help="latency of every network link in ms (default 0.0005)")
    m.add_argument("--nvlink-latency-ms", metavar="X", type=_number(float), default=None,
                   help="latency of every NVLink link in ms (default 0.000025)")
    t.set_defaults(func=cmd_topo)

    r = sub.add_parser("routes", help="compute routes for a policy; --check verifies them",
                       description="Compute the route table of a policy on a fabric.  Policies: "
                                   "zcube (P1+P2 striped), zcube-short (1-switch shortcut where a "
                                   "pair shares a switch), ecmp (all shortest paths), shortest "
                                   "(one, by a fixed hash), or module:function for your own.")
    add_fabric_args(r)
    add_policy_arg(r)
    r.add_argument("--format", choices=["summary", "json"], default="summary",
                   help="route table output (default summary); json lists every pair's paths")
    r.add_argument("--check", action="store_true",
                   help="verify: every pair routed, loop-free, real links, promised port "
                        "pairings; exit 1 on a violation, naming pair and path")
    r.add_argument("--traffic", choices=["all-to-all", "permutation", "pd"],
                   help="also report per-link-class loads (max, mean, Jain) for this matrix")
    r.add_argument("--line-rate", action="store_true",
                   help="with --traffic: every sender offers its whole NIC bandwidth (loads in "
                        "Gb/s, plus utilisation per link class) instead of one unit per pair")
    r.add_argument("--seed", type=_number(int), default=0, help="seed for --traffic permutation")
    r.add_argument("--json", action="store_true", help="print the check report as JSON")
    r.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    r.set_defaults(func=cmd_routes)

    c = sub.add_parser("cost", help="switches, ports, optics, bisection; --vs compares two",
                       description="Cost of a fabric (ZCUBE.md section 4).  With --vs, a second "
                                   "fabric and the ratios first/second.")
    add_fabric_args(c)
    c.add_argument("--vs", metavar="FABRIC2",
                   help="compare with FABRIC2: a builder name alone (roft, zcube, fattree) means "
                        "same GPUs, GPUs per server and NIC bandwidth at full bisection; or a "
                        "quoted spec like \"roft --servers 4 --oversubscription 2\"")
    c.add_argument("--json", action="store_true", help="print JSON instead of a table")
    c.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    c.set_defaults(func=cmd_cost)

    u = sub.add_parser("up", help="bring the fabric up in Mininet + OVS, verify it, tear down",
                       description="Build the fabric in Mininet (one host per GPU, one interface "
                                   "per NIC port, one OVS bridge per switch), start the OpenFlow "
                                   "controller that installs the computed routes, and prove the "
                                   "switches forward exactly as computed: flows read back, every "
                                   "pair answering, paths traced from port counters.  Without "
                                   "--cli it verifies, prints and tears down.  Needs root.")
    add_fabric_args(u)
    add_policy_arg(u)
    u.add_argument("--link-mbps", type=_number(float), default=100.0, metavar="R",
                   help="emulated bandwidth of one GPU's whole NIC in Mb/s (default 100); every "
                        "cable is scaled by the same factor, so each ZCube port gets R/2")
    u.add_argument("--datapath", choices=["auto", "user", "kernel"], default="auto",
                   help="OVS datapath: kernel needs the openvswitch module; auto picks it when "
                        "present, else the userspace datapath (default auto)")
    u.add_argument("--runtime", choices=["ryu", "os-ken"], default=None,
                   help="controller framework (default: ryu if installed, else os-ken)")
    u.add_argument("--cli", action="store_true",
                   help="drop into the Mininet CLI with the fabric up (pingall, iperf, g0 ...)")
    u.add_argument("--verify", action="store_true",
                   help="verify before the CLI too (always done without --cli)")
    u.add_argument("--trace-sample", type=_number(int), default=None, metavar="N",
                   help="trace the path of N (pair, port pairing) probes, seeded; 0 = all "
                        "(default: all up to 600)")
    u.add_argument("--json", action="store_true", help="print the verification report as JSON")
    u.add_argument("--kv", action="store_true",
                   help="after verifying, carry the workload's KV transfers for real (TCP, "
                        "every byte checked) and write transfers.csv and summary.json to -o DIR")
    u.add_argument("-o", "--output", metavar="DIR", default=None,
                   help="with --kv: folder for transfers.csv and summary.json "
                        "(default results/kv-<fabric>)")
    u.add_argument("--sweep", metavar="RATES", default=None,
                   help="carry the workload at each of these Poisson rates (e.g. 1,2,4; "
                        "--count requests each, default 40) and report P99 TTFT per rate and "
                        "the SLO throughput")
    u.add_argument("--slo-ms", type=_number(float), default=1000.0, metavar="MS",
                   help="with --sweep: the P99 TTFT objective (default 1000 ms)")
    u.add_argument("--background", choices=["permutation", "all-to-all"], default=None,
                   help="with --kv: iperf3 background traffic in this matrix beside the KV "
                        "transfers")
    u.add_argument("--background-mbps", type=_number(float), default=10.0, metavar="R",
                   help="with --background: Mb/s each host offers in total (default 10)")
    u.add_argument("--roce", metavar="SRC:DST", default=None,
                   help="after verifying, send RoCEv2 probes (UDP 4791, InfiniBand BTH) from "
                        "host SRC to host DST on every port pairing the routes use and report "
                        "one-way latency; captures go to --pcap DIR")
    u.add_argument("--pcap", metavar="DIR", default=None,
                   help="with --roce: keep the receiver's pcap files here (default: the run's "
                        "output folder, results/roce)")
    u.add_argument("--force", action="store_true",
                   help="with --kv: run even when the workload offers more than the emulator "
                        "forwarded in calibration")
    from testbed.cli.workload import add_workload_args
    add_workload_args(u, _number)
    u.set_defaults(func=cmd_up)

    cl = sub.add_parser("clean", help="remove what earlier runs left (only the testbed's own)",
                        description="Remove leftovers of earlier runs, as recorded by them: "
                                    "processes by PID (checked against their start time), OVS "
                                    "bridges and veths with the testbed's 'zc' prefix, named "
                                    "namespaces, and OVS daemons the testbed started.  Nothing "
                                    "else is touched.  Needs root.")
    cl.set_defaults(func=cmd_clean)

    from testbed.cli.workload import add_parser as add_workload_parser
    add_workload_parser(sub, add_fabric_args, _number).set_defaults(func=cmd_workload)

    from testbed.cli.run import add_parsers
    add_parsers(sub, _number)

    d = sub.add_parser("demo", help="the default comparison (what 'make demo' runs)",
                       description="ZCube n=4 versus a full-bisection ROFT of the same 16 GPUs: "
                                   "cost, route checks and link loads, then the embedded scenario "
                                   "(scenarios/demo.yaml): both fabrics brought up in Mininet + OVS "
                                   "(root), verified, carrying the same PD KV-cache transfers with "
                                   "rank layouts aligned and crossed, three repetitions; ends with "
                                   "the comparison table and the report's path.")
    d.add_argument("-o", "--output", metavar="DIR", default="results/demo",
                   help="folder for the demo's files (default results/demo)")
    d.add_argument("--backend", choices=["emulation", "model"], default="emulation",
                   help="emulation (default; needs root) or model (the flow-level simulator)")
    d.add_argument("--no-emulation", action="store_true",
                   help="same as --backend model")
    d.set_defaults(func=cmd_demo)
    return p


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (FabricError, UsageError) as err:
        print(f"zcube {args.verb}: error: {one_line(str(err))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except OSError as err:
        print(f"zcube {args.verb}: error: {one_line(str(err.filename or ''))}: {err.strerror}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("zcube: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
