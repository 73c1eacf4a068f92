"""The observers of ``bench_episodes.py``: what each records beside a run, and how its
record is read back (root for recording; reading needs nothing)."""
import contextlib
import csv
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from traffic.kvpool import POOL_PORT  # noqa: E402

TRACEFS = "/sys/kernel/tracing"
PROBE = f"{TRACEFS}/events/tcp/tcp_probe"
CWND_MIN = 4                   # BBR's congestion window in ProbeRTT (bbr_cwnd_min_target)


def agents(root_pid: int) -> list[int]:
    """The host agents (``traffic.agent``) under the run, by PID."""
    import psutil
    try:
        kids = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for p in kids:
        try:
            if "traffic.agent" in " ".join(p.cmdline()):
                out.append(p.pid)
        except psutil.Error:
            continue
    return sorted(out)


def in_ns(pid: int, *cmd: str, **kw):
    return subprocess.run(["nsenter", "-t", str(pid), "-n", *cmd], capture_output=True,
                          text=True, **kw)


class Tracefs:
    """tcp_probe with a window filter, on the TAI clock; the state put back afterwards."""

    FILES = ("trace_clock", f"{PROBE}/filter", f"{PROBE}/enable", "tracing_on")

    def __enter__(self):
        self.mounted = False
        if not os.path.exists(f"{TRACEFS}/trace"):
            subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
            self.mounted = True
        self.saved = {f: self._read(f) for f in self.FILES}
        self._write("tracing_on", "0")
        self._write("trace", "")
        self._write("trace_clock", "tai")
        self._write(f"{PROBE}/filter", f"snd_cwnd <= {CWND_MIN}")
        self._write(f"{PROBE}/enable", "1")
        self._write("tracing_on", "1")
        self.offset = time.clock_gettime(time.CLOCK_TAI) - time.time()
        return self

    def events(self) -> str:
        with open(f"{TRACEFS}/trace") as f:
            return f.read()

    def __exit__(self, *exc):
        self._write("tracing_on", "0")
        clock = re.search(r"\[(\w+)\]", self.saved["trace_clock"])
        self._write("trace_clock", clock[1] if clock else "local")
        self._write(f"{PROBE}/enable", self.saved[f"{PROBE}/enable"].strip() or "0")
        flt = self.saved[f"{PROBE}/filter"].strip()
        self._write(f"{PROBE}/filter", "0" if flt == "none" else flt)
        self._write("tracing_on", self.saved["tracing_on"].strip() or "1")
        if self.mounted:
            subprocess.run(["umount", TRACEFS], check=False)

    @staticmethod
    def _read(name):
        with open(name if name.startswith("/") else f"{TRACEFS}/{name}") as f:
            return f.read()

    @staticmethod
    def _write(name, text):
        with open(name if name.startswith("/") else f"{TRACEFS}/{name}", "w") as f:
            f.write(text)


def first_ip(pid: int) -> str | None:
    got = in_ns(pid, "ip", "-4", "-o", "addr", "show", check=False).stdout
    ips = [m for m in re.findall(r"inet ([\d.]+)/", got) if not m.startswith("127.")]
    return ips[0] if ips else None


PROBE_PORT = 7390
RECEIVER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
out = open(sys.argv[2], "w", buffering=1)
while True:
    data = s.recv(64)
    out.write(f"{data.decode()} {time.time():.6f}\\n")
"""
SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
every, nxt = float(sys.argv[3]) / 1000, time.time()
while True:
    try:
        s.sendto(f"{time.time():.6f}".encode(), (sys.argv[1], int(sys.argv[2])))
    except OSError:                 # the fabric is going down
        break
    nxt += every
    time.sleep(max(0.0, nxt - time.time()))
"""


class OneWay:
    """A stamped datagram every ``args.probe_ms`` from host ``args.probe_hosts[0]`` (an index
    into the fabric's agents, in host order) to host ``args.probe_hosts[1]``."""

    def __init__(self, pids, args, path):
        src, dst = (pids[i] for i in args.probe_hosts)
        time.sleep(1.0)                               # their addresses are set by now
        target = first_ip(dst)
        self.procs = [subprocess.Popen(["nsenter", "-t", str(dst), "-n", sys.executable, "-c",
                                        RECEIVER, str(PROBE_PORT), path])]
        time.sleep(0.2)
        self.procs.append(subprocess.Popen(["nsenter", "-t", str(src), "-n", sys.executable,
                                            "-c", SENDER, target, str(PROBE_PORT),
                                            str(args.probe_ms)]))
        self.label = f"{first_ip(src)} -> {target}"


