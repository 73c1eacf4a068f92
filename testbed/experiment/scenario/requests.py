"""A scenario's requests for one seed: synthetic arrivals, or a trace replayed (read once for
every repetition), and the trace lines a replay did not take."""
from __future__ import annotations

import functools
import os

from traffic import arrivals


def requests_for(sc, seed: int, rate: float | None = None,
                 count: int | None = None):
    """The scenario's requests for one seed: (requests, the trace lines not replayed,
    :func:`skips`)."""
    w = sc.workload
    if rate is not None:
        return arrivals.poisson(rate, count=count, seed=seed, input_tokens=w.input_tokens,
                                output_tokens=w.output_tokens), skips()
    if w.arrivals == "trace":
        path = trace_path(w)
        st = os.stat(path)
        replay = _replay(str(path), st.st_mtime_ns, st.st_size, w.time_scale, w.start_s,
                         w.duration_s, w.count, w.prefix_cache)
        return list(replay.requests), skips(replay)
    common = dict(count=w.count, duration_s=w.duration_s if w.count is None else None,
                  seed=seed, input_tokens=w.input_tokens, output_tokens=w.output_tokens)
    if w.arrivals == "poisson":
        return arrivals.poisson(w.rate, **common), skips()
    return arrivals.bursty(w.rate, w.on_s, w.off_s, **common), skips()


@functools.lru_cache(maxsize=2)
def _replay(path: str, _mtime_ns: int, _size: int, time_scale, start_s, duration_s, limit,
            prefix_cache) -> arrivals.TraceReplay:
    """A trace read once for every repetition and check that replays it the same way (a
    replay does not depend on the seed; its requests are frozen); the file's change time
    and size are part of the key, so an edited file is read again."""
    return arrivals.read_trace(path, time_scale=time_scale, start_s=start_s,
                               duration_s=duration_s, limit=limit, prefix_cache=prefix_cache)


def trace_path(w):
    """The trace file a workload replays (``mooncake``: the shipped one)."""
    return arrivals.MOONCAKE_TRACE if w.trace == "mooncake" else w.trace


def skips(replay=None) -> dict:
    """The trace lines a replay did not take, as summary.json records them: how many, the
    first ``SKIPPED_KEPT`` by line number and reason, and how many it took out of order."""
    if replay is None:
        return {"count": 0, "lines": [], "out_of_order": 0}
    return {"count": replay.skipped_count, "out_of_order": replay.out_of_order,
            "lines": [{"line": n, "reason": why} for n, why in replay.skipped]}


def skips_line(skipped: dict, first: int = 3, where: str = "summary.json") -> str:
    """The console's line about them: the first few, and how many in all ("" when none)."""
    if not skipped["count"]:
        return ""
    shown = "; ".join(f"line {x['line']}: {x['reason']}" for x in skipped["lines"][:first])
    more = skipped["count"] - min(first, len(skipped["lines"]))
    return f"{skipped['count']:,} trace line(s) not replayed ({shown}" + \
        (f"; and {more:,} more, listed in {where})" if more else ")") + \
        (f"; {skipped['out_of_order']:,} replayed out of file order, by their times"
         if skipped["out_of_order"] else "")
