"""What the emulator did while it carried a workload (:mod:`testbed.core.fidelity` judges).

:class:`DatapathMonitor` samples, every 100 ms while the workload runs, the CPU time of each
thread of ovs-vswitchd (the userspace datapath forwards every packet on one thread), the
machine's idle time and the time a hypervisor took from its CPUs (steal), from /proc through
psutil.  :func:`isolated_transfers` carries, before
the workload, transfers of the workload's own sizes alone on the idle fabric, one kind of
port pairing at a time, and compares their FCT with the ideal.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import psutil

from controller.pairings import flows_for
from testbed.core import metrics
from testbed.core.fidelity import in_flight
from testbed.emulation.sampling import Sampler
from traffic.types import Transfer

WINDOW_S = 0.1
ISOLATED_REPEATS = 5
# times the isolated transfers are measured while the hypervisor takes a noted share of the
# CPUs in a window (they calibrate the emulator, not the machine's host)
ISOLATED_TRIES = 3


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
    overdue = [(t - late / 1000 - t0, t - t0, late) for t, late in wakes]
    mark_worst(rows, overdue, key, span=("ready_s", "start_s"))


def _reaching(spans: list, values: list, t0: float, share: float) -> list[tuple]:
    """The ``spans`` (time.time()) whose value reaches ``share``, in seconds from ``t0``."""
    return [(a - t0, b - t0) for (a, b), x in zip(spans, values) if x >= share]


def _schedstat_times(pid: int) -> dict:
    """{thread id: seconds on a CPU} from /proc/PID/task/*/schedstat ({} where absent)."""
    import os
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


def _kind(table, src: str, dst: str) -> tuple:
    """A transfer's kind: switches crossed by each of the paths it is split over."""
    return tuple(sorted(len(p) - 2 for p in table.paths(src, dst)))


def kinds_of(table, work) -> tuple:
    """The kinds of transfer in ``work`` (:func:`isolated_transfers` measures each)."""
    return tuple(sorted({_kind(table, t.src, t.dst) for t in work.transfers}))


def ideal_s(table, link_mbps: float, src: str, dst: str, size: int) -> float:
    """Size over port rate: the busiest NIC port's bytes (a transfer's flows through one
    port, as ``spray``'s lanes, add up) over that port's rate, at either end."""
    fab = table.fabric
    port_of = {p.ip: p for h in fab.hosts for p in h.ports}
    scale = fab.scale_for(link_mbps)
    through: dict = {}
    for f in flows_for(table, src, dst, size):
        for ip in (f["src"], f["dst"]):
            through[ip] = through.get(ip, 0) + f["bytes"]
    return max(n * 8 / (port_of[ip].gbps * 1e9 * scale) for ip, n in through.items())


def _alone(emu, transport: str, t: Transfer, repeats: int) -> list[float]:
    from testbed.emulation.transfers import run_transfers
    fcts = []
    for _ in range(repeats):
        one = SimpleNamespace(transfers=[t], bytes_total=t.bytes)
        row = run_transfers(emu, one, start_delay_s=0.05, transport=transport)[0]
        if row["verified"] and row["fct_ms"] is not None:
            fcts.append(row["fct_ms"] / 1000)
    return fcts


def isolated_transfers(emu, work, transport: str, repeats: int = ISOLATED_REPEATS) -> dict:
    """For each kind of transfer in ``work`` (by switches crossed), its first transfer
    carried alone ``repeats`` times: FCT over ideal (size over port rate + base round trip,
    the round trip being the fastest of a few one-byte-per-flow transfers on the same
    pair)."""
    table, kinds = emu.table, {}
    for t in work.transfers:
        kinds.setdefault(_kind(table, t.src, t.dst), t)
    ratios, per_kind = [], []
    for kind, t in sorted(kinds.items()):
        npair = len(flows_for(table, t.src, t.dst, 1))
        tiny = Transfer(t.request, t.src, t.dst, npair, 0.0, t.chunk)
        rtt = min(_alone(emu, transport, tiny, 3), default=0.0)
        ideal = ideal_s(table, emu.link_mbps, t.src, t.dst, t.bytes) + rtt
        mine = [fct / ideal for fct in _alone(emu, transport, Transfer(
            t.request, t.src, t.dst, t.bytes, 0.0, t.chunk), repeats)]
        ratios += mine
        per_kind.append({"switches": list(kind), "src": t.src, "dst": t.dst, "bytes": t.bytes,
                         "base_rtt_ms": round(rtt * 1000, 3),
                         "ideal_ms": round(ideal * 1000, 3),
                         "fct_over_ideal": [round(r, 4) for r in mine]})
    if not ratios:
        return {"kinds": per_kind, "p50": None, "p99": None}
    return {"kinds": per_kind, "p50": round(metrics.percentile(ratios, 50), 4),
            "p99": round(metrics.percentile(ratios, 99), 4), "n": len(ratios)}


def isolated_on_a_quiet_host(emu, work, transport: str, tries: int = ISOLATED_TRIES) -> dict:
    """:func:`isolated_transfers`, measured again, up to ``tries`` times in all, while the
    hypervisor took at least :data:`~testbed.core.fidelity.STEAL_ISOLATED` of the CPUs in a
    100 ms window of the measurement (:func:`least_stolen`)."""
    def once():
        with DatapathMonitor(None) as monitor:
            iso = isolated_transfers(emu, work, transport)
        return iso, monitor.steal_max()
    return least_stolen(once, tries)


def least_stolen(once, tries: int) -> dict:
    """``once()`` gives ``(record, steal)``; call it until the steal is under
    :data:`~testbed.core.fidelity.STEAL_ISOLATED` or ``tries`` calls were made: the record
    with the least steal, with its ``steal_max`` and the ``tries`` made.  The choice is made
    on the host's steal, never on what was measured."""
    from testbed.core.fidelity import STEAL_ISOLATED
    best = None
    for k in range(1, tries + 1):
        got, steal = once()
        if best is None or steal < best["steal_max"]:
            best = dict(got, steal_max=round(steal, 4))
        best["tries"] = k
        if steal < STEAL_ISOLATED:
            break
    return best


def wait_quiet(quiet_s: float, most_s: float, measure=None) -> tuple[bool, float]:
    """Watch the host in spans of ``quiet_s`` seconds until one passes with the hypervisor
    under :data:`~testbed.core.fidelity.STEAL_NOTED` of the CPUs in every 100 ms window, or
    ``most_s`` seconds have gone: ``(quiet, seconds waited)``.  ``measure(seconds)`` gives a
    span's busiest window's steal (by default a :class:`DatapathMonitor` of no process)."""
    from testbed.core.fidelity import STEAL_NOTED

    def watch(seconds):
        with DatapathMonitor(None) as monitor:
            time.sleep(seconds)
        return monitor.steal_max()
    measure = measure or watch
    waited = 0.0
    while True:
        steal = measure(quiet_s)
        waited += quiet_s
        if steal < STEAL_NOTED or waited >= most_s:
            return steal < STEAL_NOTED, waited
