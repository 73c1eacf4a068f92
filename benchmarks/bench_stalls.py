"""What holds the datapath's forwarding thread when the datapath probe stalls?  (root,
linux-perf; no scenario runs)

    sudo .venv/bin/python benchmarks/bench_stalls.py [--seconds 30] [--realtime]
         [--ovs-config KEY=VALUE ...] [-o DIR]

Brings up the demo's ZCube (n=4, 100 Mb/s per GPU) with nothing on it but the fidelity
record's datapath probe (a datagram every 5 ms across a bridge of the same datapath, both
ends stamped by the kernel), and has ``perf record`` follow ovs-vswitchd's main thread (on
the userspace datapath it forwards every packet): its system calls, its context switches,
the softirqs and timer interrupts that ran on it.  The thread loops: poll() for ready
sockets, then one pass over every port and its other work.  Each pass from a poll() return
to the next poll() call that took over 2 ms is sorted by what the trace shows in it:

``counters``   a burst of netlink requests (20 or more ``sendmsg``): the periodic pass that
               writes every interface's counters into OVS's database
               (``stats-update-interval``; the testbed's own OVS does it hourly since
               2026-12-05, $ZCUBE_OVS_STATS_MS)
``preempted``  the thread was switched out while runnable and another task ran (named)
``absent``     none of those, and its longest gap with no event at all (1 ms or more) ends
               at a local timer interrupt, with no softirq or interrupt time inside: the
               virtual CPU was not running, which the guest cannot see otherwise
``busy``       none of those: the thread's own work

and each of the probe's stalls (over 2 ms) is put down to the longest such pass in flight
with it (``idle`` when none was: the thread waited in poll() or made only short passes, so
the datagram waited for it to wake).  ``--realtime`` puts that thread under SCHED_FIFO
first, so no other task can take its CPU.  The trace costs the machine something (the
thread makes about 25,000 calls a second), so a traced minute shows more stalls than an
untraced one; compare traced with traced.  Prints; asserts nothing.
"""
import argparse
import bisect
import os
import shutil
import subprocess
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

LONG_S = 0.002          # a pass or a probe delay over this is a stall (the record's STALL_MS)
GAP_S = 0.001           # an event-free gap at least this long may be an absent CPU
NETLINK_BURST = 20      # sendmsg calls in one pass that make it the counters' pass
# system call numbers (raw_syscalls tracepoints carry numbers only)
SYSCALLS = {"x86_64": {7: "poll", 271: "ppoll", 46: "sendmsg"},
            "aarch64": {73: "ppoll", 211: "sendmsg"}}
TRACEFS = "/sys/kernel/tracing"
EVENTS = ("raw_syscalls:sys_enter", "raw_syscalls:sys_exit", "sched:sched_switch",
          "irq:softirq_entry", "irq:softirq_exit", "irq:irq_handler_entry",
          "irq:irq_handler_exit", "irq_vectors:local_timer_entry",
          "irq_vectors:local_timer_exit")


def parse(lines, offset: float, names: dict) -> list[tuple[float, str, str]]:
    """``(unix time, kind, detail)`` from ``perf script -F time,event,trace`` lines: kind
    ``enter``/``exit`` (detail: the call's name, else its number), ``switch`` (detail:
    ``STATE NEXT_TASK``), ``irq_in``/``irq_out`` (softirqs, interrupts and the local
    timer's)."""
    out = []
    for line in lines:
        parts = line.split(None, 2)
        if len(parts) < 2:
            continue
        t, event = float(parts[0].rstrip(":")) + offset, parts[1].rstrip(":")
        rest = parts[2] if len(parts) > 2 else ""
        if event.startswith("raw_syscalls:"):
            nr = int(rest.split()[1])
            out.append((t, "enter" if event.endswith("enter") else "exit",
                        names.get(nr, str(nr))))
        elif event == "sched:sched_switch":
            state = rest.split("prev_state=")[1].split()[0]
            out.append((t, "switch", f"{state} {rest.split('next_comm=')[1].split()[0]}"))
        elif event.endswith(("_entry", "_exit")):
            out.append((t, "irq_in" if event.endswith("_entry") else "irq_out",
                        event.split(":")[1].replace("_entry", "").replace("_exit", "")))
    return out


def passes(events) -> list[dict]:
    """Each pass of the thread's loop: from a poll() return to the next poll() call, with
    its ``sendmsg`` calls, the tasks that preempted it, its softirq and interrupt time and
    its longest event-free gap (and what ended it)."""
    out, cur, irq_at = [], None, None
    for i, (t, kind, what) in enumerate(events):
        polling = what in ("poll", "ppoll")
        if kind == "exit" and polling:
            cur = {"a": t, "i": i, "sendmsg": 0, "preempted": [], "irq_s": 0.0}
        elif cur is None:
            continue
        elif kind == "enter" and polling:
            gaps = [(events[j + 1][0] - events[j][0], events[j + 1][1])
                    for j in range(cur.pop("i"), i)]
            cur.update(b=t, gap=max(gaps) if gaps else (0.0, ""))
            out.append(cur)
            cur = None
        elif kind == "enter" and what == "sendmsg":
            cur["sendmsg"] += 1
        elif kind == "switch" and what.startswith("R"):
            cur["preempted"].append(what.split()[1])
        elif kind == "irq_in":
            irq_at = t
        elif kind == "irq_out" and irq_at is not None:
            cur["irq_s"] += t - irq_at
            irq_at = None
    return out


