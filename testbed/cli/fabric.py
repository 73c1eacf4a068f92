"""``zcube topo``, ``zcube routes``, ``zcube cost``: a fabric built, routed and costed
(no root, nothing started)."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys

from testbed.cli.common import (
    EXIT_CHECK_FAILED,
    add_fabric_args,
    add_policy_arg,
    emit,
    fabric_from_args,
    fabric_from_spec,
    matched,
    number,
)
from testbed.errors import UsageError
from topologies import BUILDERS

# topo options that belong to one --format: option -> (attribute, format)
TOPO_FORMAT_OPTIONS = {
    "--controller": ("controller", "clab"), "--image": ("image", "clab"),
    "--policy": ("policy", "clab"),
    "--gpu-type": ("gpu_type", "simai"),
    "--latency-ms": ("latency_ms", "simai"), "--nvlink-latency-ms": ("nvlink_latency_ms", "simai"),
}


def _clab(args, fab) -> int:
    """Stream the containerlab file (to -o FILE or stdout); the size limit and every other
    check come before its first line."""
    from controller.flows import HostConfigs
    from controller.routing import RouteTable
    from topologies.clab import check_size, write_clab
    check_size(fab)
    table = RouteTable(fab, args.policy)
    given = {k: v for k, v in (("controller", args.controller), ("image", args.image))
             if v is not None}
    with open(args.output, "w") if args.output else contextlib.nullcontext(sys.stdout) as out:
        write_clab(fab, out, host_configs=HostConfigs(table), policy=table.policy_name, **given)
    if args.output:
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_topo(args) -> int:
    fmt = args.format
    for opt, (dest, owner) in TOPO_FORMAT_OPTIONS.items():
        if getattr(args, dest, None) is not None and fmt != owner:
            raise UsageError(f"{opt} applies to --format {owner} only")
    fab = fabric_from_args(args)
    if fmt == "json":
        return emit(args, json.dumps(fab.to_json_dict(), indent=1) + "\n")
    if fmt == "clab":
        return _clab(args, fab)
    if fmt == "simai":
        from topologies import simai
        given = {k: getattr(args, k) for k in ("gpu_type", "latency_ms", "nvlink_latency_ms")
                 if getattr(args, k) is not None}
        return emit(args, simai.to_simai(fab, **given))
    if fmt == "dot":
        from topologies.draw import to_dot
        return emit(args, to_dot(fab))
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
    from topologies.text_summary import summary
    return emit(args, summary(fab))


def cmd_routes(args) -> int:
    from controller.routing import RouteTable
    from controller.verify import verify
    fab = fabric_from_args(args)
    table = RouteTable(fab, args.policy)
    if args.check or args.traffic:
        rep = verify(table, traffic=args.traffic, seed=args.seed, line_rate=args.line_rate)
        text = json.dumps(rep.to_dict(), indent=1) + "\n" if args.json else rep.to_text() + "\n"
        emit(args, text)
        if rep.overloaded and (args.json or args.output):     # else the text said it
            print(f"zcube routes: warning: {rep.overload_lines()[0]}", file=sys.stderr)
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
    from topologies.text_summary import route_summary
    return emit(args, route_summary(table))


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
        return emit(args, json.dumps(doc, indent=1) + "\n")
    text = cost_table(costs) + "\n"
    if len(costs) == 2:
        text += (f"ratio = {costs[0]['fabric']} / {costs[1]['fabric']}; optics 'switch side' "
                 f"count one module per switch port, 'both ends' one per cable end\n")
    return emit(args, text)



TOPO_DESCRIPTION = """\
Build a fabric and print it as JSON (networkx node-link), Graphviz DOT, an SVG/PNG drawing,
a text summary, or export it for other tools:

clab   containerlab topology (*.clab.yml): a linux node per GPU (named as in the fabric,
       one interface per NIC port, g3-eth0, g3-eth1, with the fabric's MACs and IPs, and
       the routes and static neighbours of --policy), an ovs-bridge node per switch
       (bridge zca0 for switch a0, port 5 = interface zca0-eth5), a link per cable, and a
       'host' node whose exec sets every bridge's DPID, OpenFlow port numbers and
       --controller after deploy.  Create the bridges first: the file's header lists the
       ovs-vsctl commands.  Then: containerlab deploy -t FILE.  The file grows with GPUs
       squared (each GPU's static neighbours): at most 1,024 GPUs (about 190 MB).
simai  SimAI/astra-sim ns-3 topology: GPU g is node g (0..N-1), whatever its NIC ports; each
       NIC port's cable is its own GPU-switch link (a ZCube GPU has two); one NVSwitch per
       server, numbered after the GPUs, with an NVLink link from each of its GPUs; then
       the fabric's switches in fabric order.  Header: nodes, GPUs per server, NVSwitches,
       other switches, links, GPU type; second line: all switch ids, NVSwitches first.
       Parallel cables between two nodes become one link of their summed rate."""



def add_parsers(sub) -> None:
    _add_topo(sub)
    _add_routes(sub)
    _add_cost(sub)


def _add_topo(sub) -> None:
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
                        "nodes get: zcube, zcube-short, ecmp, shortest, spray[:K] or "
                        "module:function (default: zcube on zcube fabrics, ecmp otherwise)")
    m = t.add_argument_group("--format simai")
    m.add_argument("--gpu-type", metavar="NAME", default=None,
                   help="GPU type on the header line (default H100)")
    m.add_argument("--latency-ms", metavar="X", type=number(float), default=None,
                   help="latency of every network link in ms (default 0.0005)")
    m.add_argument("--nvlink-latency-ms", metavar="X", type=number(float), default=None,
                   help="latency of every NVLink link in ms (default 0.000025)")
    t.set_defaults(func=cmd_topo)


def _add_routes(sub) -> None:
    r = sub.add_parser("routes", help="compute routes for a policy; --check verifies them",
                       description="Compute the route table of a policy on a fabric.  Policies: "
                                   "zcube (P1+P2 striped), zcube-short (1-switch shortcut where a "
                                   "pair shares a switch), zcube-pxn and pxn (with NVLink: "
                                   "hand a transfer to the sibling GPU whose NIC is on the "
                                   "destination's switch or rail), "
                                   "ecmp (all shortest paths), shortest "
                                   "(one, by a fixed hash), spray and spray:K (ecmp's paths, K "
                                   "connections per port pairing), spray:all (the even split "
                                   "over every path), or module:function for your own (its "
                                   "module in the working folder or on the Python path).")
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
                        "Gb/s, plus utilisation per link class) instead of one unit per pair; "
                        "links offered more than their rate are named on an OVERLOADED "
                        "line (a load, not a routing error: it leaves the exit status as it is)")
    r.add_argument("--seed", type=number(int), default=0, help="seed for --traffic permutation")
    r.add_argument("--json", action="store_true", help="print the check report as JSON")
    r.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    r.set_defaults(func=cmd_routes)


def _add_cost(sub) -> None:
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
