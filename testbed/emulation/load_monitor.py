"""The machine under the emulator while a workload runs: the CPU share of ovs-vswitchd's
busiest thread, idle time and hypervisor steal per 100 ms window, and the wait for a quiet
host (:mod:`testbed.core.fidelity` judges)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager

import psutil

from testbed.core.fidelity import in_flight
from testbed.emulation.sampling import Sampler

WINDOW_S = 0.1


class DatapathMonitor(Sampler):
    """CPU share of ovs-vswitchd's busiest thread and the machine's idle share, per
    ``WINDOW_S`` window, while in the ``with`` block."""

    def __init__(self, pid: int | None, window_s: float = WINDOW_S):
        self.window_s = window_s
        self.proc = psutil.Process(pid) if pid else None
        self.busiest: list[float] = []
        self.spans: list[tuple] = []          # each busiest window's (start, end), time.time()
        self.idle: list[float] = []
        self.steal: list[float] = []          # the hypervisor's share of the CPUs' time
        self.steal_spans: list[tuple] = []    # each steal window's (start, end), time.time()
        super().__init__()

    def _threads(self) -> dict:
        """CPU seconds of each thread: the scheduler's own nanosecond count (schedstat)
        where the kernel keeps it, else utime + stime, which /proc gives in 10 ms ticks (a
        10% step in a 100 ms window, enough to move the p99 across a threshold)."""
        times = _schedstat_times(self.proc.pid)
        if times:
            return times
        try:
            return {t.id: t.user_time + t.system_time for t in self.proc.threads()}
        except (psutil.Error, OSError):
            return {}

    def _run(self):
        last_t, last_cpu, last_wall = time.monotonic(), psutil.cpu_times(), time.time()
        last_thr = self._threads() if self.proc else {}
        while not self._stop.wait(self.window_s):
            now, cpu, wall = time.monotonic(), psutil.cpu_times(), time.time()
            dt = now - last_t
            total = sum(cpu) - sum(last_cpu)
            idle = (cpu.idle + getattr(cpu, "iowait", 0.0)
                    - last_cpu.idle - getattr(last_cpu, "iowait", 0.0))
            if total > 0:
                self.idle.append(idle / total)
                self.steal.append((getattr(cpu, "steal", 0.0)
                                   - getattr(last_cpu, "steal", 0.0)) / total)
                self.steal_spans.append((last_wall, wall))
            if self.proc:
                thr = self._threads()
                shares = [(v - last_thr.get(k, v)) / dt for k, v in thr.items()]
                self.busiest.append(max(shares, default=0.0))
                self.spans.append((last_wall, wall))
                last_thr = thr
            last_t, last_cpu, last_wall = now, cpu, wall

    def summary(self) -> dict:
        from testbed.core.fidelity import window_figures
        idle = None if not self.idle else {"mean": round(sum(self.idle) / len(self.idle), 4),
                                           "min": round(min(self.idle), 4)}
        steal = None if not self.steal else {
            "mean": round(sum(self.steal) / len(self.steal), 4), "max": round(max(self.steal), 4)}
        return {"window_s": self.window_s, "windows": len(self.idle),
                "datapath": window_figures(self.busiest), "machine_idle": idle,
                "machine_steal": steal,
                "busiest": [round(x, 4) for x in self.busiest]}    # pooled over a run

    def steal_max(self) -> float:
        """The busiest window's steal (as :meth:`summary` gives it), 0.0 without a window."""
        return round(max(self.steal), 4) if self.steal else 0.0

    def hot(self, t0: float, share: float) -> list[tuple]:
        """The windows, in seconds from ``t0``, in which the busiest thread ran at least
        ``share`` of a core."""
        return _reaching(self.spans, self.busiest, t0, share)

    def stolen(self, t0: float, share: float) -> list[tuple]:
        """The windows, in seconds from ``t0``, in which the hypervisor took at least
        ``share`` of the CPUs' time (steal)."""
        return _reaching(self.steal_spans, self.steal, t0, share)

    def steal_windows(self, t0: float) -> list[tuple]:
        """Every window as ``(start, end, steal share)``, in seconds from ``t0``, for
        :func:`mark_worst`."""
        return [(a - t0, b - t0, x) for (a, b), x in zip(self.steal_spans, self.steal)]


