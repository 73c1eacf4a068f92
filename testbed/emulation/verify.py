"""Proof that an emulated fabric forwards exactly as computed: every switch connected, its
flows equal to the computed ones, every host pair reachable on every port pairing, and a
sample of paths traced from port counters.  What fails is tried once more, slowly, as an
overloaded machine loses probes and a wrong route never passes."""
from __future__ import annotations

import random
import time
from collections import defaultdict

from controller.flows import path_addresses
from controller.nvlink_hosts import through_hosts
from controller.pins import pin_flows
from controller.trace import (
    ROUND,
    TraceResult,
    burst_sizes,
    decompose,
    disjoint_groups,
    hops_of_path,
    judge,
)
from testbed.emulation.phase_timer import Phases
from topologies.nvlink import network_part

MAX_LISTED = 10
DEFAULT_TRACE_SAMPLE = 600
PROBE_PPS = 20000     # per sender; the userspace datapath drops longer line-rate bursts
# Reachability probes per second from all senders: first-pass probes make new datapath flows
# the one forwarding thread classifies, and 256 GPUs lost none at 6 kpps, up to 29% at 10.
PROBE_BUDGET_PPS = 6000
PACK = 4              # trace rounds run together when their paths share no hop
REACH_WAIT_S = 3.0    # for the last reachability probes, once every source has sent its own
# A probe still missing after this long with nothing moving is lost, so a wrong route shows
# in about this time (the datapath forwards a queued packet within milliseconds).
QUIET_S = 0.5


def _problem(report: dict, msg: str) -> None:
    report["problems_total"] += 1
    if len(report["problems"]) < MAX_LISTED:
        report["problems"].append(msg)


def probes_of(emu, pairs) -> list[tuple]:
    """``(src, dst, src_ip, dst_ip, label, candidate paths)`` for each pairing used."""
    out = []
    for s, d in pairs:
        by_pairing = defaultdict(list)
        for path in emu.table.paths(s, d):
            src_ip, dst_ip, sp, dp = path_addresses(emu.fabric, path)
            # traced over the cables it crosses (NVLink is no cable of the fabric)
            by_pairing[(sp, dp, src_ip, dst_ip)].append(network_part(emu.fabric, path))
        for (sp, dp, src_ip, dst_ip), cands in sorted(by_pairing.items()):
            out.append((s, d, src_ip, dst_ip, f"{s} -> {d} (port {sp}->{dp})", cands))
        # answers no pair of the reverse way sends (NVLink fabrics): probed home too
        home = defaultdict(list)
        for _, net, pairing, _ in through_hosts(emu.table, s, d):
            home[pairing].append(net[::-1])
        out += [(d, s, dst_ip, src_ip, f"{d} -> {s} (answering {src_ip})", cands)
                for (src_ip, dst_ip), cands in sorted(home.items())]
    return out


def _wait_counts(emu, expected: dict, timeout: float | None = None) -> dict:
    """Poll destination agents until every probe id has its packets, or until nothing has
    moved for QUIET_S (no probe arrived and no switch port counted a packet: whatever is
    missing is lost, not queued), or until ``timeout`` runs out."""
    by_host = defaultdict(set)
    for (host, pid) in expected:
        by_host[host].add(pid)
    got: dict = {}
    deadline = time.time() + (REACH_WAIT_S if timeout is None else timeout)
    seen, moved = None, time.time()
    while True:
        for host in by_host:
            emu.agent(host).post({"op": "counts"})
        for host, ids in by_host.items():
            counts = emu.agent(host).reply()["counts"]
            for pid in ids:
                got[(host, pid)] = counts.get(pid, 0)
        if all(got[k] >= v for k, v in expected.items()):
            return got
        now, state = time.time(), (dict(got), emu.kernel_counters())
        if state != seen:
            seen, moved = state, now
        if now > deadline or now - moved > QUIET_S:
            return got
        time.sleep(0.005)                # a probe crosses the fabric in a few ms


def check_flows(emu, report: dict) -> None:
    pinned = pin_flows(emu.table, emu.switch_flows, emu.pins)
    for name, sf in sorted(emu.switch_flows.items()):
        want = sf.describe() + [pf.describe() for pf in pinned.get(name, ())]
        want_groups = sf.describe_groups()
        got, got_groups = emu.installed_flows(name)
        report["flows_expected"] += len(want)
        report["flows_installed"] += len(got)
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        for m in missing[:2]:
            _problem(report, f"{name}: computed flow missing: {m}")
        for e in extra[:2]:
            _problem(report, f"{name}: flow not computed: {e}")
        if sorted(want_groups) != sorted(got_groups):
            _problem(report, f"{name}: groups differ: computed {want_groups}, "
                             f"installed {got_groups}")


def datapath_lost(emu) -> int | None:
    """Packets the OVS datapaths could not classify in time (``dpctl/show``'s lookups
    ``lost``, summed; None if unreadable): a sign of an overrun emulator."""
    try:
        out = emu.ovs.appctl("dpctl/show", check=False)
    except (OSError, RuntimeError):
        return None
    found = [int(w.split(":")[1]) for w in out.split() if w.startswith("lost:")]
    return sum(found) if found else None


