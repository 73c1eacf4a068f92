"""How late does this machine wake a timer, and what moves it?  (root for the agents'
real-time priority; no fabric, no scenario)

    sudo .venv/bin/python benchmarks/bench_wakeups.py [--seconds 10] [--every-ms 5]

The fidelity record's datapath probe also records how late its timed wake-ups come, at the
real-time priority of the agents' timer threads (``SCHED_FIFO`` 1): the machine's share of a
transfer's start lateness, apart from the agents' own.  This runs that probe alone on
loopback (``python -m traffic.dpprobe --loopback``: no datapath crossed) for ``--seconds``
under four conditions, one after the other:

``idle``         nothing else started
``idle, CFS``    the probe at normal priority (``$ZCUBE_AGENT_REALTIME=0``)
``busy``         one busy-looping process per CPU at normal priority, started here and
                 ended by PID
``busy, CFS``    both

and prints each one's wake-ups: how many, and p50, p99 and maximum ms late against the
planned time.  A busy machine at normal priority shows what the agents' timers would meet
without the real-time priority; ``busy`` what they meet with it.  Prints; asserts nothing.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from testbed.core.metrics import percentile  # noqa: E402

CONDITIONS = (("idle", False, True), ("idle, CFS", False, False), ("busy", True, True),
              ("busy, CFS", True, False))


def wakes(seconds: float, every_ms: float, realtime: bool) -> list[float]:
    """ms late of each of the probe's wake-ups over ``seconds``."""
    env = dict(os.environ, ZCUBE_AGENT_REALTIME="1" if realtime else "0")
    with tempfile.TemporaryFile(mode="w+") as out:
        probe = subprocess.Popen([sys.executable, "-m", "traffic.dpprobe", "--loopback",
                                  "--every-ms", str(every_ms)], cwd=ROOT, env=env, stdout=out)
        try:
            time.sleep(seconds)
        finally:
            probe.terminate()
            probe.wait(timeout=30)
        out.seek(0)
        return [float(line.split()[2]) for line in out if line.startswith("w ")]


def busy_loops() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 1)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="seconds per condition (default 10)")
    ap.add_argument("--every-ms", type=float, default=5.0,
                    help="the probe's interval between wake-ups, ms (default 5, as in a run)")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.every_ms <= 0:
        ap.error("--seconds and --every-ms must be above 0")
    if os.geteuid() != 0:
        print("not root: the probe cannot take the real-time priority; every row is CFS")
    print(f"{os.cpu_count()} CPUs, {args.seconds:g} s per condition, a wake-up every "
          f"{args.every_ms:g} ms")
    print(f"{'condition':<12} {'wake-ups':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, busy, realtime in CONDITIONS:
        hogs = busy_loops() if busy else []
        try:
            late = wakes(args.seconds, args.every_ms, realtime)
        finally:
            for h in hogs:                 # ours, by PID
                h.terminate()
                h.wait(timeout=30)
        if not late:
            print(f"{name:<12} {0:>9}")
            continue
        print(f"{name:<12} {len(late):>9} {percentile(late, 50):>8.3f} "
              f"{percentile(late, 99):>8.3f} {max(late):>8.3f}")


if __name__ == "__main__":
    main()
