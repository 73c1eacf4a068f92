"""What reading the switches' port counters during a workload costs the emulated network.

    sudo .venv/bin/python benchmarks/bench_counters.py probe [--rounds 2] [--pings 1000]
    .venv/bin/python benchmarks/bench_counters.py runs DIR [DIR ...]

``probe`` (root) brings up ZCube n=4 at 100 Mb/s per GPU and pings from g0 to g8 (a path
through two switches) every 5 ms while the port counters are read every half second in one
of three ways, alternated: not at all, through ``ovs-appctl dpctl/show -s`` (a process, and
the userspace datapath's forwarding thread answering it; what links.csv used until
2026-12-04), and from ``/proc/net/dev`` (what it uses now).  Prints the round-trip times'
median, p99 and maximum, the pings over 2 ms, and what one read took.

``runs`` reads finished emulated runs (a run directory holding ``FABRIC/transfers.csv`` and
``FABRIC/links.csv``, or a ``bench_repeat.py`` directory of them) and splits each fabric's
requests into those in flight when the link sampler read the counters (a window's end in
links.csv, within 10 ms before it) and the rest: the slowest transfer of each request, its
median, p90 and maximum.  Where the first are slower, the reads cost the workload time.
Where transfers.csv has ``steal`` (emulated runs since 2026-12-04), it splits them a second
way: requests with a transfer in flight in a 100 ms window in which the hypervisor took any
of the CPUs' time, and the rest.

Prints figures; asserts nothing.
"""
import argparse
import csv
import glob
import os
import re
import statistics
import sys
import threading
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

READ_S = 0.01           # a read ends at its window's t_s and takes at most this long


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def ping(emu, reader, pings: int) -> tuple[list[float], list[float]]:
    """RTTs (ms) of ``pings`` pings g0 -> g8 at 5 ms while ``reader`` (or nothing) runs
    every 0.5 s; and each read's duration (s)."""
    stop, took = threading.Event(), []

    def loop():
        while not stop.wait(0.5):
            t = time.perf_counter()
            reader()
            took.append(time.perf_counter() - t)

    thread = threading.Thread(target=loop) if reader else None
    if thread:
        thread.start()
    dst = emu.fabric.host("g8").ports[0].ip
    out = emu.net.get("g0").cmd(f"ping -n -i 0.005 -c {pings} {dst}")
    stop.set()
    if thread:
        thread.join()
    return [float(x) for x in re.findall(r"time=([\d.]+)", out)], took


def probe(args):
    from mininet.log import setLogLevel

    from testbed.emulation.emulation import Emulation
    from testbed.emulation.ovs import Ovs
    from topologies import zcube

    setLogLevel("warning")
    ovs = Ovs().ensure()
    ovs.export_env()
    try:
        with Emulation(zcube(4, 4), ovs=ovs, link_mbps=100, log=lambda m: None) as emu:
            readers = (("none", None),
                       ("ovs-appctl", lambda: emu.port_counters("bytes")),
                       ("/proc/net/dev", lambda: emu.kernel_counters("bytes")))
            for rnd in range(1, args.rounds + 1):
                for label, reader in readers:
                    rtts, took = ping(emu, reader, args.pings)
                    read = (f"a read {1e3 * statistics.mean(took):.1f} ms on average, "
                            f"{1e3 * max(took):.1f} at most" if took else "no reads")
                    print(f"round {rnd} {label:<14} {len(rtts)} pings: RTT p50 "
                          f"{quantile(rtts, 0.5):.3f} p99 {quantile(rtts, 0.99):.3f} max "
                          f"{max(rtts):.3f} ms, {sum(r > 2 for r in rtts)} over 2 ms; {read}",
                          flush=True)
    finally:
        ovs.stop()


def split(fabric_dir: str) -> tuple[list[float], list[float]]:
    """Each request's slowest transfer (ms): those in flight at a counter read, the rest;
    those in flight in a window with steal, the rest (both empty without ``steal``)."""
    reads = defaultdict(list)
    with open(os.path.join(fabric_dir, "links.csv")) as f:
        for row in csv.DictReader(f):
            reads[row["rep"]].append(float(row["t_s"]))
    reqs = defaultdict(list)
    with open(os.path.join(fabric_dir, "transfers.csv")) as f:
        for row in csv.DictReader(f):
            reqs[(row["rep"], row["request"])].append(row)
    hit, miss, stolen, calm = [], [], [], []
    for (rep, _), rows in reqs.items():
        start = min(float(r["start_s"]) for r in rows)
        end = max(float(r["end_s"]) for r in rows)
        slowest = max(float(r["fct_ms"]) for r in rows)
        ticks = set(reads.get(rep, ()))
        (hit if any(start <= t and t - READ_S <= end for t in ticks) else miss).append(slowest)
        steal = [float(r["steal"]) for r in rows if r.get("steal") not in (None, "")]
        if steal:
            (stolen if max(steal) > 0 else calm).append(slowest)
    return hit, miss, stolen, calm


def runs(args):
    def line(xs):
        if not xs:
            return "none"
        return (f"{len(xs)} requests, p50 {quantile(xs, 0.5):.2f} p90 {quantile(xs, 0.9):.2f} "
                f"max {max(xs):.2f} ms")

    for d in args.dirs:
        for tf in sorted(glob.glob(os.path.join(d, "**", "transfers.csv"), recursive=True)):
            fab = os.path.dirname(tf)
            if not os.path.exists(os.path.join(fab, "links.csv")):
                continue
            hit, miss, stolen, calm = split(fab)
            name = os.path.relpath(fab, d)
            print(f"{name}: at a read {line(hit)}; the rest {line(miss)}")
            if stolen or calm:
                print(f"{name}: with steal {line(stolen)}; the rest {line(calm)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe", help="ping through ZCube n=4 while the counters are read")
    p.add_argument("--rounds", type=int, default=2, help="rounds of the three readers")
    p.add_argument("--pings", type=int, default=1000, help="pings per reader and round")
    r = sub.add_parser("runs", help="requests in flight at a read against the rest")
    r.add_argument("dirs", nargs="+", help="run or bench_repeat.py directories")
    args = ap.parse_args()
    probe(args) if args.cmd == "probe" else runs(args)


if __name__ == "__main__":
    main()
