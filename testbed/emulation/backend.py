"""The emulation as a backend of the experiment pipeline (:mod:`testbed.core.backend`): a
session brings the fabric up and verifies it, calibrates and admits the load, then runs
each workload's KV transfers for real."""
from __future__ import annotations

import time

from testbed.core.backend import RunError, SessionOptions, WorkloadResult
from testbed.core.live_state import current as live

VERIFY_KEYS = ("switches", "switches_connected", "flows_expected", "flows_installed",
               "pairs_tested", "pairs_ok", "paths_traced", "paths_ok", "bringup_s",
               "verify_s", "probes_retried", "rounds_retried", "ok")
# Workload time 0 comes this long after set-up, plus the time to tell every agent its schedule
START_DELAY_S = 0.25
START_PER_HOST_S = 0.002
START_PER_TRANSFER_S = 0.00005
# A repetition held back for a busy host waits for a quiet spell this long (the hypervisor under
# its noted share in every window), at most QUIET_MOST_S, as a busy spell lasts up to minutes
QUIET_S = 3.0
QUIET_MOST_S = 30.0


def start_delay(hosts: int, transfers: int) -> float:
    """Seconds from setting a workload's time 0 to it: every agent told its transfers."""
    return START_DELAY_S + START_PER_HOST_S * hosts + START_PER_TRANSFER_S * transfers


class EmulationBackend:
    """``emulation_options`` go to :class:`Emulation` (datapath, runtime, ovs).
    ``after_verify(emu, report)`` runs once the fabric is verified, and
    ``before_down(emu)`` after the last workload, before teardown (``zcube up`` prints its
    report, sends RoCE probes and opens the Mininet CLI there)."""
    name = "emulation"

    def __init__(self, emulation_options: dict | None = None, after_verify=None,
                 before_down=None):
        self.emulation_options = emulation_options or {}
        self.hooks = (after_verify, before_down)

    def forwarding_ceiling(self, fabric, policy, options: SessionOptions) -> float:
        """What this machine's emulator forwards on ``fabric`` with every host sending at
        once, in Mb/s x switches crossed: the fabric brought up at ``options.link_mbps``
        (a rate above what the emulator forwards), calibrated without per-path runs, and
        torn down (``link_mbps: auto``)."""
        from testbed.emulation.calibrate import calibrate
        with self.session(fabric, policy, options) as sess:
            cal = calibrate(sess.emu, seconds=options.calibration_s, per_path=False)
        options.log(f"forwarding ceiling of {fabric.label} at {options.link_mbps:g} Mb/s per "
                    f"GPU: {cal['aggregate_mbps']:,.0f} Mb/s received, "
                    f"{cal['aggregate_switch_mbps']:,.0f} Mb/s x switches")
        return cal["aggregate_switch_mbps"]

    def session(self, fabric, policy, options: SessionOptions) -> "EmulationSession":
        return EmulationSession(fabric, policy, options, self.emulation_options, self.hooks)