def end(procs) -> None:
    """End processes started here (by PID), the last started first: a probe's sender
    before its receiver."""
    for p in reversed(procs):
        p.terminate()
        p.wait()


def probertt_events(path: str) -> dict:
    """(sender IP, receiver IP) -> sorted Unix times of acknowledgements taken in ProbeRTT."""
    out = defaultdict(list)
    offset = 0.0
    with open(path) as f:
        for line in f:
            if line.startswith("# offset"):
                offset = float(line.split()[2])
            m = re.search(r" ([\d.]+): tcp_probe: .*src=([\d.]+):\d+ dest=([\d.]+):(\d+)", line)
            if m and int(m[4]) == POOL_PORT:
                out[(m[2], m[3])].append(float(m[1]) - offset)
    return {k: sorted(v) for k, v in out.items()}


def bbr_records(path: str) -> dict:
    """(sender IP, receiver IP) -> sorted [(Unix time, pacing Mb/s, bandwidth Mb/s)]."""
    out, at, conn = defaultdict(list), None, None
    with open(path) as f:
        for line in f:
            if line.startswith("@@"):
                at = float(line.split()[1])
                continue
            m = re.match(r"\s*\d+\s+\d+\s+([\d.]+):\d+\s+([\d.]+):(\d+)", line)
            if m:
                conn = (m[1], m[2])
                continue
            b = re.search(r"bbr:\(bw:(\d+)bps", line)
            p = re.search(r"pacing_rate (\d+)bps", line)
            if conn and b and p:
                out[conn].append((at, int(p[1]) / 1e6, int(b[1]) / 1e6))
            conn = None
    return {k: sorted(v) for k, v in out.items()}


def oneway(path: str) -> tuple[list, list]:
    """(send times, one-way delays in ms) of the datagrams received."""
    got = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                got.append((float(parts[0]), (float(parts[1]) - float(parts[0])) * 1e3))
    got.sort()
    return [g[0] for g in got], [g[1] for g in got]