def _reach(emu, probes, ids, budget: float = PROBE_BUDGET_PPS) -> dict:
    """Send one packet per probe (``ids`` name them), all sources at once, ``budget``
    packets per second from all of them together (each at most PROBE_PPS / 4); what
    arrived."""
    by_src = defaultdict(list)
    expected = {}
    rank = {h.name: k for k, h in enumerate(emu.fabric.hosts)}
    for i, (s, d, src_ip, dst_ip, _, _) in zip(ids, probes):
        turn = (rank[d] - rank[s]) % len(rank)
        by_src[s].append((turn, {"id": i, "src": src_ip, "dst": dst_ip, "count": 1}))
        expected[(d, i)] = 1
    # each source in its own rotation, so each destination hears from about one source at a
    # time: one shared order was an incast that overflowed port after port at 256 hosts
    by_src = {s: [p for _, p in sorted(batch, key=lambda tp: tp[0])]
              for s, batch in by_src.items()}
    pps = min(PROBE_PPS / 4, budget / max(1, len(by_src)))
    for s, batch in by_src.items():
        emu.agent(s).post({"op": "sendmany", "probes": batch, "pps": pps})
    for s in by_src:
        emu.agent(s).reply()
    return _wait_counts(emu, expected)


def check_reachability(emu, probes, report: dict, flows_ok: bool = True) -> None:
    """One packet per (pair, pairing), all sources at once; zero loss required (the lost
    ones sent again once, ten times more slowly, before they count).  ``datapath_lost``:
    what the datapath could not classify meanwhile; a failure's first problem says whether
    the emulator was overrun or routes are wrong (:func:`diagnosis`)."""
    ids = [f"r{i}" for i in range(len(probes))]
    before = datapath_lost(emu)
    got = _reach(emu, probes, ids)
    lost = [i for i, p in enumerate(probes) if got[(p[1], ids[i])] != 1]
    report["probes_retried"] = len(lost)
    if lost:
        again = [f"r{i}.again" for i in lost]
        got2 = _reach(emu, [probes[i] for i in lost], again, PROBE_BUDGET_PPS / 10)
        got.update({(probes[i][1], ids[i]): got2[(probes[i][1], pid)]
                    for i, pid in zip(lost, again)})
    failed_pairs = set()
    for i, (s, d, src_ip, dst_ip, label, _) in enumerate(probes):
        if got[(d, ids[i])] != 1:
            failed_pairs.add((s, d))
            _problem(report, f"{label}: {src_ip} -> {dst_ip} got {got[(d, ids[i])]} of 1 probe")
    pairs = {(p[0], p[1]) for p in probes}
    report["pairs_tested"] = len(pairs)
    report["pairs_ok"] = len(pairs - failed_pairs)
    after = datapath_lost(emu)
    report["datapath_lost"] = after - before if None not in (before, after) else None
    if failed_pairs:                    # first in the list the console shows
        still = sum(1 for i in lost if got[(probes[i][1], ids[i])] != 1)
        report["problems"] = [diagnosis(len(lost), still, report["datapath_lost"],
                                        flows_ok)] + report["problems"][:MAX_LISTED - 1]
        report["problems_total"] += 1


def diagnosis(first: int, still: int, dropped: int | None, flows_ok: bool) -> str:
    """Why reachability probes were lost twice: ``first`` lost on the first try, ``still``
    on the second, ten times slower; ``dropped``: lookups the datapath could not classify
    meanwhile; ``flows_ok``: every switch holds exactly the computed flows."""
    seen = "" if dropped is None else f"; the datapath dropped {dropped:,} lookup(s)"
    if not flows_ok:
        return ("the switches' flows differ from the computed ones (listed): routes are "
                f"wrong{seen}")
    if still < first:
        return (f"{first - still:,} of {first:,} lost probe(s) arrived when sent ten times "
                f"more slowly and the switches hold exactly the computed flows: the "
                f"emulator was overrun, and the {still:,} still lost may be too{seen}")
    return ("the switches hold exactly the computed flows, yet these probes were lost at "
            f"both rates: a host's address, route or neighbour, or a port, is wrong{seen}")


