"""Route verifier with all-to-all link loads; prints seconds (target: ZCube n=32 < 30 s).

    .venv/bin/python benchmarks/bench_routes.py [n]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from controller.routing import RouteTable  # noqa: E402
from controller.verify import verify  # noqa: E402
from topologies import roft, zcube  # noqa: E402


def bench(label, fab, policy):
    t0 = time.process_time()
    rep = verify(RouteTable(fab, policy), traffic="all-to-all")
    dt = time.process_time() - t0
    print(f"{label:<46} {rep.pairs:>9,} pairs {rep.paths:>10,} paths {dt:7.2f} s CPU  "
          f"{'ok' if rep.ok else 'FAILED'}")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    bench(f"zcube n={n}, policy zcube, all-to-all", zcube(n), "zcube")
    bench(f"roft {n * n // 8}x8, policy ecmp, all-to-all", roft(n * n // 8, 8), "ecmp")
