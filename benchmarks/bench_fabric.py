"""Build + invariants + cost of large fabrics; prints seconds (target: ZCube n=128 < 10 s).

    .venv/bin/python benchmarks/bench_fabric.py [n ...]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from topologies import roft, zcube  # noqa: E402
from topologies.cost import cost  # noqa: E402


def timed(label, fn):
    t0 = time.process_time()
    result = fn()
    print(f"{label:<58} {time.process_time() - t0:7.2f} s CPU")
    return result


def main(sizes):
    for n in sizes:
        fab = timed(f"zcube n={n}: build + invariants ({n * n} GPUs, {2 * n} switches)",
                    lambda: zcube(n))
        c = timed(f"zcube n={n}: cost", lambda: cost(fab))
        print(f"{'':<4}{len(fab.links)} links, switch-port Gb/s {c['switch_port_gbps']:,.0f}")
    fab = timed("roft 2048x8: build + invariants (16,384 GPUs)",
                lambda: roft(servers=2048, gpus_per_server=8, radix=512))
    timed("roft 2048x8: cost", lambda: cost(fab))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [32, 64, 128])
