"""The options of ``zcube up`` and ``zcube clean``."""
from __future__ import annotations

from testbed.cli.common import (
    add_emulation_args,
    add_fabric_args,
    add_policy_arg,
    fabric_from_args,
    number,
)


def cmd_up(args) -> int:
    from testbed.cli.up import cmd_up as run_up
    return run_up(args, fabric_from_args(args))


def cmd_clean(args) -> int:
    from testbed.cli.up import cmd_clean as run_clean
    return run_clean(args)


def add_parsers(sub) -> None:
    u = sub.add_parser("up", help="bring the fabric up in Mininet + OVS, verify it, tear down",
                       description="Build the fabric in Mininet (one host per GPU, one interface "
                                   "per NIC port, one OVS bridge per switch), start the OpenFlow "
                                   "controller that installs the computed routes, and prove the "
                                   "switches forward exactly as computed: flows read back, every "
                                   "pair answering, paths traced from port counters.  Without "
                                   "--cli it verifies, prints and tears down.  Needs root.")
    add_fabric_args(u)
    add_policy_arg(u)
    u.add_argument("--link-mbps", type=number(float), default=100.0, metavar="R",
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
    u.add_argument("--trace-sample", type=number(int), default=None, metavar="N",
                   help="trace the path of N (pair, port pairing) probes, seeded; 0 = all "
                        "(default: all up to 600)")
    u.add_argument("--json", action="store_true", help="print the verification report as JSON")
    add_emulation_args(u, "scenario key")
    _add_workload_options(u)
    u.set_defaults(func=cmd_up)
    cl = sub.add_parser("clean", help="remove what earlier runs left (only the testbed's own)",
                        description="Remove leftovers of earlier runs, as recorded by them: "
                                    "processes by PID (checked against their start time), OVS "
                                    "bridges and veths with the testbed's 'zc' prefix, named "
                                    "namespaces, and OVS daemons the testbed started.  Nothing "
                                    "else is touched.  Needs root.")
    cl.set_defaults(func=cmd_clean)


def _add_workload_options(u) -> None:
    u.add_argument("--kv", action="store_true",
                   help="after verifying, run the workload's KV transfers for real (TCP, "
                        "every byte checked) through the same pipeline as 'zcube run' (the "
                        "flags make a one-fabric scenario) and write its results to -o DIR")
    u.add_argument("-o", "--output", metavar="DIR", default=None,
                   help="with --kv/--sweep: results folder, laid out as 'zcube run' lays "
                        "it out: DIR/<fabric>/transfers.csv, links.csv, requests.csv, "
                        "summary.json ..., DIR/report.html (default results/kv-<fabric>)")
    u.add_argument("--sweep", metavar="RATES", default=None,
                   help="also run the workload at each of these Poisson rates (e.g. 1,2,4; "
                        "--count requests each, default 40) and report P99 TTFT per rate and "
                        "the SLO throughput (scenario key sweep)")
    u.add_argument("--slo-ms", type=number(float), default=1000.0, metavar="MS",
                   help="with --sweep: the P99 TTFT objective (default 1000 ms)")
    u.add_argument("--background", choices=["permutation", "all-to-all"], default=None,
                   help="with --kv: iperf3 background traffic in this matrix beside the KV "
                        "transfers")
    u.add_argument("--background-mbps", type=number(float), default=10.0, metavar="R",
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
    u.add_argument("--no-report", action="store_true",
                   help="with --kv or --sweep: skip report.html and the plots (as 'zcube run "
                        "--no-report'; 'zcube report DIR' builds them later)")
    u.add_argument("--save-scenario", metavar="FILE", default=None,
                   help="with --kv or --sweep: write the scenario these flags describe to "
                        "FILE; 'zcube run FILE' then runs the same requests")
    from testbed.cli.web_args import add_web_args
    add_web_args(u, "without --kv, --sweep or --cli the fabric stays up, verified, until "
                    "Ctrl-C")
    from testbed.cli.workload import add_workload_args
    add_workload_args(u, number)
