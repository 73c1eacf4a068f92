"""What the emulator did while it carried a workload (:mod:`testbed.core.fidelity` judges).

:class:`DatapathMonitor` samples, every 100 ms while the workload runs, the CPU time of each
thread of ovs-vswitchd (the userspace datapath forwards every packet on one thread), the
machine's idle time and the time a hypervisor took from its CPUs (steal), from /proc through
psutil.  :func:`isolated_transfers` carries, before
the workload, transfers of the workload's own sizes alone on the idle fabric, one kind of
port pairing at a time, and compares their FCT with the ideal; :func:`isolated_beside_probe`
does it beside the datapath probe, which says of each whether the datapath stalled or the
machine's timers woke late while it was in flight.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from types import SimpleNamespace

import psutil

from controller.pairings import flows_for
from testbed.core import metrics
from testbed.core.fidelity import in_flight
from testbed.emulation.sampling import Sampler
from traffic.types import Transfer

WINDOW_S = 0.1
# BBR holds a connection's congestion window at 4 segments while it probes for the round trip
# (PROBE_RTT: 200 ms at least, once its minimum RTT is 10 s old); a KV transfer engine's queue
# pair has no such phase, and isolated transfers that start or end in it run 1.3-1.7x
PROBING_CWND = 4
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


def _tcp(emu, hosts) -> list:
    """The TCP retransmissions and IP packets sent and received, summed over ``hosts``."""
    from testbed.emulation.loss import snmp
    got = [snmp(emu.host_pid(h)) for h in hosts]
    return [sum(c.get(k, 0) for c in got)
            for k in ("Tcp.RetransSegs", "Ip.OutRequests", "Ip.InReceives")]


def _ms(a, b):
    """From ``a`` to ``b`` (s) in ms, None where either is missing."""
    return None if a is None or b is None else round((b - a) * 1000, 3)


def _alone(emu, transport: str, t: Transfer, repeats: int) -> list[dict]:
    """Each verified carry of ``t`` alone: its FCT (s), when it was in flight (``at``, Unix
    times), when its first byte reached the receiver, the receiver's longest wait between
    two 64 KB blocks, and how long its verdict took to come back once the receiver had every
    byte (``first_byte_ms``, ``gap_ms``, ``verdict_ms``), its flows' smallest congestion
    window and pacing rate as it started and window as it ended (``cwnd``, ``pacing_mbps``,
    ``cwnd_end``; 4 is BBR's while it probes for the round trip), the TCP segments its two
    hosts retransmitted meanwhile, and the IP packets they sent that neither had received
    when it was collected (``unreceived``; nothing else is on the fabric: lost, or still in
    flight)."""
    from testbed.emulation.transfers import open_connections, run_transfers
    out = []
    for _ in range(repeats):
        one = SimpleNamespace(transfers=[t], bytes_total=t.bytes)
        if transport == "pool":
            open_connections(emu, one, seeded=False)
        before, t0 = _tcp(emu, (t.src, t.dst)), time.time() + 0.05
        row = run_transfers(emu, one, t0=t0, transport=transport)[0]
        retrans, sent, got = (b - a for a, b in zip(before, _tcp(emu, (t.src, t.dst))))
        if not row["verified"] or row["fct_ms"] is None:
            continue
        first, got_all = row.get("first_byte_s"), row.get("received_s")
        out.append({"fct": row["fct_ms"] / 1000,
                    "at": [round(t0 + row["start_s"], 6), round(t0 + row["end_s"], 6)],
                    "first_byte_ms": _ms(row["start_s"], first),
                    "verdict_ms": _ms(got_all, row["end_s"]),
                    "gap_ms": round((row.get("gap_s") or 0.0) * 1000, 3),
                    "cwnd": row.get("cwnd"), "cwnd_end": row.get("cwnd_end"),
                    "pacing_mbps": row.get("pacing_mbps"),
                    "retransmitted": retrans, "unreceived": max(0, sent - got)})
    return out


def isolated_transfers(emu, work, transport: str, repeats: int = ISOLATED_REPEATS) -> dict:
    """For each kind of transfer in ``work`` (by switches crossed), its first transfer
    carried alone ``repeats`` times: FCT over ideal (size over port rate + base round trip,
    the round trip being the fastest of a few one-byte-per-flow transfers on the same
    pair), and what :func:`_alone` says of each beside it (``at`` is for
    :func:`mark_isolated`)."""
    table, kinds = emu.table, {}
    for t in work.transfers:
        kinds.setdefault(_kind(table, t.src, t.dst), t)
    ratios, per_kind, carried = [], [], []
    for kind, t in sorted(kinds.items()):
        npair = len(flows_for(table, t.src, t.dst, 1))
        tiny = Transfer(t.request, t.src, t.dst, npair, 0.0, t.chunk)
        rtt = min((x["fct"] for x in _alone(emu, transport, tiny, 3)), default=0.0)
        ideal = ideal_s(table, emu.link_mbps, t.src, t.dst, t.bytes) + rtt
        mine = _alone(emu, transport, Transfer(t.request, t.src, t.dst, t.bytes, 0.0, t.chunk),
                      repeats)
        ratios += [x["fct"] / ideal for x in mine]
        carried += mine
        per_kind.append({"switches": list(kind), "src": t.src, "dst": t.dst, "bytes": t.bytes,
                         "base_rtt_ms": round(rtt * 1000, 3),
                         "ideal_ms": round(ideal * 1000, 3),
                         "fct_over_ideal": [round(x["fct"] / ideal, 4) for x in mine],
                         **{k: [x[k] for x in mine] for k in (
                             "at", "first_byte_ms", "gap_ms", "verdict_ms", "cwnd",
                             "cwnd_end", "pacing_mbps", "retransmitted", "unreceived")}})
    if not ratios:
        return {"kinds": per_kind, "p50": None, "p99": None}
    return {"kinds": per_kind, "p50": round(metrics.percentile(ratios, 50), 4),
            "p99": round(metrics.percentile(ratios, 99), 4), "n": len(ratios),
            "probing": probing(carried)["transfers"]}


def probing(rows) -> dict:
    """How many of ``rows`` (``cwnd``/``cwnd_end``: their flows' smallest congestion window
    as they started and ended) ran at a window of :data:`PROBING_CWND` or less at either end
    (BBR's PROBE_RTT; CUBIC's after a timeout), of those whose senders said it."""
    said = [r for r in rows if r.get("cwnd") is not None]
    hit = sum(1 for r in said if min(r["cwnd"], r.get("cwnd_end") or r["cwnd"]) <= PROBING_CWND)
    return {"transfers": hit, "of": len(said)}


def mark_isolated(iso: dict, records: list, wakes: list) -> dict:
    """Give each kind of ``iso`` (:func:`isolated_transfers`), per isolated transfer, the
    datapath probe's largest one-way delay among the datagrams in flight with it
    (``probe_ms``; ``records``: ``(sent, received)`` Unix times, received None when lost)
    and the latest of the probe's wake-ups overdue meanwhile (``wake_ms``; ``wakes``:
    ``(Unix time, ms late)``), 0.0 for none; and ``iso`` the largest of each
    (``probe_max_ms``, ``wake_max_ms``) and how many isolated transfers went through a
    datapath stall (``stalled``: a datagram over :data:`~testbed.core.fidelity.STALL_MS`)."""
    from testbed.core.fidelity import STALL_MS
    delays = [(s, r, (r - s) * 1000) for s, r in records if r is not None]
    late = overdue(wakes)
    for kind in iso["kinds"]:
        spans = [{"start_s": a, "end_s": b} for a, b in kind["at"]]
        mark_worst(spans, delays, "probe_ms")
        mark_worst(spans, late, "wake_ms")
        kind["probe_ms"] = [round(x["probe_ms"], 3) for x in spans]
        kind["wake_ms"] = [round(x["wake_ms"], 3) for x in spans]
    every = [(p, w) for k in iso["kinds"] for p, w in zip(k["probe_ms"], k["wake_ms"])]
    iso.update(probe_max_ms=max((p for p, _ in every), default=0.0),
               wake_max_ms=max((w for _, w in every), default=0.0),
               stalled=sum(1 for p, _ in every if p > STALL_MS))
    return iso


def isolated_beside_probe(emu, work, transport: str, repeats: int = ISOLATED_REPEATS,
                          path=None) -> tuple[dict, float]:
    """:func:`isolated_transfers` beside the datapath probe (:func:`mark_isolated`; on the
    caller's probe path, if given) and a monitor of the host: the record, and the largest
    share of the CPUs the hypervisor took in a 100 ms window meanwhile."""
    from testbed.emulation.dpprobe import DatapathProbe
    with DatapathMonitor(None) as monitor, DatapathProbe(emu, path=path) as probe:
        iso = isolated_transfers(emu, work, transport, repeats)
    return mark_isolated(iso, probe.records(), probe.wakes()), monitor.steal_max()


def isolated_on_a_quiet_host(emu, work, transport: str, tries: int = ISOLATED_TRIES,
                             path=None) -> dict:
    """:func:`isolated_beside_probe`, measured again, up to ``tries`` times in all, while the
    hypervisor took at least :data:`~testbed.core.fidelity.STEAL_ISOLATED` of the CPUs in a
    100 ms window of the measurement (:func:`least_stolen`)."""
    return least_stolen(lambda: isolated_beside_probe(emu, work, transport, path=path), tries)


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
    what stretches the emulator's transfers (2026-12-06, 20 s spans taken in turn: steal up
    to 0.10-0.27 of a 100 ms window with these wakers, at most 0.05 at rest or spinning but
    in one span each)."""
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
