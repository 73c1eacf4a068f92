"""``zcube up`` and ``zcube clean``: the side-effect verbs of the CLI."""
from __future__ import annotations

import json
import os
import signal
import sys

from testbed.errors import UsageError
from testbed.emulation.state import Lock, clean_run, runs

USERSPACE_CAPACITY_MBPS = 5000    # one forwarding thread here: about 5-10 Gb/s in total


def log(msg: str) -> None:
    print(f"[zcube] {msg}", file=sys.stderr, flush=True)


def _terminate_on_sigterm():
    """SIGTERM/SIGHUP tear the emulation down like Ctrl-C.  A forked copy of this process
    (pyroute2 forks to enter namespaces, and ends its children with SIGTERM) must not run
    the teardown: it just exits."""
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:
            os._exit(128 + signum)
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def check_can_emulate(runtime: str | None) -> None:
    """Refuse before anything starts: not root, tools missing, runtime not installed."""
    import importlib.util
    import shutil
    if os.geteuid() != 0:
        raise UsageError("zcube up needs root (network namespaces, Open vSwitch); run it with sudo")
    for tool in ("ovs-vsctl", "ovs-vswitchd", "mnexec", "tc", "ip"):
        if not shutil.which(tool):
            raise UsageError(f"{tool} not found: run 'make setup' first")
    if importlib.util.find_spec("mininet") is None:
        raise UsageError("Mininet is not importable: run 'make setup' (Debian's mininet package)")
    wanted = {"ryu": "ryu", "os-ken": "os_ken"}
    names = [runtime] if runtime else list(wanted)
    if not any(importlib.util.find_spec(wanted[n]) for n in names):
        raise UsageError(f"controller runtime {' or '.join(names)} is not installed: run 'make setup'")


def cmd_up(args, fabric) -> int:
    from controller.routing import RouteTable
    if not args.link_mbps > 0:
        raise UsageError(f"--link-mbps must be greater than 0, got {args.link_mbps:g}")
    if args.trace_sample is not None and args.trace_sample < 0:
        raise UsageError(f"--trace-sample must be 0 (all) or more, got {args.trace_sample}")
    RouteTable(fabric, args.policy)           # a bad policy fails here, before anything starts
    if args.roce:
        pair = args.roce.split(":")
        if len(pair) != 2 or not all(fabric.is_host(h) for h in pair) or pair[0] == pair[1]:
            raise UsageError(f"--roce wants SRC:DST, two different hosts of {fabric.label} "
                             f"(e.g. g0:g5), got {args.roce!r}")
    work = skipped = None
    if args.sweep:
        try:
            args.sweep_rates = sorted({float(x) for x in args.sweep.split(",")})
        except ValueError:
            raise UsageError(f"--sweep wants rates like 1,2,4, got {args.sweep!r}") from None
        if not args.sweep_rates or min(args.sweep_rates) <= 0:
            raise UsageError(f"--sweep rates must be greater than 0, got {args.sweep!r}")
        if args.arrivals == "trace":
            args.arrivals = "poisson"            # a sweep varies the Poisson arrival rate
        if args.count is None and args.duration is None:
            args.count = 40
        args.kv = True
    if args.kv:
        from testbed.cli.workload import workload_from_args
        work, skipped = workload_from_args(args, fabric)
    check_can_emulate(args.runtime)
    from testbed.emulation.ovs import OvsError, resolve_datapath
    try:
        resolve_datapath(args.datapath)
    except OvsError as err:
        raise UsageError(str(err)) from None
    offered = len(fabric.hosts) * args.link_mbps
    if offered > USERSPACE_CAPACITY_MBPS:
        log(f"warning: {len(fabric.hosts)} hosts x {args.link_mbps:g} Mb/s = {offered:,.0f} Mb/s "
            f"offered at line rate; OVS's userspace datapath forwards about "
            f"{USERSPACE_CAPACITY_MBPS:,} Mb/s here, so full-rate traffic will not reach the "
            f"shaped rates (lower --link-mbps)")
    from mininet.log import setLogLevel
    setLogLevel("warning" if not args.cli else "output")
    from testbed.emulation.emulation import Emulation, EmulationError
    _terminate_on_sigterm()
    emu = Emulation(fabric, policy=args.policy, link_mbps=args.link_mbps,
                    datapath=args.datapath, runtime=args.runtime, log=log)
    try:
        with emu:
            log(f"{fabric.label}, policy {emu.table.policy_name}, NIC {args.link_mbps:g} Mb/s "
                f"emulated for {fabric.nic_gbps:g} Gb/s (scale 1:{1 / fabric.scale_for(args.link_mbps):g})")
            report = None
            if args.verify or not args.cli:
                report = emu.verify(sample=args.trace_sample, progress=_progress(args))
                _print_report(report, args.json and not args.kv)
            if args.roce and report["ok"]:
                _roce(emu, args)
            if args.sweep and report["ok"]:
                report = dict(report, ok=_sweep(emu, fabric, args))
            elif args.kv and report["ok"]:
                kv_ok = _carry(emu, fabric, work, skipped, args)
                report = dict(report, ok=report["ok"] and kv_ok)
            if args.cli:
                _interactive(emu)
    except EmulationError as err:
        log(f"error: {err}")
        return 1
    except KeyboardInterrupt:
        log("interrupted; torn down")
        return 130
    return 0 if report is None or report["ok"] else 1


