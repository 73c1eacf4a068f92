"""What a scenario would hold and how long it would run, checked before anything starts
(:mod:`.limits`): requests per run, the time its arrivals span, its longest prefill and
transfer, and the memory one fabric's runs hold at once against the memory available.  A
failure is the ScenarioError of the key it is about."""
from __future__ import annotations

import functools
import math
import os

from testbed.experiment import limits as L
from testbed.experiment.scenario_yaml import Lines
from traffic import arrivals

HOPS = 4                  # bins per transfer and interval: a path's hops (most have 2-4)
BIN_BYTES = 64            # one link bin: a dict entry holding a float
SAMPLE_S = 0.5            # the link records' interval


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


def requests(sc, lines: Lines) -> int:
    """Requests in one run (at most), and the time its arrivals span within the limits."""
    w = sc.workload
    if w.arrivals == "trace":
        n = trace_requests(sc, lines)
    elif w.count is not None:
        n = w.count
        on_share = 1.0 if w.arrivals == "poisson" else w.on_s / (w.on_s + w.off_s or 1)
        span = n / w.rate / on_share
        if span > L.SECONDS:
            lines.fail(("workload", "count"), f"{n:,} requests at {w.rate:g}/s span about "
                       f"{span:,.0f} s of arrivals; at most {L.SECONDS:,.0f} s")
    else:
        n = math.ceil(w.rate * w.duration_s)
        if n > L.REQUESTS:
            lines.fail(("workload", "duration_s"), f"rate x duration_s is about {n:,} "
                       f"requests; at most {L.REQUESTS:,}")
    return max(n, sc.sweep.count if sc.sweep else 0)


def trace_requests(sc, lines: Lines) -> int:
    """The requests a trace replay holds: its file within the size limit, read as the run
    reads it (its window, its count)."""
    path = trace_path(sc.workload)
    size = os.path.getsize(path)
    if size > L.TRACE_BYTES:
        lines.fail(("workload", "trace"), f"{path} is {L.gib(size)}; a trace is at most "
                                          f"{L.gib(L.TRACE_BYTES)}")
    try:
        return len(requests_for(sc, sc.seed)[0])
    except ValueError:
        return 0                          # the run reports what is wrong with the trace


def check(i: int, spec, fab, sc, pds: list, n: int, lines: Lines) -> None:
    """One request of the workload's size on each placement of fabric ``i`` (``pds``): its
    prefill and its longest transfer within a day, and every run's transfers within the
    memory available."""
    from traffic.types import Request
    from traffic.workload import build_workload
    w, d = sc.workload, sc.deployment
    one = [Request(0, 0.0, max(1, w.input_tokens), w.output_tokens)]
    per_request, longest = 0, 0.0
    for pd in pds:
        work = build_workload(one, pd, sc.model, chunks=d.chunks, mla_senders=d.mla_senders)
        per_request = max(per_request, len(work.transfers))
        for t in work.transfers:
            longest = max(longest, t.ready_s, t.bytes * 8 / (fab.nic_gbps * 1e9))
    if longest > L.SECONDS:
        lines.fail(("workload", "input_tokens"), f"on fabrics[{i}] ({spec.name}): one "
                   f"request of {w.input_tokens:,} tokens takes {longest:,.0f} s to prefill or "
                   f"to move at the NIC rate; at most {L.SECONDS:,.0f} s")
    transfers = n * sc.repetitions * len(pds) * per_request
    need = L.estimate_bytes(n, sc.repetitions, len(pds), per_request) \
        + transfers * HOPS * (math.ceil(longest / SAMPLE_S) + 1) * BIN_BYTES
    have = L.available_bytes()
    if have and need > L.MEMORY_SHARE * have:
        lines.fail(("workload",), f"on fabrics[{i}] ({spec.name}): {n:,} requests x "
                   f"{sc.repetitions} repetition(s) x {len(pds)} placement(s) x {per_request} "
                   f"transfers would hold about {L.gib(need)}; this machine has "
                   f"{L.gib(have)} available (fewer requests or repetitions)")
