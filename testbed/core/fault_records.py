"""A run's fault records (pure): one per event of the fault schedule, declared and made once
for every backend that injects faults, and what each fault did to the transfers through it
(:func:`affected`)."""
from __future__ import annotations

from dataclasses import dataclass, fields

from controller.failures import CutPairs, Damage, Failures
from testbed.core.metrics import percentile

# a transfer stalled by a fault if its longest wait between blocks began no later than this
# after it: the last block before the fault may arrive that much after it at 64 KB blocks
STALL_SLACK_S = 0.05

# the element of the restore, at the run's end, of whatever is still down
AT_THE_END = "(all, at the end)"


@dataclass
class FaultRecord:
    """One event of a run's fault schedule as run (summary.json's ``faults``, before
    :func:`affected`'s figures).  Times are seconds; a field that does not apply is None."""
    t_s: float                              # when it ran, from workload time 0
    action: str                             # "down" (a fault) or "up" (its restore)
    element: str                            # what, as controller.failures names it
    since_injection_s: float | None = None  # from the first port changed to the reroute confirmed
    reroute_s: float | None = None          # the controller's last reroute, from its first event
    reroutes: int | None = None             # reroutes the controller made for it
    disconnected_pairs: int | None = None   # GPU pairs left with no path after it
    agents_told_s: float | None = None      # from its injection to every agent told
    connections_moved: int | None = None    # connections moved off a pairing that went down
    unchanged: bool | None = None           # its cables were already down, or stay down
    at_s: float | None = None               # when the schedule had it (None: the end's restore)
    late_s: float | None = None             # how late it ran after at_s
    error: str | None = None                # why it could not be run

    def row(self) -> dict:
        """The record as summary.json holds it: every field in :data:`FAULT_FIELDS` order,
        but ``error`` only on an event that could not be run (readers tell those
        by the key)."""
        out = dict(vars(self))
        if out["error"] is None:
            del out["error"]
        return out


FAULT_FIELDS = tuple(f.name for f in fields(FaultRecord))


def _r4(x):
    return None if x is None else round(x, 4)


def fault_record(t_s: float, action: str, element: str, *, since_injection_s=None,
                 reroute_s=None, agents_told_s=None, late_s=None, **more) -> dict:
    """The one way a backend records an event of its fault schedule: the times it measured
    to the 0.1 ms, the rest (:class:`FaultRecord`'s other fields) as they are."""
    return FaultRecord(t_s=round(t_s, 4), action=action, element=element,
                       since_injection_s=_r4(since_injection_s), reroute_s=_r4(reroute_s),
                       agents_told_s=_r4(agents_told_s), late_s=_r4(late_s), **more).row()


def schedule_events(faults: list) -> list[tuple]:
    """A fault schedule's events in the order they run: ``(time, 0, "down", element)`` per
    fault and ``(time, 1, "up", element)`` per restore (a fault without a duration stays
    down), by time, a fault before a restore at the same time."""
    return sorted([(f["at_s"], 0, "down", f["element"]) for f in faults]
                  + [(f["at_s"] + f["duration_s"], 1, "up", f["element"]) for f in faults
                     if f.get("duration_s") is not None])


def affected(table, records: list[dict], rows: list[dict]) -> list[dict]:
    """Every event of the schedule, in order: a restore as it ran, an event that could not
    be run with its ``error`` and nothing counted, and per fault that went down,
    over the transfers whose pair had a path through it:

    - in flight when it went down (``transfers_affected``): how many arrived verified, were
      started again over another pairing (``retried``; ``moved_at_once`` of them because
      their pairing was reported down, not because TCP gave up), were lost although their
      endpoints stayed connected (must be 0) or failed because the fault cut them off, and
      the time from the fault to the first byte of the attempt that succeeded; those never
      started over but stalled by it (``transfers_stalled``: their longest wait between two
      blocks spans it, as a Clos's flow waits for its ECMP group to drop the dead bucket);
      and ``resumed_after_ms``, from the fault to when each of both kinds got going again;
    - started while it was down (until its restore, or the run's end): how many, how many
      used another pairing than their own from their first byte (``avoided``), were started
      again, lost or cut off;
    - the FCT (p50, p99, ms) of every transfer started while it was down against every
      transfer that ended before it went down."""
    out = []
    for rec in records:
        if "error" in rec:                 # kept, with nothing counted against it
            out.append({**rec, "transfers_affected": None, "transfers_verified": None,
                        "transfers_retried": None, "transfers_lost": 0,
                        "transfers_cut_off": 0, "first_byte_after_ms": None})
        elif rec.get("action") != "down":  # a restore: when it ran, nothing to count
            out.append(dict(rec))
        else:
            back = min((r["t_s"] for r in records if r.get("action") == "up"
                        and r["element"] in (rec["element"], AT_THE_END)
                        and "error" not in r and r["t_s"] >= rec["t_s"]),
                       default=float("inf"))
            out.append({**rec, **_accounting(table, rec, back, rows)})
    return out


