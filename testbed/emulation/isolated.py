"""Transfers of a workload's own sizes run alone on the idle fabric, to measure what the
emulator gives one transfer against its ideal time (:mod:`testbed.core.fidelity` judges)."""
from __future__ import annotations

import time
from types import SimpleNamespace

from controller.addresses import path_addresses, path_links
from controller.pairings import flows_for
from testbed.core import metrics
from testbed.emulation.load_monitor import DatapathMonitor, mark_worst, overdue
from topologies.nvlink import nvlink_hops
from traffic.types import Transfer

# BBR holds a connection's window at 4 segments while it probes for the round trip, which a
# queue pair never does; isolated transfers caught in it ran 1.3-1.7x their ideal time
PROBING_CWND = 4
ISOLATED_REPEATS = 5
# they calibrate the emulator, not the machine's host: measured again while the host is busy
ISOLATED_TRIES = 3


def _kind(table, src: str, dst: str) -> tuple:
    """A transfer's kind: switches and NVLink hand-overs of each path it is split over."""
    fab = table.fabric
    return tuple(sorted((sum(1 for n in p if fab.is_switch(n)), nvlink_hops(fab, p))
                        for p in table.paths(src, dst)))


def kinds_of(table, work) -> tuple:
    """The kinds of transfer in ``work`` (:func:`isolated_transfers` measures each)."""
    return tuple(sorted({_kind(table, t.src, t.dst) for t in work.transfers}))


def ideal_s(table, link_mbps: float, src: str, dst: str, size: int) -> float:
    """Size over port rate: the busiest NIC port's (or NVLink's) bytes (a transfer's flows
    through one port, as ``spray``'s lanes, add up) over its rate, at either end."""
    fab = table.fabric
    scale = fab.scale_for(link_mbps)
    paths = dict(reversed([(path_addresses(fab, p)[:2], p) for p in table.paths(src, dst)]))
    through: dict = {}
    rate: dict = {}
    for f in flows_for(table, src, dst, size):
        for key, gbps in path_links(fab, paths[(f["src"], f["dst"])]):
            through[key] = through.get(key, 0) + f["bytes"]
            rate[key] = gbps
    return max(n * 8 / (rate[k] * 1e9 * scale) for k, n in through.items())


def _tcp(emu, hosts) -> list:
    """The TCP retransmissions and IP packets sent and received, summed over ``hosts``."""
    from testbed.emulation.packet_account import snmp
    got = [snmp(emu.host_pid(h)) for h in hosts]
    return [sum(c.get(k, 0) for c in got)
            for k in ("Tcp.RetransSegs", "Ip.OutRequests", "Ip.InReceives")]


def _ms(a, b):
    """From ``a`` to ``b`` (s) in ms, None where either is missing."""
    return None if a is None or b is None else round((b - a) * 1000, 3)


def _alone(emu, transport: str, t: Transfer, repeats: int) -> list[dict]:
    """Each verified run of ``t`` alone: its FCT (s), when it was in flight (``at``, Unix
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
    run alone ``repeats`` times: FCT over ideal (size over port rate + base round trip,
    the round trip being the fastest of a few one-byte-per-flow transfers on the same
    pair), and what :func:`_alone` says of each beside it (``at`` is for
    :func:`mark_isolated`)."""
    table, kinds = emu.table, {}
    for t in work.transfers:
        kinds.setdefault(_kind(table, t.src, t.dst), t)
    ratios, per_kind, runs = [], [], []
    for kind, t in sorted(kinds.items()):
        npair = len(flows_for(table, t.src, t.dst, 1))
        tiny = Transfer(t.request, t.src, t.dst, npair, 0.0, t.chunk)
        rtt = min((x["fct"] for x in _alone(emu, transport, tiny, 3)), default=0.0)
        ideal = ideal_s(table, emu.link_mbps, t.src, t.dst, t.bytes) + rtt
        mine = _alone(emu, transport, Transfer(t.request, t.src, t.dst, t.bytes, 0.0, t.chunk),
                      repeats)
        ratios += [x["fct"] / ideal for x in mine]
        runs += mine
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
            "probing": probing(runs)["transfers"]}


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
    from testbed.emulation.stall_monitor import DatapathProbe
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
