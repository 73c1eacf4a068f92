"""A scenario's fault schedule on ns-3: cables cut at their times, routes and transfers moved
after the control plane's delay (the schedule's own part is pure; the simulator's is in
:class:`Faults`' methods, called by :mod:`testbed.ns3.simulate` between its steps).

* **Down and up.**  Events run in time order, each at its time.  Like the emulation, a
  fault holds its element's cables down (a switch: all of its cables), and a cable is down
  while any fault holds it: a fault on what is already down changes nothing (``unchanged``)
  and its restore brings back only what no other fault still holds.  An element that does
  not exist is recorded with its ``error`` (and so is its restore); nothing later waits.
  A cut cable drops every packet at both ends (a receive error model of rate 1): senders
  keep sending into it, as into a fibre cut no one has reported yet.
* **The control plane** acts ``CONTROL_S`` after each event that changed a cable: the
  controller's routes become those of the route table with the failures (the addresses'
  routes that acknowledgements and one-switch paths use change; every path's alias keeps
  its route, :mod:`testbed.ns3.routes`), and the hosts learn which paths died, as the
  emulation's agents are told.  ``CONTROL_S`` is of the order of what the emulation's
  controller took on the development VM (``bench_faults.py``: 17-71 ms to reroute, agents
  told in 11-54 ms).
* **Transfers.**  One that starts later uses the table the hosts know at its start (those
  whose pairing is down use another from their first byte: ``avoided``).  A piece in
  flight on a path that died continues on a new connection from the byte its receiver
  has: over another path of the same pairing (as a Clos's select group drops the dead
  bucket; the row records the wait, ``gap_s``), else over another pairing (a move, as the
  agents move a transfer: ``moves``, ``attempts`` 2).  The abandoned connection is left
  alone (ns-3 has no abort): if its path comes back it may still send what it had left,
  which the receiver no longer counts.  A transfer whose pair has no path left (a GPU with
  its only NIC port down) stays on, or starts on, its own paths, TCP retrying, as the
  emulation's agents post it, and goes on when they come back.
"""
from __future__ import annotations

import bisect
from collections import Counter

from controller.failures import Damage, Failures, dead_cables
from controller.flows import path_addresses
from testbed.core.faultrows import AT_THE_END, fault_record, schedule_events
from topologies.fabric import FabricError

CONTROL_S = 0.05


class Timeline:
    """The schedule made concrete for one route table (pure): after event ``i``, the failed
    elements, their cables, and the table and routes the hosts know from
    ``control[i]`` on (index 0: before any event)."""

    def __init__(self, table, faults: list, plan_fn):
        fab = table.fabric
        self.events = schedule_events(faults)
        held: Counter = Counter()
        self.cables, self.errors, self.unchanged = [frozenset()], [], []
        failed = [Failures()]
        for _, _, action, elem in self.events:
            err = None
            if action == "down":
                try:
                    Failures.parse(fab, [elem])
                    held[elem] += 1
                except FabricError as e:
                    err = f"FabricError: {e}"
            elif held[elem] > 0:
                held[elem] -= 1
            else:
                err = f"{elem} was not taken down"
            now = Failures.parse(fab, [e for e, k in held.items() if k > 0])
            cables = frozenset(dead_cables(fab, now))
            self.errors.append(err)
            self.unchanged.append(cables == self.cables[-1])
            self.cables.append(cables)
            failed.append(now)
        self.control = [t + CONTROL_S for t, *_ in self.events]
        self.tables = [table] + [table.with_failures(f) for f in failed[1:]]
        self.damage = [None] + [Damage(fab, f) if f else None for f in failed[1:]]
        alias: dict = {}
        self.plans = [plan_fn(t, alias) for t in self.tables]

    def epoch_at(self, t: float) -> int:
        """How many events the hosts know of at ``t``."""
        return bisect.bisect_right(self.control, t)

    def addresses(self) -> dict:
        """``(host, port) -> [address, ...]``: every plan's, once each."""
        out: dict = {}
        for p in self.plans:
            for k, addrs in p.addresses.items():
                have = out.setdefault(k, [])
                have += [a for a in addrs if a not in have]
        return out

    def candidates(self, epoch: int, src: str, dst: str, pairing: tuple) -> list:
        """``(path, local, remote)`` a piece of ``pairing`` from ``src`` to ``dst`` can take in
        ``epoch``: its own pairing's live paths, else every live pairing's."""
        plan, table = self.plans[epoch], self.tables[epoch]
        if plan.paths.get(pairing):
            return plan.paths[pairing]
        pairs = sorted({path_addresses(table.fabric, p)[:2] for p in table.paths(src, dst)})
        return [c for pr in pairs for c in plan.paths.get(pr, [])]

    def record(self, i: int, moved: int) -> dict:
        """Event ``i``'s record (:func:`testbed.core.faultrows.fault_record`), ``moved``
        connections moved off what died; its times are the schedule's (nothing in a
        simulation runs late) and the control plane's (``CONTROL_S``)."""
        t, _, action, elem = self.events[i]
        when = {"at_s": round(t, 6), "late_s": 0.0}
        if self.errors[i]:
            return fault_record(t, action, elem, error=self.errors[i], **when)
        quiet = self.unchanged[i]
        return fault_record(t, action, elem, since_injection_s=None if quiet else CONTROL_S,
                            reroute_s=None if quiet else CONTROL_S, reroutes=0 if quiet else 1,
                            disconnected_pairs=len(self.tables[i + 1].disconnected()),
                            agents_told_s=None if quiet else CONTROL_S,
                            connections_moved=moved, unchanged=quiet, **when)


