"""The route verifier with all-to-all link loads: CPU seconds to compute and check every
path of every GPU pair, on ZCube (policy zcube) and on ROFT (policy ecmp) (no root, one
core).

    .venv/bin/python -m benchmarks.bench_routes [--zcube N] [--roft SERVERS] [--quick]

Targets: ZCube n=32 (1,024 GPUs, 1,047,552 ordered pairs) under 30 s; ROFT 128x8 (1,024
GPUs, 32 paths per cross-rail pair) under 300 s; ROFT 32x8 (256 GPUs) under 30 s; other
sizes have none.  ``--quick`` (about 40 s): ZCube n=32 and ROFT 32x8; by default ROFT 128x8
(minutes).  Exits 1 if a fabric's routes do not verify.
"""
import argparse
import time

from benchmarks.common import fail, limit, target
from controller.routing import RouteTable
from controller.verify import verify
from topologies import roft, zcube

TARGETS_S = {("zcube", 32): 30.0, ("roft", 128): 300.0, ("roft", 32): 30.0}


def bench(label: str, fab, policy: str, key: tuple) -> bool:
    """Verify ``fab``'s routes under ``policy``, print the line; whether they verified."""
    t0 = time.process_time()
    with limit(3600, label):
        rep = verify(RouteTable(fab, policy), traffic="all-to-all")
    dt = time.process_time() - t0
    goal = TARGETS_S.get(key)
    aim = "no target" if goal is None else target(dt < goal, f"under {goal:g} s")
    print(f"{label:<40} {rep.pairs:>9,} pairs {rep.paths:>10,} paths {dt:7.2f} s CPU  "
          f"{'ok' if rep.ok else 'FAILED'}; {aim}", flush=True)
    return rep.ok


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zcube", type=int, default=32, metavar="N", help="ZCube n (32)")
    p.add_argument("--roft", type=int, default=None, metavar="SERVERS",
                   help="ROFT servers of 8 GPUs (128; --quick: 32)")
    p.add_argument("--quick", action="store_true", help="ROFT 32x8 instead of 128x8")
    args = p.parse_args(argv)
    servers = args.roft or (32 if args.quick else 128)
    n = args.zcube
    ok = bench(f"zcube n={n}, policy zcube, all-to-all", zcube(n), "zcube", ("zcube", n))
    ok &= bench(f"roft {servers}x8, policy ecmp, all-to-all", roft(servers, 8), "ecmp",
                ("roft", servers))
    if not ok:
        fail("a fabric's routes did not verify (FAILED above)", 1)


if __name__ == "__main__":
    main()
