"""The :class:`Emulation`: a Fabric brought up for real (OVS, the controller, Mininet, one
agent per host), proved to forward as computed, and taken down again, also after errors
and Ctrl-C.

    with Emulation(zcube(4), policy="zcube", link_mbps=100) as emu:
        report = emu.verify()
"""
from __future__ import annotations

import os
import re
import subprocess
import threading
from collections import Counter

from controller.failures import Failures
from controller.flows import compile_host_config, compile_switch_flows
from controller.routing import RouteTable
from testbed.core.live_state import current as live
from testbed.core.settings import EmulationSettings, retired_in
from testbed.emulation.agents import Agent, EmulationError
from testbed.emulation.controller_process import ControllerProcess
from testbed.emulation.machine_state import Lock, RunRecord, clean_run
from testbed.emulation.network import (
    bridge_name,
    build_network,
    configure_hosts,
    delete_links,
    root_links,
    switch_intf,
)
from testbed.emulation.ovs import Ovs, resolve_datapath
from testbed.emulation.phase_timer import Phases
from testbed.emulation.sockbuf import widen_datapath_buffer
from topologies.fabric import Fabric, save_fabric

BYTES_LINE = re.compile(r"RX bytes:(\d+).*TX bytes:(\d+)")


class Emulation(ControllerProcess):
    """One fabric brought up for real: the handles the rest of the emulation acts through."""
    def __init__(self, fabric: Fabric, policy: str | None = None, link_mbps: float = 100.0,
                 datapath: str = "auto", runtime: str | None = None, ovs: Ovs | None = None,
                 log=None, buffer_ms: float | None = None, large_segments: bool = False,
                 settings: EmulationSettings | None = None):
        if not link_mbps > 0:
            raise ValueError(f"link_mbps must be greater than 0, got {link_mbps}")
        self.fabric = fabric
        self.table = RouteTable(fabric, policy)
        self.base_table = self.table            # without failures (testbed.emulation.faults)
        self.failed = Failures()
        self.fault_lock = threading.RLock()     # one fault's injection at a time
        # how many faults hold each failed cable or switch down (restored when none does)
        self.holds: Counter = Counter()
        self.pairings_told: dict[str, list] = {}    # host -> the pairings its agent knows down
        self.link_mbps = float(link_mbps)
        self.buffer_ms = buffer_ms              # queue per shaped port (network.leaf_qdisc)
        self.large_segments = large_segments    # no network.GSO_MAX_SIZE cap
        self.settings = settings or EmulationSettings()     # congestion control, ECMP
        self.datapath_choice = datapath
        self.runtime = runtime
        self.ovs = ovs
        self._own_ovs = ovs is None
        self.log = log or (lambda msg: None)
        self.lock = Lock()
        self.record: RunRecord | None = None
        self.net = None
        self.controller: subprocess.Popen | None = None
        self.agents: dict[str, Agent] = {}
        self.of_port = self.rest_port = self.rest_token = None
        self.bringup_s = None
        self.phases = Phases()               # bring-up's seconds phase by phase (phase_timer.py)
        self.teardown = Phases()
        self._port_names = set(root_links(fabric))  # the switch ports' root-namespace ends
        self.switch_flows, self.pins = compile_switch_flows(self.table), []   # pin_requests.py
        self._owner = os.getpid()

    # -- lifecycle --------------------------------------------------------------------
    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def up(self) -> "Emulation":
        if os.geteuid() != 0:
            raise EmulationError("the emulation needs root (network namespaces, OVS)")
        if not self.lock.acquire():
            raise EmulationError(f"another emulation holds {self.lock.path}; wait for it or "
                                 f"run 'zcube clean' if it died")
        self.record = RunRecord()
        for line in retired_in():
            self.log(f"warning: {line}")
        live.entering(self)
        self.phases = phase = Phases()
        with phase("ovs"):
            if self.ovs is None:
                self.ovs = Ovs()
            self.ovs.ensure()
            self.ovs.export_env()
            self.record.write_json("ovs.json", self.ovs.env)
            self.datapath = resolve_datapath(self.datapath_choice)
        self.log(f"OVS {'started' if self.ovs.started else 'running'}, datapath {self.datapath}"
                 + (", userspace TSO on" if self.datapath == "user" and self.ovs.tso_enabled
                    else "") + self.ovs.allocator_note())
        with phase("controller"):                # it starts while the network is built
            fabric_file = self.record.path("fabric.json")
            save_fabric(self.fabric, fabric_file)
            self._launch_controller(fabric_file)
        self.log(f"building {len(self.fabric.switches)} switches, {len(self.fabric.hosts)} hosts, "
                 f"{len(self.fabric.links)} links")
        self.net = build_network(self.fabric, self.record, self.link_mbps, self.datapath,
                                 self.of_port, buffer_ms=self.buffer_ms, phase=phase,
                                 before_switches=self._await_controller)
        tso = self.datapath != "user" or self.ovs.tso_enabled
        with phase("hosts"):
            configure_hosts(self.net, self.fabric, compile_host_config(self.table), tso,
                            self.large_segments)
        with phase("flows"):
            self._wait_installed()
        with phase("agents"):
            for h in self.fabric.hosts:
                self.agents[h.name] = Agent(self.net.get(h.name), self.record,
                                            self.settings.agent_env())
            for a in self.agents.values():
                a.wait_ready()
        with phase("datapath"):
            self.log(widen_datapath_buffer(self))
        self.bringup_s = self.phases.total()
        self.log(f"up in {self.bringup_s:.1f} s ({self.phases.line()})")
        live.attach(self)
        return self

    def down(self) -> None:
        if os.getpid() != self._owner:
            return        # a forked copy of this process: the parent owns the teardown
        if self.record is not None:
            self.log("tearing down")
        self.teardown = phase = Phases()     # teardown's seconds phase by phase
        live.leaving(self)
        with phase("agents"):
            for a in self.agents.values():
                a.quit()
            for a in self.agents.values():
                a.wait()
        self.agents.clear()
        if self.net is not None:
            with phase("network"):
                try:
                    self.net.stop()
                except Exception as err:  # keep tearing down
                    self.log(f"mininet stop: {err}")
                delete_links(self.fabric)
            self.net = None
        if self.controller is not None:
            with phase("controller"):
                self.controller.terminate()
                try:
                    self.controller.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.controller.kill()
                    self.controller.wait()
            self.controller = None
        if self.record is not None:
            with phase("clean"):
                clean_run(self.record, self.ovs.env if self.ovs else None)
            self.record = None
        if self.ovs is not None and self._own_ovs:
            with phase("ovs"):
                self.ovs.stop()
        self.lock.release()
        live.phase("down")

    # -- acting in hosts (probes, calibration, background, faults use these) ----------
    def popen(self, host: str, argv: list, label: str, **kwargs) -> subprocess.Popen:
        """Start ``argv`` in ``host``'s namespace; its PID is recorded so that teardown and
        ``zcube clean`` end it."""
        proc = self.net.get(host).popen(argv, **kwargs)
        self.record.add_pid(proc.pid, f"{label} {host}")
        return proc

    def host_cmd(self, host: str, command: str) -> str:
        """Run a shell command in ``host``'s namespace; what it printed."""
        return self.net.get(host).cmd(command)

    def host_pid(self, host: str) -> int:
        """The pid of ``host``'s shell, whose namespaces are the host's."""
        return self.net.get(host).pid

    def agent(self, host: str) -> Agent:
        return self.agents[host]

    def each_agent(self):
        return list(self.agents.values())

    def tell_agents(self, cmds: dict[str, dict]) -> dict[str, dict]:
        """Send each host's agent its command, all before reading any answer (so they act
        at once), safe beside other threads' :meth:`Agent.call`; ``{host: answer}``."""
        agents = [self.agents[h] for h in sorted(cmds)]
        for a in agents:
            a.lock.acquire()
        try:
            for a in agents:
                a.post(cmds[a.name])
            return {a.name: a.reply() for a in agents}
        finally:
            for a in agents:
                a.lock.release()

    def use_failures(self, failed: Failures) -> RouteTable:
        """Route by the table around ``failed`` from now on, as the controller; the old table."""
        old = self.table
        self.table = self.base_table.with_failures(failed) if failed else self.base_table
        self.switch_flows = compile_switch_flows(self.table)
        self.failed = failed
        return old

    # -- reading the switches ---------------------------------------------------------
    def port_counters(self, unit: str = "packets") -> dict[str, tuple[int, int]]:
        """``{interface: (rx, tx)}`` in packets or bytes for every datapath port, one call."""
        out = self.ovs.appctl("dpctl/show", "-s")
        counters, name, rx = {}, None, 0
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("port "):
                name = line.split(": ", 1)[1].split(" ")[0]
            elif not name:
                continue
            elif unit == "packets" and line.startswith("RX packets:"):
                rx = int(line.split()[1].split(":")[1])
            elif unit == "packets" and line.startswith("TX packets:"):
                counters[name] = (rx, int(line.split()[1].split(":")[1]))
            elif unit == "bytes" and line.startswith("RX bytes:"):
                m = BYTES_LINE.match(line)      # "RX bytes:6710880 (6.4 MiB)  TX bytes:..."
                if m:
                    counters[name] = (int(m.group(1)), int(m.group(2)))
        return counters

    def kernel_counters(self, unit: str = "packets") -> dict[str, tuple[int, int]]:
        """``{interface: (rx, tx)}`` in packets or bytes for the switches' ports from one
        read of ``/proc/net/dev``: what :meth:`port_counters` gives (the datapath takes a
        port's counters from the kernel), without the ``ovs-appctl`` process (10 ms) each
        read of those costs or the forwarding thread's time to answer it."""
        rx_i, tx_i = (0, 8) if unit == "bytes" else (1, 9)
        out = {}
        with open("/proc/net/dev") as f:
            for line in f.readlines()[2:]:
                name, _, rest = line.partition(":")
                name = name.strip()
                if name in self._port_names:
                    fields = rest.split()
                    out[name] = (int(fields[rx_i]), int(fields[tx_i]))
        return out

    def installed_flows(self, switch: str) -> tuple[list[str], list[str]]:
        from controller.flows import parse_ofctl_flow, parse_ofctl_group
        br = bridge_name(switch)
        flows = [f for f in map(parse_ofctl_flow,
                                self.ovs.ofctl("--no-stats", "dump-flows", br).splitlines()) if f]
        groups = [g for g in map(parse_ofctl_group,
                                 self.ovs.ofctl("dump-groups", br).splitlines()) if g]
        return sorted(flows), sorted(groups)

    def hop_counter(self, counters: dict, u: str, v: str) -> int:
        """Packets counted on directed hop u->v (switch TX toward v, or switch RX from host u)."""
        fab = self.fabric
        if fab.is_switch(u):
            return sum(counters.get(switch_intf(u, p), (0, 0))[1]
                       for p, _ in fab.ports_between(u, v))
        return sum(counters.get(switch_intf(v, p), (0, 0))[0] for p, _ in fab.ports_between(v, u))

    def verify(self, sample: int | None = None, seed: int = 0, progress=None) -> dict:
        from testbed.emulation.verify import verify_emulation
        return verify_emulation(self, sample=sample, seed=seed, progress=progress)

    def vswitchd_pid(self) -> int | None:
        """The PID of the ovs-vswitchd forwarding this fabric's packets."""
        from testbed.emulation.ovs import vswitchd_pid
        pid = vswitchd_pid(self.ovs.rundir) if self.ovs else None
        if pid is None:                      # a system OVS: find it (read only)
            import psutil
            pid = next((p.pid for p in psutil.process_iter(["name"])
                        if p.info["name"] == "ovs-vswitchd"), None)
        return pid

    def mininet(self):
        """The Mininet network object, for Mininet's own CLI."""
        return self.net

    # -- failures (testbed.emulation.faults) ----------------------------------------------------
    def fail(self, *items: str, timeout_s: float = 15.0) -> dict:
        """Take fabric elements down (``"a0-b1"``, ``"g3:1"``, ``"a2"``) and wait until the
        controller has rerouted around them; returns the reroute's figures."""
        from testbed.emulation.faults import fail
        return _shown(fail(self, items, timeout_s))

    def restore(self, *items: str, timeout_s: float = 15.0) -> dict:
        """Bring failed elements back (all of them when none is named)."""
        from testbed.emulation.faults import restore
        return _shown(restore(self, items or None, timeout_s))


def _shown(out: dict) -> dict:
    live.failures_now(out["elements"])        # the live view draws what is down now
    return out
