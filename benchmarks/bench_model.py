"""Flow-level model backend: events per second and wall time (pure Python, one core, no root).

    .venv/bin/python -m benchmarks.bench_model [--quick] [--model M] [--placement P] ...

Runs, each printed with what it ran:

1. ZCube n=32 (1,024 GPUs, policy zcube) and ROFT 128x8 (1,024 GPUs, policy ecmp) replaying
   the whole shipped Mooncake conversation trace (12,031 requests, one hour);
2. ZCube n=128 (16,384 GPUs) on the same trace (``--big-limit N`` for a shorter slice);
3. a stress run on both 1,024-GPU fabrics: the first ``--stress-limit`` requests replayed
   ``1 / --stress-time-scale`` times faster (prefill rate raised by the same factor so the
   requests reach the network), which puts thousands of flows in contention at once.

Figures: each run's events, events per second and wall time from trace to results.
Target: under 10 ms of wall time per request replayed, trace reading and route computation
included (under 120 s for the whole trace on each fabric); the stress runs have none.

Defaults: llama3-70b (8 KV heads), prefill TP8 -> decode TP8 with placement cross-rail (a
1:1 split of the servers; every transfer changes rail, the case PD disaggregation makes),
100 Mb/s NICs with KV bytes scaled by the same factor as the emulation does.  ``--quick``
(about 10 s) replays the first 2,000 requests only, without the stress runs.
"""
import argparse
import resource
import sys
import time

from benchmarks.common import limit, target
from controller.routing import RouteTable
from testbed.core.metrics import percentile
from testbed.model.simulate import simulate
from topologies import roft, zcube
from traffic import arrivals
from traffic.models import get_model
from traffic.placement import deploy
from traffic.types import Scale
from traffic.workload import build_workload

MS_PER_REQUEST = 10.0         # the target: 120 s for the whole 12,031-request trace


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.w
        self.cpu = time.process_time() - self.c
        return False


def run(label, build, policy, requests, args, prefill_speedup=1.0, read_s=0.0,
        has_target=True):
    """Replay ``requests`` on the fabric ``build()`` makes, under a time limit; print it."""
    with limit(1800, f"{label}: replay"):
        total = replay(label, build, policy, requests, args, prefill_speedup, read_s)
    goal = MS_PER_REQUEST * len(requests) / 1000
    print(f"  total    : {total:.1f} s wall, trace to results; "
          + (target(total < goal, f"under {goal:.1f} s ({MS_PER_REQUEST:g} ms a request)")
             if has_target else "no target") + "\n", flush=True)


