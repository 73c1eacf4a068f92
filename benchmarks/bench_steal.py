"""Which load lets a machine see its hypervisor's steal: at rest, spinning, or waking often?

    .venv/bin/python benchmarks/bench_steal.py [--rounds 5] [--span 20]

A hypervisor counts steal while a virtual CPU that has work waits for a host CPU.  The
testbed watches for a quiet host before an emulated run and between repetitions carried
again (``testbed.emulation.fidelity.wait_quiet``); what it sees depends on what the machine
does meanwhile.  This takes spans of ``--span`` seconds in turn, ``--rounds`` times:

- ``rest``: nothing but the monitor;
- ``spin``: one busy loop per CPU at nice 19, never sleeping;
- ``wake``: one process per CPU waking every half millisecond for a little work
  (``cpus_waking``, the load ``wait_quiet`` watches with, as the emulator's timers and
  datapath wake);

and prints, per span, the busiest 100 ms window's steal, the mean, how many windows reached
the share a run notes (15%), and the machine's idle share.  Spans taken in turn share the
host's minutes, so the modes compare within a round.  No root, no emulator; prints, asserts
nothing.  Run it with nothing else on the machine.
"""
import argparse
import os
import sys
import time
from contextlib import ExitStack

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.core.fidelity import STEAL_NOTED  # noqa: E402
from testbed.emulation.fidelity import DatapathMonitor, cpus_waking, per_cpu  # noqa: E402

SPIN = ("import os, sys, time\nos.nice(19)\nend = time.monotonic() + float(sys.argv[1])\n"
        "while time.monotonic() < end:\n    pass\n")
MODES = ("rest", "spin", "wake")


def span(mode: str, seconds: float) -> dict:
    with ExitStack() as stack:
        if mode == "spin":
            stack.enter_context(per_cpu(SPIN, seconds + 0.1))
        elif mode == "wake":
            stack.enter_context(cpus_waking(seconds + 0.1))
        with DatapathMonitor(None) as monitor:
            time.sleep(seconds)
    steal, idle = monitor.steal or [0.0], monitor.idle or [0.0]
    return {"max": max(steal), "mean": sum(steal) / len(steal),
            "noted": sum(s >= STEAL_NOTED for s in steal), "windows": len(steal),
            "idle": sum(idle) / len(idle)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="rounds of the three spans (default 5)")
    p.add_argument("--span", type=float, default=20.0, metavar="S",
                   help="seconds of each span (default 20)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.span <= 0:
        p.error("--rounds must be at least 1 and --span over 0")
    seen = {m: [] for m in MODES}
    for k in range(args.rounds):
        for mode in MODES:
            got = span(mode, args.span)
            seen[mode].append(got)
            print(f"{time.strftime('%H:%M:%S')} round {k + 1} {mode:4}: steal max "
                  f"{got['max']:.2f} mean {got['mean']:.3f}, windows at {STEAL_NOTED:.0%} or "
                  f"more {got['noted']}/{got['windows']}, idle {got['idle']:.2f}", flush=True)
    print(f"over {args.rounds} round(s) of {args.span:g} s:")
    for mode in MODES:
        rows = seen[mode]
        print(f"  {mode:4}: steal max {min(r['max'] for r in rows):.2f}-"
              f"{max(r['max'] for r in rows):.2f}, mean "
              f"{sum(r['mean'] for r in rows) / len(rows):.3f}, spans with a window at "
              f"{STEAL_NOTED:.0%} or more {sum(r['noted'] > 0 for r in rows)}/{len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