class SchedRecord:
    """``perf sched record`` of every CPU for ``seconds`` (tracefs mounted if absent), on
    the monotonic clock; :meth:`runs` gives what ran where, in Unix time."""

    def __init__(self, path: str, seconds: float):
        self.path = path
        self.mounted = not os.path.exists(f"{TRACEFS}/trace")
        if self.mounted:
            subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
        self.offset = time.time() - time.monotonic()
        self.proc = subprocess.Popen(["perf", "sched", "record", "-k", "mono", "-a", "-o", path,
                                      "--", "sleep", str(seconds)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def runs(self) -> list[tuple[float, float, str]]:
        """``(start, end, task)`` of every stretch a task ran on a CPU (Unix time; the
        task's name without its PID)."""
        self.proc.wait()
        if self.mounted:
            subprocess.run(["umount", TRACEFS], check=False)
        got = subprocess.run(["perf", "sched", "timehist", "-i", self.path],
                             capture_output=True, text=True).stdout
        return timehist_runs(got, self.offset)


@contextlib.contextmanager
def idle_zcube(ovs_config=()):
    """The demo's ZCube (n=4, 100 Mb/s per GPU) up with nothing on it, on an OVS the testbed
    starts with ``other_config:KEY=VALUE`` for each of ``ovs_config`` set first; the
    emulation torn down and that OVS stopped after."""
    from mininet.log import setLogLevel

    from testbed.emulation.emulation import Emulation
    from testbed.emulation.ovs import Ovs
    from topologies import zcube
    setLogLevel("warning")
    ovs = Ovs().ensure()
    ovs.export_env()
    try:
        for kv in ovs_config:                # the testbed's own OVS: its database is fresh
            if not ovs.ours:
                raise SystemExit("--ovs-config: this OVS is the system's, not the testbed's")
            ovs.vsctl("set", "Open_vSwitch", ".", f"other_config:{kv}")
        with Emulation(zcube(4, 4), ovs=ovs, link_mbps=100, log=lambda m: None) as emu:
            yield emu
    finally:
        ovs.stop()


def timehist_runs(text: str, offset: float) -> list[tuple[float, float, str]]:
    """``(start, end, task)`` from ``perf sched timehist`` lines (each ends a task's stretch
    on a CPU: its time, CPU, task[tid/pid], wait, scheduling delay and run time in ms), the
    times moved by ``offset`` onto the Unix clock."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d.]+)\s+\[\d+\]\s+(\S.*?)\[[\d/]+\]\s+[\d.]+\s+[\d.]+\s+"
                     r"([\d.]+)\s*$", line)
        if m:
            end = float(m[1]) + offset
            out.append((end - float(m[3]) / 1000, end, m[2].strip()))
    return out


def long_stretches(runs: list, least_ms: float = 1.0, top: int = 5) -> str:
    """The tasks with the most stretches of ``least_ms`` or more on a CPU over the recording:
    ``"task N (median X ms, max Y ms), ..."`` (the idle task and perf left out)."""
    by = defaultdict(list)
    for a, b, task in runs:
        if (b - a) * 1000 >= least_ms and task not in ("<idle>", "perf"):
            by[task].append((b - a) * 1000)
    best = sorted(by.items(), key=lambda kv: -len(kv[1]))[:top]
    return ", ".join(f"{t} {len(xs)} (median {sorted(xs)[len(xs) // 2]:.1f} ms, max "
                     f"{max(xs):.1f})" for t, xs in best)


def holders(stalls: list, runs: list, least_ms: float = 1.0) -> dict:
    """For each stall ``(sent, received)``, the tasks that ran ``least_ms`` or more on a CPU
    in a stretch overlapping it (the probe's own, perf and the idle task left out):
    ``{task: stalls}``, ``"(none)"`` for a stall no such stretch overlapped."""
    out = defaultdict(int)
    skip = ("<idle>", "perf", "python", "python3")
    for sent, got in stalls:
        names = {task for a, b, task in runs if a < got and b > sent
                 and (b - a) * 1000 >= least_ms and task not in skip}
        for n in names or {"(none)"}:
            out[n] += 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def through_stalls(rows):
    """How much of a run's FCT tail went through a datapath stall (``stall_ms``)."""
    if not all(r.get("stall_ms") for r in rows):
        return
    import numpy as np
    hit = [r for r in rows if float(r["stall_ms"]) > 0]
    calm = [r["fct"] for r in rows if float(r["stall_ms"]) == 0]
    top = sorted(rows, key=lambda r: -r["fct"])[:max(1, len(rows) // 100)]
    print(f"    transfers through a stall: {len(hit)} of {len(rows)}; of the slowest 1% "
          f"{sum(float(r['stall_ms']) > 0 for r in top)} of {len(top)}; FCT p99 "
          f"{np.percentile([r['fct'] for r in rows], 99):.2f} ms over all, "
          f"{np.percentile(calm, 99):.2f} over those through none")


def without_stalls(fabric_dirs):
    """For each run (the parent of its fabrics' directories, in run.json's order): each
    fabric's per-repetition FCT p50 and p99 paired by seed against the first fabric's, over
    every transfer and over those through no stall only: would leaving the stalled transfers
    out make the run's verdict another?"""
    from testbed.core.metrics import paired_ratio, paired_verdict, percentile
    runs = defaultdict(dict)
    for d in fabric_dirs:
        with open(os.path.join(d, "transfers.csv")) as f:
            rows = [r for r in csv.DictReader(f) if r.get("status", "ok") == "ok"]
        if rows and all(r.get("stall_ms") for r in rows):
            runs[os.path.dirname(d)][os.path.basename(d)] = rows
    for parent, fabrics in runs.items():
        try:
            with open(os.path.join(parent, "run.json")) as f:
                names = [n for n in json.load(f)["runs"] if n in fabrics]
        except (OSError, ValueError, KeyError):
            names = sorted(fabrics)
        for name in names[1:]:
            parts = []
            for q in (50, 99):
                for label, keep in (("all", lambda r: True),
                                    ("through none", lambda r: float(r["stall_ms"]) == 0)):
                    per = [[percentile([float(r["fct_ms"]) for r in fabrics[n]
                                        if r["rep"] == k and keep(r)], q)
                            for k in sorted({r["rep"] for r in fabrics[names[0]]})]
                           for n in (names[0], name)]
                    p = paired_ratio(*per)
                    parts.append(f"p{q} {label} {p['ratio']:.3f} ({p['lo']:.3f}-{p['hi']:.3f}) "
                                 f"{paired_verdict(p)}")
            print(f"== {os.path.basename(parent)}: FCT {name}/{names[0]}, paired by seed: "
                  + "; ".join(parts))