def mark_worst(rows: list, windows: list, key: str,
               span: tuple = ("start_s", "end_s")) -> None:
    """Give each row ``key``: the largest value of a window (``(start, end, value)``, on the
    rows' clock) that overlaps the row's ``span`` (by default from ``start_s`` to
    ``end_s``: the transfer in flight), 0.0 in none; None for a row without both times.
    ``steal``: the share of the CPUs the hypervisor took in a 100 ms window; ``stall_ms``:
    the datapath probe's delay in a stall (:func:`testbed.core.fidelity.probe_figures`)."""
    lo, hi = span
    for r in rows:
        if r.get(lo) is None or r.get(hi) is None:
            r[key] = None
            continue
        r[key] = round(max((x for a, b, x in windows if in_flight(r, a, b, span)),
                           default=0.0), 4)


def mark_waits(rows: list, wakes: list, t0: float, key: str = "wake_ms") -> None:
    """Give each row (``ready_s``/``start_s`` from ``t0``) ``key``: the lateness (ms) of the
    latest of the datapath probe's wake-ups (``(Unix time, ms late)``) that were overdue
    while the transfer waited to start, 0.0 in none; None for one never started
    (:func:`mark_worst` over the wait).  A transfer that started late while the probe's
    timer was as late waited for the machine."""
    mark_worst(rows, overdue(wakes, t0), key, span=("ready_s", "start_s"))


def overdue(wakes: list, t0: float = 0.0) -> list[tuple]:
    """The probe's wake-ups (``(Unix time, ms late)``) as the windows they were overdue in,
    ``(start, end, ms late)`` in seconds from ``t0``, for :func:`mark_worst`."""
    return [(t - late / 1000 - t0, t - t0, late) for t, late in wakes]


def _reaching(spans: list, values: list, t0: float, share: float) -> list[tuple]:
    """The ``spans`` (time.time()) whose value reaches ``share``, in seconds from ``t0``."""
    return [(a - t0, b - t0) for (a, b), x in zip(spans, values) if x >= share]


def _schedstat_times(pid: int) -> dict:
    """{thread id: seconds on a CPU} from /proc/PID/task/*/schedstat ({} where absent)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue                               # the thread ended, or no schedstat
    return out


# a process that wakes every half millisecond for a little work, as the emulator's timers and
# datapath do, and ends itself (its parent need not end it), at the lowest priority
WAKER = ("import os, sys, time\nos.nice(19)\nend = time.monotonic() + float(sys.argv[1])\n"
         "while time.monotonic() < end:\n    time.sleep(0.0005)\n    sum(range(200))\n")


@contextmanager
def per_cpu(script: str, seconds: float, cpus: int | None = None):
    """``python -c script seconds`` once per CPU (``cpus``, by default every one), each
    meant to end itself after ``seconds``; the block's exit waits for them, or ends them if
    the block raised (an interrupt: SIGTERM, ^C)."""
    procs = [subprocess.Popen([sys.executable, "-c", script, f"{seconds:.3f}"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
             for _ in range(cpus or os.cpu_count() or 1)]
    try:
        yield procs
    except BaseException:
        for proc in procs:
            proc.terminate()
        raise
    finally:
        for proc in procs:
            proc.wait()


def cpus_waking(seconds: float, cpus: int | None = None):
    """One :data:`WAKER` per CPU for ``seconds`` (:func:`per_cpu`).  A hypervisor counts
    steal while a CPU that has work waits for the host: a machine at rest never waits, and
    one spinning holds its CPU, so neither sees the host that delays a waking CPU, which is
    what stretches the emulator's transfers (steal reached 0.10-0.27 of a 100 ms window
    with these wakers, at most 0.05 at rest or spinning)."""
    return per_cpu(WAKER, seconds, cpus)


def watch_steal(seconds: float) -> float:
    """The busiest 100 ms window's steal over ``seconds`` with every CPU waking
    (:func:`cpus_waking`)."""
    with cpus_waking(seconds + WINDOW_S), DatapathMonitor(None) as monitor:
        time.sleep(seconds)
    return monitor.steal_max()


def wait_quiet(quiet_s: float, most_s: float, measure=None) -> tuple[bool, float]:
    """Watch the host in spans of ``quiet_s`` seconds until one passes with the hypervisor
    under :data:`~testbed.core.fidelity.STEAL_NOTED` of the CPUs in every 100 ms window, or
    ``most_s`` seconds have gone: ``(quiet, seconds waited)``.  ``measure(seconds)`` gives a
    span's busiest window's steal (by default :func:`watch_steal`, every CPU waking)."""
    from testbed.core.fidelity import STEAL_NOTED
    measure = measure or watch_steal
    waited = 0.0
    while True:
        steal = measure(quiet_s)
        waited += quiet_s
        if steal < STEAL_NOTED or waited >= most_s:
            return steal < STEAL_NOTED, waited
