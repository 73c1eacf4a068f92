"""How a run's repetitions are run: the sessions each fabric opens and in which order
(:func:`plan`; ``order: mirrored`` against the emulator's pace drifting over minutes), each
repetition in the undilated system's units, and run again when the machine held it back.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from testbed.core import fidelity
from testbed.core.backend import WorkloadResult
from traffic.workload import dilate


class Part(NamedTuple):
    """One session of one fabric: ``sc.fabrics[fabric]`` runs the seeds with indices
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
    """The sessions a run opens, in order (:class:`Part`): ``fabric``, each fabric's repetitions
    in one session, one fabric after the other; ``mirrored``, each fabric's in two halves run
    A1 B1 ... B2 A2 (the last fabric's both in one session, a fabric with one seed whole in the
    first), so that a drift over the run falls on every fabric alike.  ``counts``: how many of
    the seeds each fabric runs, its first ones (default: all)."""
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


def run_dilated(sess, work, faults, dilation: float, extra: float = 1.0) -> WorkloadResult:
    """Run ``work`` in a session ``dilation`` times slower than the real pace
    (:func:`traffic.workload.dilate`: transfers that many times bigger, times that many
    times later), and ``extra`` times slower again on links that much slower (the session's
    rate: the same bytes, fewer packets a second); the result in the undilated system's
    units: times and bytes divided back, rates and shares as measured."""
    slower = dilation * extra
    if slower == 1:
        return sess.run(work, faults)
    slow = [dict(f, at_s=f["at_s"] * slower,
                 duration_s=None if f.get("duration_s") is None else f["duration_s"] * slower)
            for f in faults or []] or None
    got = sess.run(dilate(work, slower, bytes_factor=dilation), slow)
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
    return WorkloadResult(rows, links, got.link_util, faults_hit, got.fidelity, got.clock)


def run_with_retries(sess, work, faults, dilation: float, retries: int, say,
                     extra: float = 1.0, stopped: Optional[dict] = None,
                     tag: Optional[dict] = None) -> tuple:
    """:func:`run_dilated`, and again, up to ``retries`` times, while the machine rather than
    the fabric held the repetition back (:func:`testbed.core.fidelity.held_back`; the same
    seed runs the same schedule on the same paths), the session measuring the idle fabric
    again first.  The repetition run last, and a record of each one set aside (``say`` is
    told why).

    ``stopped`` (shared by the session's repetitions) maps each cause no longer run again to
    the repetitions it touched (``tag`` plus ``cause`` and ``how``): once a repetition run
    again for late starts starts late again (``how``: ``late again``), the lateness is the
    schedule's, not the machine's, so a later one held back for it is kept as it ran
    (``not run again``) rather than costing the time twice."""
    busy: list = []
    stopped = {} if stopped is None else stopped
    while True:
        got = run_dilated(sess, work, faults, dilation, extra)
        why = fidelity.held_back(got.rows, got.fidelity)
        again = why and why["cause"] == "late" and busy and busy[-1]["cause"] == "late"
        if why and (again or why["cause"] in stopped):
            how = "late again" if again else "not run again"
            stopped.setdefault(why["cause"], []).append(dict(tag or {}, cause=why["cause"],
                                                             how=how))
            say(fidelity.held_back_text(why) + (
                " again: later repetitions of this session are not run again for late "
                "starts" if again else ": not run again (late again earlier in this "
                "session)"))
            return got, busy
        if why is None or len(busy) >= retries:
            return got, busy
        busy.append(why)
        say(fidelity.held_back_text(why) + ": running it again")
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
