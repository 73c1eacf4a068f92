"""Carrying one repetition in a session, in the undilated system's units, and the order in
which a scenario's fabrics carry their repetitions.

``order: fabric`` carries each fabric's repetitions in one session, one fabric after the
other.  On the emulation the datapath's pace wanders over minutes within a bring-up
(docs/demo-fidelity.md, "The pace wanders over minutes"), and a comparison whose fabrics ran
minutes apart carries that wander into its ratios.  ``order: mirrored`` splits every
fabric's repetitions into halves carried in mirrored order, A1 B1 ... B2 A2, the last
fabric's both halves in one session (its sweep between them), so that a drift over the run
falls on every fabric alike; it costs one more bring-up for each fabric but the last.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from testbed.core import fidelity
from testbed.core.backend import Carried
from traffic.workload import dilate


class Part(NamedTuple):
    """One session of one fabric: ``sc.fabrics[fabric]`` carries the seeds with indices
    ``start`` to ``stop`` (not included), runs the sweep just before index ``sweep_at`` (or at
    the end when it equals ``stop``; None: not in this session), and ``last`` says the fabric
    is done after it."""
    fabric: int
    start: int
    stop: int
    sweep_at: Optional[int]
    last: bool


def plan(fabrics: int, seeds: int, order: str = "fabric",
         counts: Optional[list[int]] = None) -> list[Part]:
    """The sessions a run opens, in order (:class:`Part`); ``counts``: how many of the
    seeds each fabric carries, its first ones (default: all); mirrored, each fabric's own
    in halves (one with a single seed carries it whole, in the first half)."""
    counts = counts or [seeds] * fabrics
    if order == "fabric" or fabrics < 2 or seeds < 2:
        return [Part(i, 0, c, c, True) for i, c in enumerate(counts)]
    last, half = fabrics - 1, [(c + 1) // 2 for c in counts]
    return ([Part(i, 0, c, c, True) if c < 2 else Part(i, 0, half[i], None, False)
             for i, c in enumerate(counts[:last])]
            + [Part(last, 0, counts[last], half[last], True)]
            + [Part(i, half[i], counts[i], counts[i], True) for i in reversed(range(last))
               if counts[i] >= 2])


ROW_TIMES = ("ready_s", "start_s", "first_byte_s", "end_s", "retry_first_byte_s", "gap_s",
             "gap_end_s", "received_s")
ROW_SPANS_MS = ("fct_ms", "lateness_ms")     # the rows' spans of workload time, in ms


def carry(sess, work, faults, dilation: float, extra: float = 1.0) -> Carried:
    """Carry ``work`` in a session, ``dilation`` times slower than the real pace
    (:func:`traffic.workload.dilate`: transfers that many times bigger, times that many
    times later), and ``extra`` times slower again on links that much slower (the session's
    rate: the same bytes, fewer packets a second), and give back what was carried in the
    undilated system's units: times and bytes divided back, rates and shares as measured."""
    slower = dilation * extra
    if slower == 1:
        return sess.carry(work, faults)
    slow = [dict(f, at_s=f["at_s"] * slower,
                 duration_s=None if f.get("duration_s") is None else f["duration_s"] * slower)
            for f in faults or []] or None
    got = sess.carry(dilate(work, slower, bytes_factor=dilation), slow)
    rows = []
    for t, r in zip(work.transfers, got.rows):
        r = dict(r, bytes=t.bytes, bytes_received=round(r["bytes_received"] / dilation))
        for k in ROW_TIMES:
            if r.get(k) is not None:
                r[k] = round(r[k] / slower, 6)
        for k in ROW_SPANS_MS:
            if r.get(k) is not None:
                r[k] = round(r[k] / slower, 3)
        rows.append(r)
    links = [dict(x, t_s=round(x["t_s"] / slower, 4), bytes=round(x["bytes"] / dilation))
             for x in got.links]
    faults_hit = [_undilate_fault(f, slower) for f in got.faults or []] or None
    return Carried(rows, links, got.link_util, faults_hit, got.fidelity, got.clock)


def carry_kept(sess, work, faults, dilation: float, retries: int, say,
               extra: float = 1.0, stopped: Optional[dict] = None,
               tag: Optional[dict] = None) -> tuple:
    """:func:`carry`, and again, up to ``retries`` times, while the repetition was held back
    by the machine rather than the fabric (:func:`testbed.core.fidelity.held_back`: the
    hypervisor took a noted share of the CPUs, or transfers alone started late while the
    emulated network kept up; the same seed carries the same schedule and draws the same
    paths), the session measuring what it measures of the idle fabric again first.  The
    repetition carried last, and a record of each one set aside (``say`` is told why).

    ``stopped`` (a dict the session's repetitions share) maps each cause no longer carried
    again to the repetitions it touched (``tag`` plus ``cause`` and ``how``): a repetition
    carried again for late starts that started late again stops ``"late"`` (``how``:
    ``late again``), as the lateness came back on the same schedule (the agents', the
    workload's or a machine slow for longer than a repetition) and carrying every later
    repetition twice only costs time (a demo's crossed case spent 130 s so); a later one held
    back for it is kept as carried (``not carried again``)."""
    busy: list = []
    stopped = {} if stopped is None else stopped
    while True:
        got = carry(sess, work, faults, dilation, extra)
        why = fidelity.held_back(got.rows, got.fidelity)
        again = why and why["cause"] == "late" and busy and busy[-1]["cause"] == "late"
        if why and (again or why["cause"] in stopped):
            how = "late again" if again else "not carried again"
            stopped.setdefault(why["cause"], []).append(dict(tag or {}, cause=why["cause"],
                                                             how=how))
            say(fidelity.held_back_text(why) + (
                " again: later repetitions of this session are not carried again for late "
                "starts" if again else ": not carried again (late again earlier in this "
                "session)"))
            return got, busy
        if why is None or len(busy) >= retries:
            return got, busy
        busy.append(why)
        say(fidelity.held_back_text(why) + ": carrying it again")
        sess.remeasure()


def _undilate_fault(f: dict, dilation: float) -> dict:
    """A fault record in the undilated system's units: its times in the schedule and the
    transfer figures (FCTs, time to the first byte again); the control plane's own times
    (reroute, agents told) stay as measured."""
    out = dict(f, **{k: round(f[k] / dilation, 4) for k in ("t_s", "at_s", "late_s")
                     if f.get(k) is not None})
    for k in ("first_byte_after_ms", "resumed_after_ms", "fct_ms_before", "fct_ms_during"):
        if f.get(k):
            out[k] = {q: v if q == "n" else round(v / dilation, 3) for q, v in f[k].items()}
    return out
