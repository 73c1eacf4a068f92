"""Building large fabrics: CPU seconds to build one and check its invariants, then to cost
it, for ZCube n=32, 64 and 128 and ROFT 2048x8 (no root, one core, about 2 s in all).

    .venv/bin/python -m benchmarks.bench_fabric [n ...] [--quick]

Target: under 10 s (build + invariants + cost) for ZCube n=128 (16,384 GPUs, 256 switches)
and for ROFT 2048x8 (16,384 GPUs); other sizes have none.  ``--quick`` is the default
sizes, which are already quick.
"""
import argparse
import time

from benchmarks.common import limit, target
from topologies import roft, zcube
from topologies.cost import cost

TARGET_S = 10.0


def timed(label, fn):
    """``fn()`` under a time limit, and its CPU seconds."""
    t0 = time.process_time()
    with limit(300, label):
        result = fn()
    return result, time.process_time() - t0


def one(label: str, build, has_target: bool) -> None:
    fab, built = timed(f"{label}: build + invariants", build)
    c, costed = timed(f"{label}: cost", lambda: cost(fab))
    total = built + costed
    aim = target(total < TARGET_S, f"under {TARGET_S:g} s") if has_target else "no target"
    print(f"{label:<40} build + invariants {built:6.2f} s, cost {costed:5.2f} s CPU "
          f"({len(fab.links):,} links, switch-port Gb/s {c['switch_port_gbps']:,.0f}); {aim}",
          flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sizes", type=int, nargs="*", metavar="N", help="ZCube n (32 64 128)")
    p.add_argument("--quick", action="store_true", help="the default sizes (already quick)")
    args = p.parse_args(argv)
    for n in args.sizes or [32, 64, 128]:
        one(f"zcube n={n} ({n * n:,} GPUs, {2 * n} switches)", lambda n=n: zcube(n), n == 128)
    one("roft 2048x8 (16,384 GPUs)",
        lambda: roft(servers=2048, gpus_per_server=8, radix=512), True)


if __name__ == "__main__":
    main()
