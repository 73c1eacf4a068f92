"""``zcube up`` and ``zcube clean``: the side-effect verbs of the CLI."""
from __future__ import annotations

import json
import os
import sys
import time

from testbed.emulation.machine_state import Lock, clean_run, runs
from testbed.emulation.prereq import check_can_emulate, quiet_mininet, terminate_on_sigterm
from testbed.errors import UsageError

USERSPACE_CAPACITY_MBPS = 5000    # one forwarding thread here: about 5-10 Gb/s in total


def log(msg: str) -> None:
    print(f"[zcube] {msg}", file=sys.stderr, flush=True)


def _check_flags(args, fabric) -> None:
    from controller.routing import RouteTable
    from testbed.cli.common import in_range
    from testbed.experiment.scenario import limits as L
    in_range("--link-mbps", args.link_mbps, *L.LINK_MBPS)
    if args.buffer_ms is not None:
        in_range("--buffer-ms", args.buffer_ms, 0, L.BUFFER_MS, low_open=True)
    if args.trace_sample is not None:
        in_range("--trace-sample", args.trace_sample, 0, L.VERIFY_SAMPLE)
    in_range("--background-mbps", args.background_mbps, 0, L.LINK_MBPS[1], low_open=True)
    in_range("--slo-ms", args.slo_ms, 0, L.SLO_MS, low_open=True)
    RouteTable(fabric, args.policy)           # a bad policy fails here, before anything starts
    if args.roce:
        pair = args.roce.split(":")
        if len(pair) != 2 or not all(fabric.is_host(h) for h in pair) or pair[0] == pair[1]:
            raise UsageError(f"--roce wants SRC:DST, two different hosts of {fabric.label} "
                             f"(e.g. g0:g5), got {args.roce!r}")
    if args.background and not (args.kv or args.sweep):
        raise UsageError("--background goes with --kv or --sweep")
    if args.save_scenario and not (args.kv or args.sweep):
        raise UsageError("--save-scenario goes with --kv or --sweep (it saves their workload)")
    if args.no_report and not (args.kv or args.sweep):
        raise UsageError("--no-report goes with --kv or --sweep (they write the report)")
    from testbed.cli.web_args import check_web
    check_web(args)


def _sweep_rates(text: str) -> list[float]:
    try:
        rates = sorted({float(x) for x in text.split(",")})
    except ValueError:
        raise UsageError(f"--sweep wants rates like 1,2,4, got {text!r}") from None
    if not rates or min(rates) <= 0:
        raise UsageError(f"--sweep rates must be greater than 0, got {text!r}")
    return rates


def scenario_from_flags(args, fabric):
    """The one-fabric scenario that ``zcube up --kv/--sweep`` flags describe."""
    from testbed.cli.workload import scenario_doc, scenario_from_doc
    doc = scenario_doc(args, fabric, f"up-{fabric.kind}")
    if args.trace_sample is not None:
        doc["verify_sample"] = args.trace_sample
    if args.sweep:
        doc["sweep"] = {"rates": _sweep_rates(args.sweep), "slo_ttft_ms": args.slo_ms,
                        "every_rate": True}         # each rate named, each run
        if args.count is not None:
            doc["sweep"]["count"] = args.count
        if args.count is None and args.duration is None:
            doc["workload"]["count"] = 40
    if args.background:
        doc["background"] = {"pattern": args.background, "mbps": args.background_mbps}
    return scenario_from_doc(doc)


def _warn_capacity(fabric, link_mbps: float) -> None:
    offered = len(fabric.hosts) * link_mbps
    if offered > USERSPACE_CAPACITY_MBPS:
        log(f"warning: {len(fabric.hosts)} hosts x {link_mbps:g} Mb/s = {offered:,.0f} Mb/s "
            f"offered at line rate; OVS's userspace datapath forwards about "
            f"{USERSPACE_CAPACITY_MBPS:,} Mb/s here, so full-rate traffic will not reach the "
            f"shaped rates (lower --link-mbps)")


def cmd_up(args, fabric) -> int:
    _check_flags(args, fabric)
    sc = scenario_from_flags(args, fabric) if (args.kv or args.sweep) else None
    if sc is not None and args.save_scenario:
        from testbed.experiment.scenario import dumps
        with open(args.save_scenario, "w") as f:
            f.write(dumps(sc))
        log(f"wrote {args.save_scenario}: 'zcube run {args.save_scenario}' runs the same")
    check_can_emulate(args.runtime)
    from testbed.emulation.ovs import OvsError, resolve_datapath
    try:
        resolve_datapath(args.datapath)
    except OvsError as err:
        raise UsageError(str(err)) from None
    _warn_capacity(fabric, args.link_mbps)
    quiet_mininet(args.cli)
    terminate_on_sigterm()
    from testbed.cli.web_args import serving
    with serving(args):
        if sc is not None:
            return _run_workload(args, fabric, sc)
        return _run_plain(args, fabric)