class EmulationSession:
    def __init__(self, fabric, policy, options: SessionOptions, emulation_options: dict,
                 hooks=(None, None)):
        from testbed.emulation.emulation import Emulation
        self.options = options
        self.after_verify, self.before_down = hooks
        self.log = options.log
        self.emu = Emulation(fabric, policy=policy, link_mbps=options.link_mbps,
                             log=options.log, buffer_ms=options.buffer_ms,
                             large_segments=options.large_segments,
                             settings=options.emulation, **emulation_options)
        self.table = self.emu.table
        self.info: dict = {}
        self.calibration: dict | None = None
        self.isolated: dict = {}          # kinds of transfer -> their isolated transfers
        self.netlinks = self.probe_path = None    # kept for the session (netlink sockets in
                                                  # the hosts; the datapath probe's bridge)

    def __enter__(self) -> "EmulationSession":
        from testbed.emulation.emulation import EmulationError
        from testbed.emulation.packet_account import HostNetlinks
        from testbed.emulation.stall_monitor import ProbePath
        try:
            self.emu.__enter__()
        except EmulationError as err:
            raise RunError(str(err)) from None
        self.netlinks, self.probe_path = HostNetlinks(self.emu), ProbePath(self.emu)
        rep = self.emu.verify(sample=self.options.verify_sample or None)
        self.info["verify"] = {k: rep[k] for k in VERIFY_KEYS}
        self.log(f"verified: {rep['flows_installed']}/{rep['flows_expected']} flows on "
                 f"{rep['switches_connected']}/{rep['switches']} switches, "
                 f"{rep['pairs_ok']}/{rep['pairs_tested']} pairs answering, "
                 f"{rep['paths_ok']}/{rep['paths_traced']} paths traced"
                 + ("" if rep["ok"] else ": NOT as computed"))
        if self.after_verify:
            self.after_verify(self.emu, rep)
        if not rep["ok"]:
            self.emu.__exit__(None, None, None)
            raise RunError(f"{self.emu.fabric.label} does not forward as computed: "
                           + "; ".join(map(str, rep["problems"][:3])))
        return self

    def remeasure(self) -> None:
        """Wait for a quiet spell of the host (:data:`QUIET_S` seconds with the hypervisor
        under its noted share in every window, :data:`QUIET_MOST_S` at most), then forget the
        isolated transfers: the next run measures them again (a repetition run again
        because the host was busy may have had them measured busy too)."""
        from testbed.emulation.load_monitor import wait_quiet
        quiet, waited = wait_quiet(QUIET_S, QUIET_MOST_S)
        if waited > QUIET_S or not quiet:
            self.log(f"  the host {'quiet' if quiet else 'still busy'} after {waited:.0f} s")
        self.isolated.clear()

    def __exit__(self, *exc) -> bool:
        try:
            for kept in (self.netlinks, self.probe_path):
                if kept is not None:
                    kept.close()
            if self.before_down and exc[0] is None:
                self.before_down(self.emu)
        finally:
            self.emu.__exit__(*exc)
        return False

    def calibrate(self) -> dict:
        from testbed.emulation.calibrate import calibrate
        live.phase("calibration")
        self.calibration = calibrate(self.emu, seconds=self.options.calibration_s)
        live.phase("idle")
        self.info["calibration"] = self.calibration
        cal = self.calibration
        self.log("calibration: " + "; ".join(
            f"{p['pairing']} {p['mbps']:.1f}/{p['shaped_mbps']:.1f} Mb/s" for p in cal["paths"])
            + f"; all hosts at once {cal['aggregate_mbps']:.1f}/"
              f"{cal['aggregate_shaped_mbps']:.1f} Mb/s")
        return self.calibration

    def admit(self, workloads, force: bool) -> None:
        """Refuse a load this machine's emulator cannot run faithfully (iperf3 calibration)."""
        from testbed.emulation.calibrate import guard, offered_mbps
        cal = self.calibration or self.calibrate()
        offered = max(offered_mbps(w) for w in workloads)
        if self.options.background:
            offered += len(self.emu.fabric.hosts) * self.options.background["mbps"]
        self.info["offered_mbps"] = round(offered, 3)
        refusal = guard(cal, offered)
        if refusal and not force:
            raise RunError(f"refused on {self.emu.fabric.label}: {refusal}")
        if refusal:
            self.log(f"warning (--force): {refusal}")

    def run(self, work, faults=None) -> WorkloadResult:
        from testbed.core.fault_records import affected
        from testbed.emulation.faults import FaultRun
        from testbed.emulation.isolated import isolated_on_a_quiet_host, kinds_of
        from testbed.emulation.link_sampler import LinkSampler
        from testbed.emulation.load_monitor import DatapathMonitor
        from testbed.emulation.packet_account import PacketAccount
        from testbed.emulation.stall_monitor import DatapathProbe
        from testbed.emulation.transfers import open_connections, run_transfers
        transport = self.options.transport
        if transport == "pool":
            failed, moved = open_connections(self.emu, work, spares=bool(faults))
            if failed:
                self.log(f"warning: {len(failed)} connection(s) did not open: "
                         + "; ".join(f"{k}: {v}" for k, v in list(failed.items())[:3]))
            if moved:
                self.log(f"warning: {moved} connection(s) could not use their seeded source "
                         f"port (in use): their ECMP paths are not the seed's")
        kinds = kinds_of(self.emu.table, work)
        if kinds not in self.isolated and work.transfers:       # once per placement
            iso = self.isolated[kinds] = isolated_on_a_quiet_host(
                self.emu, work, transport, path=self.probe_path)
            self.log(f"isolated transfers: FCT/ideal p50 {iso['p50']}, p99 {iso['p99']}"
                     + (f" (measured {iso['tries']} times, the host busy; the hypervisor "
                        f"took up to {iso['steal_max']:.0%} of the CPUs in a window of the "
                        "one kept)" if iso["tries"] > 1 else ""))
        self.log(f"running {len(work.transfers)} KV transfers of {len(work.schedule)} requests "
                 f"({work.bytes_total:,} bytes) ...")
        monitor = DatapathMonitor(self.emu.vswitchd_pid())
        probe = DatapathProbe(self.emu, path=self.probe_path)
        account = PacketAccount(self.emu, self.netlinks)
        web, began = (live.server.cpu_s if live.server else None), time.time()
        failures_before = live.failure_events
        live.workload_started(len(work.transfers))
        with self._background(work), account:
            t0 = time.time() + start_delay(len(self.emu.fabric.hosts), len(work.transfers))
            with LinkSampler(self.emu, self.options.window_s, t0, live) as sampler, FaultRun(
                    self.emu, faults or [], t0, self.log) as injected, monitor, probe:
                rows = run_transfers(self.emu, work, t0=t0, transport=transport,
                                     progress=live.transfers_progress if live.server else None)
        live.workload_finished(rows)
        if sampler.error:
            self.log(f"warning: link sampler stopped: {sampler.error}")
        hit = affected(self.table, injected.records, rows) if faults else None
        loss = account.summary()
        if loss is not None:                   # a failed element drops packets for real,
            loss["judged"] = not faults and live.failure_events == failures_before
            # failed by hand (the live view, the CLI) during the workload, not scheduled
        measured = _measured(rows, t0, monitor, probe, isolated=self.isolated.get(kinds),
                             loss=loss)
        if web is not None and live.server:         # what the live view's server spent
            spent = live.server.cpu_s - web
            measured["web_cpu_s"] = round(spent, 6)       # a few ms: to the microsecond
            measured["web_cpu_share"] = round(spent / max(time.time() - began, 1e-3), 6)
        return WorkloadResult(rows, sampler.rows, sampler.summary(), hit, measured, round(t0, 6))

    def _background(self, work):
        """iperf3 background traffic for the workload's span, or nothing."""
        import contextlib
        bg = self.options.background
        if not bg:
            return contextlib.nullcontext()
        from testbed.emulation.background import Background
        span = max((t.ready_s for t in work.transfers), default=0.0) + 5
        try:
            flows = Background(self.emu, bg["pattern"], bg["mbps"], span)
        except ValueError as err:
            raise RunError(str(err)) from None
        self.log(f"background: {len(flows.flows)} iperf3 flows ({bg['pattern']}), "
                 f"{flows.offered_mbps:.1f} Mb/s offered in total")
        return _Recorded(flows, self.info, bg)