def _carry(emu, fabric, work, skipped, args) -> bool:
    """Run the KV transfers, write the records, print the figures; True if all verified."""
    from testbed.emulation.linkstats import LinkSampler
    from testbed.experiment.records import summarize, write_summary, write_transfers_csv
    from testbed.emulation.transfers import run_transfers
    out = args.output or os.path.join("results", "kv-" + fabric.label.replace(" ", "-"))
    os.makedirs(out, exist_ok=True)
    from testbed.emulation.calibrate import calibrate, guard, offered_mbps
    cal = calibrate(emu)
    offered = offered_mbps(work)
    log("calibration: " + "; ".join(f"{p['pairing']} {p['mbps']:.1f}/{p['shaped_mbps']:.1f} Mb/s"
                                     for p in cal["paths"])
        + f"; all hosts at once {cal['aggregate_mbps']:.1f}/{cal['aggregate_shaped_mbps']:.1f} "
          f"Mb/s; workload offers {offered:.1f} Mb/s on average")
    if args.background:
        offered += len(fabric.hosts) * args.background_mbps
    refusal = guard(cal, offered)
    if refusal and not args.force:
        log(f"refused: {refusal}")
        return False
    log(f"carrying {len(work.transfers)} KV transfers of {len(work.schedule)} requests "
        f"({work.bytes_total:,} bytes) ...")
    background = None
    if args.background:
        from testbed.emulation.background import Background
        span = max((t.ready_s for t in work.transfers), default=0.0) + 5
        try:
            background = Background(emu, args.background, args.background_mbps, span)
        except ValueError as err:
            log(f"refused: {err}")
            return False
        log(f"background: {len(background.flows)} iperf3 flows ({args.background}), "
            f"{background.offered_mbps:.1f} Mb/s offered in total")
    with LinkSampler(emu) as sampler:
        if background:
            with background:
                rows = run_transfers(emu, work)
        else:
            rows = run_transfers(emu, work)
    if background:
        log(f"background carried {background.achieved_mbps:.1f} Mb/s (sum of flows)")
    doc = summarize(work, rows, args.link_mbps, len(skipped))
    doc["link_util"] = sampler.summary()
    sampler.write_csv(os.path.join(out, "links.csv"))
    doc.update(fabric=fabric.label, policy=emu.table.policy_name, model=work.model.name,
               placement=work.deployment.placement, calibration=cal,
               offered_mbps=round(offered, 3),
               background=None if not background else {
                   "pattern": args.background, "flows": len(background.flows),
                   "offered_mbps": round(background.offered_mbps, 3),
                   "achieved_mbps": round(background.achieved_mbps, 3)})
    write_transfers_csv(rows, os.path.join(out, "transfers.csv"))
    write_summary(doc, os.path.join(out, "summary.json"))
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        fct, ttft = doc["fct_ms"] or {}, doc["ttft_ms"] or {}
        print(f"KV transfers        {doc['transfers_verified']}/{doc['transfers_total']} "
              f"verified (byte count and SHA-256), {doc['bytes_total']:,} bytes")
        print(f"FCT ms              p50 {fct.get('p50')}  p99 {fct.get('p99')}  "
              f"mean {fct.get('mean')}")
        print(f"TTFT ms             p50 {ttft.get('p50')}  p99 {ttft.get('p99')}  "
              f"({doc['requests_completed']} requests)")
        util = doc["link_util"] or {}
        print(f"link utilisation    max {util.get('max')}  mean {util.get('mean')}  "
              f"Jain {util.get('jain')} (directed links that carried traffic)")
        print(f"wrote {out}/transfers.csv, links.csv and summary.json")
    return doc["transfers_verified"] == doc["transfers_total"]