def _accounting(table, rec: dict, back: float, rows: list[dict]) -> dict:
    """:func:`affected`'s figures of one fault, down from ``rec["t_s"]`` to ``back``."""
    failed = Failures.parse(table.fabric, [rec["element"]])
    dmg = Damage(table.fabric, failed)
    cut = CutPairs(table.fabric, failed)
    t = rec["t_s"]

    def through(r):
        return any(not dmg.path_ok(p) for p in table.paths(r["src"], r["dst"]))

    def lost(group):
        return sum(1 for r in group if not r["verified"] and (r["src"], r["dst"]) not in cut)

    def cut_off(group):
        return sum(1 for r in group if not r["verified"] and (r["src"], r["dst"]) in cut)

    hit = [r for r in rows if r["start_s"] is not None and r["start_s"] <= t
           and (r["end_s"] is None or r["end_s"] > t) and through(r)]
    during = [r for r in rows if r["start_s"] is not None and t < r["start_s"] < back]
    mine = [r for r in during if through(r)]
    retried = [r for r in hit if (r.get("attempts") or 1) > 1]
    waits = sorted(r["retry_first_byte_s"] - t for r in retried
                   if r["verified"] and r.get("retry_first_byte_s") is not None)
    # in flight and never started over, but stalled when it struck: the longest wait
    # between two of its blocks began by then (a block's time after it) and ended after
    stalled = [r["gap_end_s"] - t for r in hit if r["verified"]
               and (r.get("attempts") or 1) == 1 and r.get("gap_end_s") is not None
               and r["gap_end_s"] > t
               and r["gap_end_s"] - r["gap_s"] <= t + STALL_SLACK_S]
    before = [r["fct_ms"] for r in rows if r["fct_ms"] is not None
              and r["end_s"] is not None and r["end_s"] <= t]
    return {"transfers_affected": len(hit),
            "transfers_verified": sum(1 for r in hit if r["verified"]),
            "transfers_retried": len(retried),
            "transfers_moved_at_once": sum(1 for r in hit if r.get("moves")),
            "transfers_lost": lost(hit), "transfers_cut_off": cut_off(hit),
            "first_byte_after_ms": _ms(waits),
            "transfers_stalled": len(stalled),
            "resumed_after_ms": _ms(sorted(waits + stalled)),
            "started_during": {
                "transfers": len(mine),
                "avoided": sum(1 for r in mine if r.get("avoided")),
                "retried": sum(1 for r in mine if (r.get("attempts") or 1) > 1),
                "lost": lost(mine), "cut_off": cut_off(mine)},
            "fct_ms_before": _pcts(before),
            "fct_ms_during": _pcts([r["fct_ms"] for r in during
                                    if r["fct_ms"] is not None])}


def _ms(waits: list) -> dict | None:
    """p50 and max of sorted waits in seconds, in ms."""
    if not waits:
        return None
    return {"p50": round(1000 * percentile(waits, 50), 3), "max": round(1000 * waits[-1], 3)}


def _pcts(values: list) -> dict | None:
    if not values:
        return None
    return {"n": len(values), "p50": round(percentile(values, 50), 3),
            "p99": round(percentile(values, 99), 3)}