def _measured(rows, t0: float, monitor, probe, **more) -> dict:
    """What one repetition's monitor and datapath probe saw, for ``core.fidelity.record``."""
    from testbed.core.fidelity import STEAL_NOTED, THRESHOLDS, probe_figures, saturated
    from testbed.emulation.isolated import probing
    from testbed.emulation.load_monitor import mark_waits, mark_worst
    wakes = probe.wakes()
    delays, stalls = probe_figures(probe.records(), t0, probe.share, wakes)
    mark_worst(rows, monitor.steal_windows(t0), "steal")
    mark_worst(rows, stalls, "stall_ms")
    mark_waits(rows, wakes, t0)
    return dict(monitor.summary(), **more, probe=delays, stalled=saturated(rows, stalls),
                probing=probing(rows),
                saturated=saturated(rows, monitor.hot(t0, THRESHOLDS["datapath_p99"])),
                stolen=saturated(rows, monitor.stolen(t0, STEAL_NOTED)))


class _Recorded:
    """Runs the background flows and records what they sent in the session's info."""

    def __init__(self, flows, info: dict, spec: dict):
        self.flows, self.info, self.spec = flows, info, spec

    def __enter__(self):
        self.flows.__enter__()
        return self

    def __exit__(self, *exc):
        self.flows.__exit__(*exc)
        self.info["background"] = {
            "pattern": self.spec["pattern"], "flows": len(self.flows.flows),
            "offered_mbps": round(self.flows.offered_mbps, 3),
            "achieved_mbps": round(self.flows.achieved_mbps, 3)}
        return False
