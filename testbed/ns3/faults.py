"""A scenario's fault schedule on ns-3: cables cut at their times and, after the control
plane's delay, routes recomputed and transfers moved off dead paths, as the emulation's
controller and agents do."""
from __future__ import annotations

from controller.flows import path_addresses
from testbed.core.fault_timeline import CONTROL_S
from testbed.core.fault_timeline import Timeline as _Timeline

__all__ = ["CONTROL_S", "Faults", "Timeline"]


class Timeline(_Timeline):
    """The core timeline with, per table, the ns-3 routes (``plan_fn``'s) the hosts and
    switches follow."""

    def __init__(self, table, faults: list, plan_fn):
        super().__init__(table, faults)
        alias: dict = {}
        self.plans = [plan_fn(t, alias) for t in self.tables]

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


class Faults:
    """The schedule as applied to one simulated network (``net``: a
    :class:`testbed.ns3.simulate._Network` built from the timeline's addresses).

    A fault holds its element's cables down (a switch: all of them) and a cable is down while
    any fault holds it; a cut cable drops every packet at both ends.  ``CONTROL_S`` after an
    event that changed a cable, the routes become the table's around the failures and the
    hosts learn which paths died.  A transfer starting later avoids a dead pairing; a piece
    in flight on a dead path goes on from the byte its receiver has, over another path of
    its pairing, else over another pairing."""

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
        self.todo = timeline.steps()
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
                self.records[i] = tl.record(i, self.net.sender.move(tl, i + 1, now))

    def finish(self, end_s: float) -> list[dict]:
        """The records in time order, with the end's restore of what is still down."""
        return self.tl.finish(self.records, self.state, end_s)
