"""The controller's failure handling, pure: port and switch events are recorded, then one
recomputation around everything down gives, per switch, the mods from the flows it holds to
the new ones."""
from __future__ import annotations

import time

from controller.failures import Failures, switch_ports
from controller.flowdiff import SwitchDiff, diff_switch_flows
from controller.flows import HostConfig, compile_host_config, compile_switch_flows
from controller.pins import Pin, pin_flows
from controller.routing import RouteTable
from topologies.fabric import Fabric

# OpenFlow 1.3 values (ofp_port_reason, ofp_port_state, ofp_port_config); a unit test checks
# them against the framework's, so this module needs no OpenFlow library.
OFPPR_ADD, OFPPR_DELETE, OFPPR_MODIFY = 0, 1, 2
OFPPS_LINK_DOWN, OFPPS_BLOCKED, OFPPS_LIVE = 1, 2, 4
OFPPC_PORT_DOWN = 1

MAX_LISTED = 20


def port_is_down(reason: int, state: int, config: int) -> bool:
    """Whether a port-status (or port description) says the port is down: deleted,
    no link, blocked, or administratively down.  Anything else (normally LIVE) is up."""
    return (reason == OFPPR_DELETE or bool(state & (OFPPS_LINK_DOWN | OFPPS_BLOCKED))
            or bool(config & OFPPC_PORT_DOWN))


class Rerouter:
    def __init__(self, fabric: Fabric, policy=None, clock=time.time):
        self.fabric = fabric
        self.clock = clock
        self.base = RouteTable(fabric, policy)
        self.table = self.base
        self.flows = compile_switch_flows(self.base)
        self.ports = switch_ports(fabric)            # (dpid, port) -> (switch, cable)
        self.names = {sw.dpid: sw.name for sw in fabric.switches}
        self.down_ports: set[tuple[int, int]] = set()
        self.down_switches: set[str] = set()
        self.reroutes = 0
        self.last: dict | None = None                # the latest reroute, for the status
        self._events: list[float] = []               # times of changes not yet rerouted
        self._cut: tuple = (None, [])              # (table, its disconnected pairs)
        self.pins: list[Pin] = []                    # connections pinned to paths
        self.pinned: dict = {}                       # switch -> its PinFlows now
        self.pins_generation = 0                     # how many times pins were set

    @property
    def policy_name(self) -> str:
        return self.base.policy_name

    # -- events: record only ----------------------------------------------------------
    def element(self, dpid: int, port_no: int):
        """``(switch name, cable)`` a port of a switch is, or None (not a fabric port)."""
        return self.ports.get((dpid, port_no))

    def port_status(self, dpid: int, port_no: int, down: bool) -> bool:
        """Record a port's state; True when that changes what is down."""
        key = (dpid, port_no)
        if key not in self.ports or (key in self.down_ports) == down:
            return False
        (self.down_ports.add if down else self.down_ports.discard)(key)
        self._events.append(self.clock())
        return True

    def ports_seen(self, dpid: int, down_by_port: dict) -> bool:
        """Record a switch's port descriptions (``port -> down``); True on any change."""
        changed = False
        for port_no, down in down_by_port.items():
            changed |= self.port_status(dpid, port_no, down)
        return changed

    def switch_gone(self, dpid: int) -> bool:
        """A switch stopped talking to the controller: route around it until it is back."""
        return self._switch(dpid, True)

    def switch_back(self, dpid: int) -> bool:
        return self._switch(dpid, False)

    def _switch(self, dpid: int, down: bool) -> bool:
        name = self.names.get(dpid)
        if name is None or (name in self.down_switches) == down:
            return False
        (self.down_switches.add if down else self.down_switches.discard)(name)
        self._events.append(self.clock())
        return True

    def failures(self) -> Failures:
        """Everything reported down now (not necessarily rerouted yet)."""
        return Failures({self.ports[k][1] for k in self.down_ports}, self.down_switches)

    # -- recomputation ----------------------------------------------------------------
    def reroute(self) -> dict[str, SwitchDiff]:
        """Recompute the table around :meth:`failures` and return the mods, per switch, from
        the flows held now to the new ones (empty when nothing changed since last time)."""
        events, self._events = self._events, []
        failed = self.failures()
        if failed == self.table.failed:
            return {}
        t0 = self.clock()
        table = self.base.with_failures(failed) if failed else self.base
        flows = compile_switch_flows(table)
        diffs = diff_switch_flows(self.flows, flows)
        repinned = self._repin(table, flows)
        t1 = self.clock()
        self.table, self.flows = table, flows
        self.reroutes += 1
        self.last = {"number": self.reroutes, "events": len(events),
                     "first_event": min(events) if events else t0, "computed": t1,
                     "compute_s": t1 - t0, "switches": sorted(diffs),
                     "flow_mods": sum(d.flow_mods for d in diffs.values()),
                     "group_mods": sum(d.group_mods for d in diffs.values()),
                     "installed": None, "reroute_s": None, "repinned": sorted(repinned)}
        return diffs

    def set_pins(self, pins: list[Pin]) -> set[str]:
        """Pin these connections (replacing any pinned before) under the current table; the
        switches whose pinned flows change."""
        self.pins = list(pins)
        self.pins_generation += 1
        return self._repin(self.table, self.flows)

    def _repin(self, table, flows) -> set[str]:
        pinned = pin_flows(table, flows, self.pins)
        changed = {sw for sw in set(pinned) | set(self.pinned)
                   if pinned.get(sw) != self.pinned.get(sw)}
        self.pinned = pinned
        return changed

    def installed(self, number: int, at: float | None = None) -> None:
        """Every switch confirmed (barrier) the mods of reroute ``number``."""
        if self.last is not None and self.last["number"] == number:
            at = self.clock() if at is None else at
            self.last["installed"] = at
            self.last["reroute_s"] = at - self.last["first_event"]

    def disconnected(self) -> list[tuple[str, str]]:
        """Host pairs the current failures cut off from each other."""
        table = self.table                 # the REST thread may ask while a reroute runs
        if self._cut[0] is not table:
            self._cut = (table, table.disconnected())
        return self._cut[1]

    def host_config(self, host: str) -> HostConfig:
        """Routes and neighbours ``host`` needs under the current table."""
        self.fabric.host(host)                   # raises FabricError for an unknown host
        return compile_host_config(self.table, hosts=[host])[host]

    def status(self) -> dict:
        cut = self.disconnected()
        return {"policy": self.policy_name,
                "failures": self.table.failed.describe(self.fabric),
                "pending_events": len(self._events),
                "reroutes": self.reroutes,
                "last_reroute": self.last,
                "disconnected": len(cut),
                "pins": len(self.pins), "pinned_flows": sum(map(len, self.pinned.values())),
                "disconnected_pairs": [list(p) for p in cut[:MAX_LISTED]]}
