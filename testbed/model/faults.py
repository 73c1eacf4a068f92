"""A scenario's fault schedule on the flow-level model: at a fault the dead cables' hops lose
their capacity (the sub-flows crossing them stall); ``CONTROL_S`` later, as the emulation's
controller and agents react, every unfinished sub-flow is pinned to its path in the table
around the failures (moved off a dead pairing onto another, from the byte it reached); a
restore gives the capacity back and, after the same delay, the table without the fault."""
from __future__ import annotations

from testbed.core.fault_timeline import Timeline
from testbed.model.capacity import directed_capacity, goodput_bps
from testbed.model.flows import Routes, crossed, repinned


class ModelFaults:
    """The schedule as applied to one simulation: what the event loop asks for (when the
    next step is due, what it changes) and the records it leaves."""

    def __init__(self, table, faults: list, res, efficiency: float, link_mbps: float,
                 transfers, subs):
        self.tl = Timeline(table, faults)
        self.res, self.transfers, self.subs = res, transfers, subs
        self.fabric, self.link_mbps, self.efficiency = table.fabric, link_mbps, efficiency
        self.todo = self.tl.steps()
        self.records: dict = {}
        self.state = 0                              # the cables down: tl.cables[state]
        self.moved_at: dict = {}                    # transfer -> when a sub-flow was moved

    def next_s(self) -> float:
        return self.todo[0][0] if self.todo else float("inf")

    def run_due(self, now: float, loop) -> list:
        """Every fault, restore and control step due by ``now`` on ``loop``; the resources
        whose flows must be shared out again."""
        seeds: list = []
        tl = self.tl
        while self.todo and self.todo[0][0] <= now + 1e-9:
            _, kind, i = self.todo.pop(0)
            if kind == 0:
                seeds += self._cables(tl.cables[i] ^ tl.cables[i + 1], tl.cables[i + 1], loop)
                self.state = i + 1
                if tl.errors[i] or tl.unchanged[i]:
                    self.records[i] = tl.record(i, 0)
            else:
                moved = self._repin(Routes(tl.tables[i + 1], self.res.hop_index), now, loop,
                                    seeds)
                self.records[i] = tl.record(i, moved)
        return seeds

    def _cables(self, changed, dead, loop) -> list:
        """Each hop of the ``changed`` cables gets the capacity of its cables not in
        ``dead``; those hops."""
        capacity = directed_capacity(self.fabric, self.link_mbps, dead)
        index = self.res.hop_index
        hops = {index[hop] for c in changed for hop in ((c.a, c.b), (c.b, c.a))}
        for h in hops:
            loop.cap_bps[h] = goodput_bps(capacity[self.res.hops[h]], self.efficiency)
        return list(hops)

    def _repin(self, route: Routes, now: float, loop, seeds: list) -> int:
        """Pin every unfinished sub-flow to its path under ``route``; how many moved onto
        another pairing (a switch's rehash onto another path of the same pairing is not a
        move)."""
        subs, dp = self.subs, self.res.dp
        moved = 0
        for f in range(len(subs)):
            if loop.rem[f] <= 0 and loop.begun[f]:
                continue
            t = self.transfers[subs.transfer[f]]
            got = repinned(route, t.src, t.dst, subs.addrs[f], subs.key[f])
            if got is None:
                continue                             # cut off: it stays where it stalled
            addrs, path = got
            new = crossed(path, dp)
            if new == loop.links[f]:
                continue
            if addrs != subs.addrs[f]:
                moved += 1
                subs.addrs[f] = addrs
                if loop.begun[f]:
                    self.moved_at.setdefault(subs.transfer[f], now)
            loop.repin(f, new, now, seeds)
        return moved

    def finish(self, end_s: float) -> list[dict]:
        """The records in time order, with the end's restore of what is still down."""
        return self.tl.finish(self.records, self.state, end_s)