def _trace_group(emu, batches, tags, hops, sport: int,
                 pps: float = PROBE_PPS) -> tuple[list, int]:
    """Rounds of path-trace probes run together (:func:`pack`), each source sending at
    ``pps``; per round, per probe (judgement, packets received, sent).  A round alone is
    judged on every hop; rounds together each on their own paths' hops, and packets on a
    hop of no round's paths fail them all (they are run again alone)."""
    before = emu.kernel_counters()
    expected, posted = {}, []
    sizes = burst_sizes(ROUND)
    for batch, tag in zip(batches, tags):
        for k, (s, d, src_ip, dst_ip, label, _) in enumerate(batch):
            sport = 40000 + (sport - 39999) % 20000
            emu.agent(s).post({"op": "send", "id": f"t{tag}.{k}", "src": src_ip, "dst": dst_ip,
                               "count": sizes[k], "sport": sport, "pps": pps})
            expected[(d, f"t{tag}.{k}")] = sizes[k]
            posted.append(s)
    for s in posted:
        emu.agent(s).reply()
    got = _wait_counts(emu, expected, timeout=2.0)
    after = emu.kernel_counters()
    deltas = {h: emu.hop_counter(after, *h) - emu.hop_counter(before, *h) for h in hops}
    owned = [set(hops)] if len(batches) == 1 else [_hops(batch) for batch in batches]
    stray = set(hops).difference(*owned)
    off = sorted(h for h in stray if deltas[h] > 2)
    out = []
    for batch, tag, own in zip(batches, tags, owned):
        crossed, repeated = decompose({h: deltas[h] for h in own}, len(batch))
        out.append([(judge(p[4], p[5], crossed[k], repeated[k]) if not off else
                     TraceResult(False, None, f"{p[4]}: packets on {off[0][0]}->{off[0][1]}, "
                                              f"on no probe's path"),
                     got[(p[1], f"t{tag}.{k}")], sizes[k]) for k, p in enumerate(batch)])
    return out, sport


def _hops(batch) -> set:
    """The directed hops of every candidate path of a round's probes."""
    return {h for probe in batch for path in probe[5] for h in hops_of_path(path)}


def pack(rounds, most: int = PACK) -> list[list[int]]:
    """Rounds that can run together, in order: no two of a group share a hop of their
    candidate paths, so each round's counters are its own; at most ``most`` per group."""
    return disjoint_groups([_hops(batch) for batch in rounds], most)


def settle(emu, timeout: float = 2.0) -> bool:
    """Wait until no switch port's counters move for 20 ms (a probe still queued somewhere
    would be counted in a trace round and taken for a wrong path); False on timeout."""
    deadline, last = time.time() + timeout, emu.kernel_counters()
    while time.time() < deadline:
        time.sleep(0.02)
        now = emu.kernel_counters()
        if now == last:
            return True
        last = now
    return False


def trace_paths(emu, probes, report: dict, progress=None) -> None:
    hops = sorted({(link.a, link.b) for link in emu.fabric.links}
                  | {(link.b, link.a) for link in emu.fabric.links})
    rounds = [probes[i:i + ROUND] for i in range(0, len(probes), ROUND)]
    sport, report["rounds_retried"] = 40000, 0
    for group in pack(rounds):
        results, sport = _trace_group(emu, [rounds[r] for r in group], list(map(str, group)),
                                      hops, sport)
        for r, res in zip(group, results):
            if not all(one.ok and got == sent for one, got, sent in res):
                report["rounds_retried"] += 1
                settle(emu)
                [res], sport = _trace_group(emu, [rounds[r]], [f"{r}.again"], hops, sport,
                                            PROBE_PPS / 10)
            _record(report, res, rounds[r])
            if progress:
                progress(len(rounds[r]))


def _record(report: dict, results, batch) -> None:
    for (res, got, sent), (s, d, src_ip, dst_ip, label, cands) in zip(results, batch):
        report["paths_traced"] += 1
        if res.ok and got == sent:
            report["paths_ok"] += 1
        elif not res.ok:
            _problem(report, res.message)
        else:
            _problem(report, f"{label}: {got} of {sent} probe packets arrived")


def verify_emulation(emu, sample: int | None = None, seed: int = 0, progress=None) -> dict:
    from testbed.core.live_state import current as live
    live.phase("verification")
    try:
        return _verify(emu, sample, seed, progress)
    finally:
        live.phase("idle")


def _verify(emu, sample: int | None, seed: int, progress) -> dict:
    t0 = time.time()
    fab = emu.fabric
    report = {"switches": len(fab.switches), "switches_connected": 0, "flows_expected": 0,
              "flows_installed": 0, "pairs_tested": 0, "pairs_ok": 0, "paths_traced": 0,
              "paths_ok": 0, "bringup_s": round(emu.bringup_s or 0.0, 2),
              "bringup_phases_s": emu.phases.to_dict(),
              "problems": [], "problems_total": 0}
    phase = Phases()
    with phase("switches"):
        for agent in emu.each_agent():
            agent.post({"op": "reset"})
        for agent in emu.each_agent():
            agent.reply()
        status = emu.status()["switches"]
    report["switches_connected"] = sum(1 for s in status.values() if s["connected"])
    for name, s in sorted(status.items()):
        if not s["connected"]:
            _problem(report, f"{name}: not connected to the controller")
    with phase("flows"):
        check_flows(emu, report)
    with phase("reachability"):
        probes = probes_of(emu, list(emu.table.pairs()))
        check_reachability(emu, probes, report, flows_ok=report["problems_total"] == 0)
    limit = DEFAULT_TRACE_SAMPLE if sample is None else sample
    crossing = [p for p in probes if p[5][0]]           # inside a server: no cable to trace
    traced = crossing if not limit or limit >= len(crossing) else \
        random.Random(seed).sample(crossing, limit)
    with phase("trace"):
        settle(emu)
        trace_paths(emu, traced, report, progress)
    report["verify_s"] = round(time.time() - t0, 2)
    report["verify_phases_s"] = phase.to_dict()
    report["ok"] = report["problems_total"] == 0
    return report