def _run_workload(args, fabric, sc) -> int:
    """``up --kv/--sweep``: the scenario through the experiment pipeline, with this
    command's printing (and --roce, --cli) hooked into the emulation session."""
    from testbed.analysis.results import present
    from testbed.emulation.backend import EmulationBackend
    from testbed.experiment.pipeline import prepare_out, run_and_check
    out = args.output or os.path.join("results", "kv-" + fabric.label.replace(" ", "-"))
    prepare_out(out)
    backend = EmulationBackend({"datapath": args.datapath, "runtime": args.runtime},
                               after_verify=lambda emu, rep: _after_verify(emu, rep, args),
                               before_down=(_interactive if args.cli else None))
    code, summaries = run_and_check(sc, out, backend, args.force)
    if summaries:
        if args.json:
            print(json.dumps(next(iter(summaries.values())), indent=1))
        else:
            present(out, report=not args.no_report)
    return code


def _after_verify(emu, report: dict, args) -> None:
    # with --json, stdout is the one JSON document of the run's summary: the report to stderr
    _print_report(report, False, sys.stderr if args.json else sys.stdout)
    if args.roce and report["ok"]:
        _roce(emu, args)


def _run_plain(args, fabric) -> int:
    """``up`` without a workload: bring up, verify, probe, CLI, tear down."""
    from testbed.cli.common import emulation_flags
    from testbed.core.settings import EmulationSettings
    from testbed.emulation.emulation import Emulation, EmulationError
    emu = Emulation(fabric, policy=args.policy, link_mbps=args.link_mbps,
                    datapath=args.datapath, runtime=args.runtime, log=log,
                    buffer_ms=args.buffer_ms,
                    settings=emulation_flags(args, EmulationSettings())[0])
    report = None
    try:
        with emu:
            log(f"{fabric.label}, policy {emu.table.policy_name}, NIC {args.link_mbps:g} Mb/s "
                f"emulated for {fabric.nic_gbps:g} Gb/s "
                f"(scale 1:{1 / fabric.scale_for(args.link_mbps):g})")
            if args.verify or not args.cli:
                report = emu.verify(sample=args.trace_sample, progress=_progress(args))
                if not args.json:                # --json: after teardown, with its phases
                    _print_report(report, False)
            if args.roce and report and report["ok"]:
                _roce(emu, args)
            if args.cli:
                _interactive(emu)
            elif args.web:
                _serve(emu)
    except EmulationError as err:
        log(f"error: {err}")
        return 1
    except KeyboardInterrupt:
        log("interrupted; torn down")
        return 130
    log(f"down in {sum(emu.teardown.seconds.values()):.1f} s ({emu.teardown.line()})")
    if report is not None and args.json:
        _print_report(dict(report, teardown_phases_s=emu.teardown.to_dict()), True)
    return 0 if report is None or report["ok"] else 1


def _serve(emu) -> None:
    """Keep the fabric up for the live view until Ctrl-C (or SIGTERM)."""
    log("the fabric stays up for the live view; Ctrl-C tears it down")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


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


def _print_report(report: dict, as_json: bool, out=None) -> None:
    out = out or sys.stdout
    if as_json:
        print(json.dumps(report, indent=1), file=out)
        return
    lines = [f"switches connected  {report['switches_connected']}/{report['switches']}",
             f"flows installed     {report['flows_installed']}/{report['flows_expected']} "
             f"(read back from every switch, compared with the computed set)",
             f"pairs answering     {report['pairs_ok']}/{report['pairs_tested']} "
             f"(every ordered pair, every port pairing the policy uses)",
             f"paths traced        {report['paths_ok']}/{report['paths_traced']} "
             f"(crossed exactly the computed switches and links)",
             f"bring-up {report['bringup_s']:.1f} s, verification {report['verify_s']:.1f} s"]
    if report["ok"]:
        lines.append("OK: the fabric forwards exactly as computed")
    else:
        lines.append(f"FAILED: {report['problems_total']} problem(s); first ones:")
        lines += [f"  {p}" for p in report["problems"]]
    print("\n".join(lines), file=out)


PING_TIMEOUT_S = "1"      # pingall's wait for each reply, in seconds


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

        def do_pingall(self, line):
            """pingall [TIMEOUT]  ping between every pair of GPUs (first address), waiting
            TIMEOUT seconds for each reply (1 s unless given: emulated round trips take
            milliseconds, and ping alone waits 10 s for each reply lost to a failure)"""
            self.mn.pingAll(line.strip() or PING_TIMEOUT_S)

        def do_failures(self, line):
            """failures  what is down now, and pairs cut off"""
            st = emu.status()
            print(json.dumps({"failures": st.get("failures"), "reroutes": st.get("reroutes"),
                              "disconnected": st.get("disconnected")}, indent=1))

        def _fault(self, call, items):
            from testbed.emulation.faults import FaultError
            from topologies import FabricError
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
    FabricCLI(emu.mininet())


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