def replay(label, build, policy, requests, args, prefill_speedup, read_s) -> float:
    with Clock() as c_fab:
        fab = build()
    with Clock() as c_dep:
        pd = deploy(fab, args.prefill_tp, args.decode_tp, placement=args.placement)
        model = get_model(args.model)
        if prefill_speedup != 1.0:
            faster = model.prefill_tokens_per_s * prefill_speedup
            model = get_model({"preset": args.model, "prefill_tokens_per_s": faster})
        f = fab.scale_for(args.link_mbps)
        work = build_workload(requests, pd, model, scale=Scale(f, f))
    pairs = sorted({(t.src, t.dst) for t in work.transfers})
    with Clock() as c_tab:
        table = RouteTable(fab, policy)
    with Clock() as c_paths:                 # what the lazy table computes for this workload
        n_paths = sum(len(table.paths(s, d)) for s, d in pairs)
    with Clock() as c_sim:
        res = simulate(table, work, args.link_mbps)
    fct = [r["fct_ms"] for r in res.rows]
    total = read_s + c_fab.wall + c_dep.wall + c_tab.wall + c_paths.wall + c_sim.wall
    summ = res.link_summary() or {}
    print(f"{label}: {len(fab.hosts):,} GPUs, {len(fab.switches)} switches, policy {policy}; "
          f"{len(pd.prefill)} prefill x TP{args.prefill_tp} -> {len(pd.decode)} decode x "
          f"TP{args.decode_tp}, {args.placement}")
    print(f"  workload : {len(requests):,} requests -> {len(work.transfers):,} transfers, "
          f"{res.events // 2:,} sub-flows over {len(pairs):,} GPU pairs ({n_paths:,} paths), "
          f"{work.bytes_total / 1e6:,.1f} MB at {args.link_mbps:g} Mb/s NICs")
    print(f"  setup s  : trace {read_s:.2f}, fabric {c_fab.wall:.2f}, deploy + workload "
          f"{c_dep.wall:.2f}, route table {c_tab.wall:.3f}, paths of used pairs "
          f"{c_paths.wall:.2f}")
    print(f"  simulate : {res.events:,} events, {res.recomputations:,} rate recomputations in "
          f"{c_sim.wall:.2f} s wall ({c_sim.cpu:.2f} s CPU) = {res.events / c_sim.wall:,.0f} "
          f"events/s; simulated span {max(r['end_s'] for r in res.rows):,.1f} s")
    print(f"  results  : FCT p50 {percentile(fct, 50):.2f} ms, p99 {percentile(fct, 99):.2f} ms, "
          f"max {max(fct):.2f} ms; link util max {summ.get('max')}, mean {summ.get('mean')}")
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama3-70b")
    ap.add_argument("--placement", default="cross-rail")
    ap.add_argument("--prefill-tp", type=int, default=8)
    ap.add_argument("--decode-tp", type=int, default=8)
    ap.add_argument("--gpus-per-server", type=int, default=8)
    ap.add_argument("--link-mbps", type=float, default=100.0)
    ap.add_argument("--limit", type=int, default=None, help="requests of the trace (default all)")
    ap.add_argument("--big-n", type=int, default=128, help="ZCube n of the large run (0: skip)")
    ap.add_argument("--big-limit", type=int, default=None, help="requests for the large run")
    ap.add_argument("--stress-limit", type=int, default=1000, help="requests (0: skip)")
    ap.add_argument("--stress-time-scale", type=float, default=0.002)
    ap.add_argument("--quick", action="store_true", help="first 2,000 requests, no stress run")
    args = ap.parse_args(argv)
    if args.quick:
        args.limit = args.big_limit = 2000
        args.stress_limit = 0
    gps = args.gpus_per_server
    with Clock() as c_read:
        replay = arrivals.read_trace(arrivals.MOONCAKE_TRACE, limit=args.limit)
    reqs = replay.requests
    span = reqs[-1].arrival_s if reqs else 0.0
    print(f"Mooncake trace: {len(reqs):,} requests over {span:,.0f} s "
          f"(read in {c_read.wall:.2f} s); python {sys.version.split()[0]}\n")
    for label, build, policy in (("zcube n=32", lambda: zcube(32, gps), "zcube"),
                                 (f"roft {1024 // gps}x{gps}", lambda: roft(1024 // gps, gps),
                                  "ecmp")):
        run(label, build, policy, reqs, args, read_s=c_read.wall)
    if args.big_n:
        big = reqs if args.big_limit is None else reqs[:args.big_limit]
        run(f"zcube n={args.big_n}", lambda: zcube(args.big_n, gps), "zcube", big, args,
            read_s=c_read.wall)
    if args.stress_limit:
        x = args.stress_time_scale
        stress = arrivals.read_trace(arrivals.MOONCAKE_TRACE, time_scale=x,
                                     limit=args.stress_limit).requests
        print(f"stress: first {len(stress):,} requests replayed {1 / x:g}x faster "
              f"(prefill {1 / x:g}x faster too)\n")
        for label, build, policy in (("zcube n=32", lambda: zcube(32, gps), "zcube"),
                                     (f"roft {1024 // gps}x{gps}",
                                      lambda: roft(1024 // gps, gps), "ecmp")):
            run(f"stress {label}", build, policy, stress, args, prefill_speedup=1 / x,
                has_target=False)
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
