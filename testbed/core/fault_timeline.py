"""A scenario's fault schedule made concrete for one route table (pure), shared by the
simulated backends: after each event, the elements down, their cables, and the table the
hosts route by once the control plane has reacted."""
from __future__ import annotations

import bisect
from collections import Counter

from controller.failures import Damage, Failures, dead_cables, disconnected_count
from testbed.core.fault_records import AT_THE_END, fault_record, schedule_events
from topologies.fabric import FabricError

# the control plane's delay, of the order of the emulation's (17-71 ms, bench_faults.py)
CONTROL_S = 0.05


class Timeline:
    """The schedule made concrete for one route table (pure): after event ``i``, the failed
    elements, their cables, and the table the hosts know from ``control[i]`` on (index 0:
    before any event)."""

    def __init__(self, table, faults: list):
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

    def steps(self) -> list[tuple]:
        """``(time, kind, event)`` in the order a backend runs them: kind 0, the event at its
        time; kind 1, the control step ``CONTROL_S`` after each event that changed a cable."""
        return sorted([(t, 0, i) for i, (t, *_) in enumerate(self.events)]
                      + [(t, 1, i) for i, t in enumerate(self.control)
                         if not self.errors[i] and not self.unchanged[i]])

    def finish(self, records: dict, state: int, end_s: float) -> list[dict]:
        """``records`` (event index -> record) in time order, with the restore at
        ``end_s`` of what is still down after event ``state``."""
        out = [records[i] for i in sorted(records)]
        if self.cables[state]:               # the run ended before their restore
            out.append(fault_record(end_s, "up", AT_THE_END, unchanged=False))
        return sorted(out, key=lambda r: r["t_s"])

    def epoch_at(self, t: float) -> int:
        """How many events the hosts know of at ``t``."""
        return bisect.bisect_right(self.control, t)

    def record(self, i: int, moved: int) -> dict:
        """Event ``i``'s record (:func:`testbed.core.fault_records.fault_record`), ``moved``
        connections moved off what died; its times are the schedule's (nothing in a
        simulation runs late) and the control plane's (``CONTROL_S``)."""
        t, _, action, elem = self.events[i]
        when = {"at_s": round(t, 6), "late_s": 0.0}
        if self.errors[i]:
            return fault_record(t, action, elem, error=self.errors[i], **when)
        quiet = self.unchanged[i]
        return fault_record(t, action, elem, since_injection_s=None if quiet else CONTROL_S,
                            reroute_s=None if quiet else CONTROL_S, reroutes=0 if quiet else 1,
                            disconnected_pairs=disconnected_count(
                                self.tables[i + 1].fabric, self.tables[i + 1].failed),
                            agents_told_s=None if quiet else CONTROL_S,
                            connections_moved=moved, unchanged=quiet, **when)
