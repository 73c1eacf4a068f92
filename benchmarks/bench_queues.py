"""How deep do the emulated switch queues get?  Peak backlog per shaped port during a run
(root).

    sudo .venv/bin/python benchmarks/bench_queues.py cross-rail [--every 0.05]

Runs ``zcube run SCENARIO --no-report`` and, while it runs, reads every shaped switch
port's queue (the FIFO under its htb class, in the root namespace, the testbed's prefix)
with ``tc -s -j qdisc show`` every ``--every`` seconds.  Prints, per fabric, the deepest
backlog seen in bytes, in packets and in milliseconds at the port's shaped rate, the share
of samples with anything queued, and the queue drops the port counted.  A sampler this
coarse misses the briefest peaks: the figures are lower bounds.  Asserts nothing.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from testbed.emulation.state import PREFIX  # noqa: E402

FABRIC = re.compile(r"^\[zcube\] (\S+ .*?) \((\S+), policy ")


def _tc(kind: str) -> list:
    out = subprocess.run(["tc", "-s", "-j", kind, "show"], capture_output=True,
                         text=True).stdout
    try:
        return json.loads(out or "[]")
    except ValueError:
        return []


RATE = re.compile(r"^class htb .* rate (\d+(?:\.\d+)?)([KMG]?)bit", re.M)
UNIT = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}


def _rate(dev: str):
    """A shaped port's htb rate, bytes per second (None: not found); ``tc class`` has no
    JSON output in every iproute2, so its text is read."""
    out = subprocess.run(["tc", "class", "show", "dev", dev], capture_output=True,
                         text=True).stdout
    m = RATE.search(out)
    return float(m.group(1)) * UNIT[m.group(2)] / 8 if m else None


def _follow(proc, state: dict) -> None:
    for line in proc.stderr:
        m = FABRIC.match(line)
        if m:
            state["fabric"] = m.group(2)
        state["lines"].append(line)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario")
    p.add_argument("--every", type=float, default=0.05, help="seconds between samples")
    args = p.parse_args()
    out = tempfile.mkdtemp(prefix="bench-queues-")
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", args.scenario,
                             "--no-report", "-o", out], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    state = {"fabric": None, "lines": []}
    threading.Thread(target=_follow, args=(proc, state), daemon=True).start()
    seen: dict = {}                  # fabric -> dev -> [bytes, packets, ms, busy, n, drops]
    rates: dict = {}
    while proc.poll() is None:
        fabric = state["fabric"]
        for q in _tc("qdisc"):
            dev = q.get("dev", "")
            if fabric is None or q.get("kind") not in ("pfifo", "bfifo") \
                    or not dev.startswith(PREFIX):
                continue
            if dev not in rates:
                rates[dev] = _rate(dev)
            row = seen.setdefault(fabric, {}).setdefault(dev, [0, 0, 0.0, 0, 0, 0])
            backlog = q.get("backlog", 0)
            row[0], row[1] = max(row[0], backlog), max(row[1], q.get("qlen", 0))
            if rates.get(dev):
                row[2] = max(row[2], 1000.0 * backlog / rates[dev])
            row[3] += backlog > 0
            row[4] += 1
            row[5] = q.get("drops", 0)
        time.sleep(args.every)
        if state["fabric"] != fabric:
            rates.clear()                     # the next fabric's ports, maybe other rates
    print(f"zcube run {args.scenario}: exit {proc.returncode}")
    print("| fabric | deepest backlog (port) | packets | ms at the port's rate | "
          "samples with a queue | queue drops |")
    print("|---|---|---|---|---|---|")
    for fabric, devs in seen.items():
        dev, row = max(devs.items(), key=lambda kv: kv[1][0])
        busy = sum(r[3] for r in devs.values()) / max(sum(r[4] for r in devs.values()), 1)
        print(f"| {fabric} | {row[0]:,} B ({dev}) | {max(r[1] for r in devs.values())} | "
              f"{max(r[2] for r in devs.values()):.0f} | {busy:.1%} | "
              f"{sum(r[5] for r in devs.values())} |")


if __name__ == "__main__":
    main()