def _sweep(emu, fabric, args) -> bool:
    """The same workload at several Poisson rates: P99 TTFT per rate, and the largest rate
    whose P99 TTFT stays within --slo-ms (SLO throughput)."""
    from traffic.workload import slo_throughput

    from testbed.experiment.records import summarize, write_summary
    from testbed.emulation.transfers import run_transfers
    from testbed.cli.workload import workload_from_args
    out = args.output or os.path.join("results", "sweep-" + fabric.label.replace(" ", "-"))
    os.makedirs(out, exist_ok=True)
    points, ok = [], True
    for rate in args.sweep_rates:
        args.rate = rate
        work, _ = workload_from_args(args, fabric)
        rows = run_transfers(emu, work)
        doc = summarize(work, rows, args.link_mbps)
        ok = ok and doc["transfers_verified"] == doc["transfers_total"]
        ttft, fct = doc["ttft_ms"] or {}, doc["fct_ms"] or {}
        points.append({"rate_per_s": rate, "ttft_p99_ms": ttft.get("p99"),
                       "ttft_p50_ms": ttft.get("p50"), "fct_p99_ms": fct.get("p99"),
                       "requests_per_s": doc["requests_per_s"],
                       "verified": f"{doc['transfers_verified']}/{doc['transfers_total']}"})
        print(f"rate {rate:g}/s: TTFT p50 {ttft.get('p50')} ms, p99 {ttft.get('p99')} ms, "
              f"FCT p99 {fct.get('p99')} ms, {doc['requests_per_s']} requests/s, "
              f"transfers verified {points[-1]['verified']}", flush=True)
    best = slo_throughput([p["rate_per_s"] for p in points],
                          [p["ttft_p99_ms"] if p["ttft_p99_ms"] is not None else float("inf")
                           for p in points], args.slo_ms)
    doc = {"fabric": fabric.label, "policy": emu.table.policy_name, "slo_ms": args.slo_ms,
           "points": points, "slo_throughput_per_s": best}
    write_summary(doc, os.path.join(out, "sweep.json"))
    print(f"SLO throughput (largest rate with TTFT p99 <= {args.slo_ms:g} ms): "
          f"{'none of the rates' if best is None else f'{best:g} requests/s'}; "
          f"wrote {out}/sweep.json")
    return ok


def _roce(emu, args) -> None:
    from testbed.emulation.roce_probe import roce_probe
    src, dst = args.roce.split(":")
    for r in roce_probe(emu, src, dst, args.pcap or os.path.join("results", "roce")):
        lat = r["latency_ms"] or {}
        path = "-".join(r["path"]) if r["path"] else "unclear (other traffic?)"
        print(f"RoCEv2 {src} -> {dst} port {r['pairing']} ({r['src_ip']} -> {r['dst_ip']}): "
              f"{r['received']}/{r['sent']} received, path {path}, one-way latency p50 "
              f"{lat.get('p50')} ms, max {lat.get('max')} ms; {r['pcap']}")