class Faults:
    """The schedule carried out on one simulated network (``net``: a
    :class:`testbed.ns3.simulate._Network` built from the timeline's addresses)."""

    def __init__(self, net, timeline: Timeline):
        ns, self.net, self.tl = net.ns, net, timeline
        self.models: dict = {}
        for cable in frozenset().union(*timeline.cables):
            self.models[cable] = []
            for dev in net.cable_dev[cable]:
                em = ns.CreateObject[ns.RateErrorModel]()
                em.SetAttribute("ErrorRate", ns.DoubleValue(1.0))
                em.SetAttribute("ErrorUnit", ns.StringValue("ERROR_UNIT_PACKET"))
                em.Disable()
                dev.SetAttribute("ReceiveErrorModel", ns.PointerValue(em))
                self.models[cable].append(em)
        self.todo = sorted([(t, 0, i) for i, (t, *_) in enumerate(timeline.events)]
                           + [(t, 1, i) for i, t in enumerate(timeline.control)
                              if not timeline.errors[i] and not timeline.unchanged[i]])
        self.records: dict = {}
        self.state = 0                       # the cables down: timeline.cables[state]

    def next_s(self) -> float | None:
        """When the next event or control step is due."""
        return self.todo[0][0] if self.todo else None

    def run_due(self, now: float) -> None:
        """Every event and control step due by ``now``."""
        while self.todo and self.todo[0][0] <= now + 1e-9:
            _, kind, i = self.todo.pop(0)
            tl = self.tl
            if kind == 0:
                for cable in tl.cables[i] ^ tl.cables[i + 1]:
                    for em in self.models[cable]:
                        (em.Enable if cable in tl.cables[i + 1] else em.Disable)()
                self.state = i + 1
                if tl.errors[i] or tl.unchanged[i]:
                    self.records[i] = tl.record(i, 0)
            else:
                self.net.reroute(tl.plans[i + 1])
                self.records[i] = tl.record(i, self.net.carrier.move(tl, i + 1, now))

    def finish(self, end_s: float) -> list[dict]:
        """The records in time order, with the end's restore of what is still down."""
        out = [self.records[i] for i in sorted(self.records)]
        if self.tl.cables[self.state]:       # the run ended before their restore
            out.append(fault_record(end_s, "up", AT_THE_END, unchanged=False))
        return sorted(out, key=lambda r: r["t_s"])