def kind_of(p: dict) -> str:
    """``counters``, ``preempted by TASK``, ``absent`` or ``busy`` (see the module's text)."""
    if p["sendmsg"] >= NETLINK_BURST:
        return "counters"
    if p["preempted"]:
        return "preempted by " + Counter(p["preempted"]).most_common(1)[0][0]
    gap, ended_by = p["gap"]
    if gap >= GAP_S and ended_by == "irq_in" and p["irq_s"] < GAP_S / 4:
        return "absent"
    return "busy"


def stall_kinds(stalls, long_passes) -> Counter:
    """For each probe stall ``(sent, received)``: the kind of the longest long pass in flight
    with it, or ``idle`` when none was."""
    long_passes = sorted(long_passes, key=lambda p: p["a"])
    starts = [p["a"] for p in long_passes]
    out = Counter()
    for a, b in stalls:
        near = long_passes[max(0, bisect.bisect_left(starts, a) - 1):
                           bisect.bisect_right(starts, b)]
        hit = [p for p in near if p["a"] < b and p["b"] > a]
        out[kind_of(max(hit, key=lambda p: p["b"] - p["a"])) if hit else "idle"] += 1
    return out


def record(args) -> tuple[list, list, float]:
    """Bring the idle ZCube up and trace; ``(probe records, perf script lines, offset)``."""
    from episode_observers import idle_zcube

    from testbed.emulation.dpprobe import DatapathProbe
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(args.out, "perf.data")
    mounted = not os.path.exists(f"{TRACEFS}/trace")
    if mounted:
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
    try:
        with idle_zcube(args.ovs_config) as emu:
            tid = emu.vswitchd_pid()          # the main thread's id is the process's
            if args.realtime:
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(1))
            with DatapathProbe(emu) as probe:
                time.sleep(1)
                offset = time.time() - time.monotonic()
                subprocess.run(["perf", "record", "-q", "-k", "mono", "-t", str(tid), "-o", data]
                               + [x for e in EVENTS for x in ("-e", e)]
                               + ["--", "sleep", str(args.seconds)],
                               check=True, stdout=subprocess.DEVNULL)
            recs = [(a, b) for a, b in probe.records() if b is not None]
    finally:
        if mounted:
            subprocess.run(["umount", TRACEFS], check=False)
    text = subprocess.run(["perf", "script", "-i", data, "--ns", "-F", "time,event,trace"],
                          capture_output=True, text=True).stdout.splitlines()
    os.unlink(data)
    return recs, text, offset


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30, help="how long to trace (default 30)")
    ap.add_argument("--realtime", action="store_true",
                    help="put ovs-vswitchd's main thread under SCHED_FIFO (priority 1) first")
    ap.add_argument("--ovs-config", action="append", default=[], metavar="KEY=VALUE",
                    help="set other_config:KEY=VALUE on the testbed's own OVS first "
                         "(repeatable; e.g. stats-update-interval=5000, OVS's default)")
    ap.add_argument("-o", "--out", default="/tmp/zcube-bench-stalls",
                    help="directory for perf's data while it is read (removed after)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("needs root (Mininet, OVS and perf)")
    names = SYSCALLS.get(os.uname().machine)
    if names is None:
        ap.error(f"no system call numbers for {os.uname().machine}")
    if not shutil.which("perf"):
        ap.error("needs perf (apt install linux-perf)")
    recs, text, offset = record(args)
    events = parse(text, offset, names)
    span = (events[0][0], events[-1][0]) if events else (0.0, 0.0)
    every = passes(events)
    long_passes = [p for p in every if p["b"] - p["a"] > LONG_S]
    kinds = Counter(kind_of(p) for p in long_passes)
    stalls = [(a, b) for a, b in recs if span[0] < a < span[1] and b - a > LONG_S]
    ms = sorted(1000 * (p["b"] - p["a"]) for p in long_passes)
    setting = ("SCHED_FIFO" if args.realtime else "as started") \
        + "".join(f", {kv}" for kv in args.ovs_config)
    print(f"idle ZCube, forwarding thread {setting}, {span[1] - span[0]:.0f} s traced: "
          f"{len(every)} passes, {len(long_passes)} over 2 ms"
          + (f" (median {ms[len(ms) // 2]:.2f} ms, max {ms[-1]:.2f})" if ms else ""))
    print("  passes over 2 ms: " + (", ".join(f"{k} {v}" for k, v in kinds.most_common())
                                     or "none"))
    delays = sorted(1000 * (b - a) for a, b in recs if span[0] < a < span[1])
    print(f"  datapath probe: {len(delays)} datagrams, median {delays[len(delays) // 2]:.2f} ms,"
          f" {len(stalls)} over 2 ms, in: "
          + (", ".join(f"{k} {v}" for k, v in stall_kinds(stalls, long_passes).most_common())
             or "-"))


if __name__ == "__main__":
    main()