def _progress(args):
    if args.json and not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bar = {}

    def step(n):
        if "bar" not in bar:
            bar["bar"] = tqdm(desc="[zcube] tracing paths", unit="path", file=sys.stderr,
                              leave=False, disable=not sys.stderr.isatty())
        bar["bar"].update(n)
    return step


def _print_report(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=1))
        return
    print(f"switches connected  {report['switches_connected']}/{report['switches']}")
    print(f"flows installed     {report['flows_installed']}/{report['flows_expected']} "
          f"(read back from every switch, compared with the computed set)")
    print(f"pairs answering     {report['pairs_ok']}/{report['pairs_tested']} "
          f"(every ordered pair, every port pairing the policy uses)")
    print(f"paths traced        {report['paths_ok']}/{report['paths_traced']} "
          f"(crossed exactly the computed switches and links)")
    print(f"bring-up {report['bringup_s']:.1f} s, verification {report['verify_s']:.1f} s")
    if report["ok"]:
        print("OK: the fabric forwards exactly as computed")
    else:
        print(f"FAILED: {report['problems_total']} problem(s); first ones:")
        for p in report["problems"]:
            print(f"  {p}")


def _interactive(emu) -> None:
    from mininet.cli import CLI
    fab = emu.fabric
    h0, h1 = fab.hosts[0], fab.hosts[-1]

    class FabricCLI(CLI):
        """Mininet's CLI with the testbed's failure commands."""

        def do_fail(self, line):
            """fail ELEMENT...  take cables, NIC ports or switches down (a0-b1, g3:1, a2) and
            wait for the controller to reroute around them"""
            self._fault(emu.fail, line.split())

        def do_restore(self, line):
            """restore [ELEMENT...]  bring failed elements back (all when none is named)"""
            self._fault(emu.restore, line.split())

        def do_failures(self, line):
            """failures  what is down now, and pairs cut off"""
            st = emu.status()
            print(json.dumps({"failures": st.get("failures"), "reroutes": st.get("reroutes"),
                              "disconnected": st.get("disconnected")}, indent=1))

        def _fault(self, call, items):
            from topologies import FabricError

            from testbed.emulation.faults import FaultError
            try:
                out = call(*items)
            except (FabricError, FaultError, ValueError) as err:
                print(f"*** {err}")
                return
            print(f"down now: {out['elements']}; rerouted in "
                  f"{1000 * (out['since_injection_s'] or 0):.0f} ms, "
                  f"{out['disconnected_pairs']} pairs cut off")

    print(f"\nFabric {fab.label} is up.  Hosts are GPUs ({h0.name} .. {h1.name}); switch s is "
          f"bridge zc<s> (a0 -> zca0).\nTry: pingall | {h0.name} ping -c1 {h1.ports[-1].ip} | "
          f"iperf {h0.name} {h1.name} | dpctl dump-flows | fail a0-b1 | failures | restore | "
          f"exit\n(pingall uses each GPU's first address: after a fabric failure a pair keeps "
          f"only its other plane, so pings to the dead plane's address fail by design)\n")
    FabricCLI(emu.net)


def cmd_clean(args) -> int:
    if os.geteuid() != 0:
        raise UsageError("zcube clean needs root (it removes bridges, veths and processes)")
    lock = Lock()
    if not lock.acquire():
        log(f"an emulation is running (process {lock.holder()}); stop it first")
        return 1
    try:
        from testbed.emulation.ovs import stop_own_leftovers
        total = {"processes": 0, "bridges": 0, "links": 0, "netns": 0}
        for rec in runs():
            for k, v in clean_run(rec).items():
                total[k] += v
        total["ovs_daemons"] = stop_own_leftovers()
    finally:
        lock.release()
    print("removed: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in total.items()))
    return 0
