"""iperf3 calibration of an emulated fabric: what one transfer gets on each port pairing and
what the whole emulator forwards; the guard refuses a workload above ``GUARD`` of that, as
it would measure the emulator, not the fabric."""
from __future__ import annotations

import json
import random
import subprocess
import time

from controller.addresses import path_addresses, path_links
from controller.pairings import flows_for
from topologies.nvlink import nvlink_hops

GUARD = 0.8
BASE_PORT = 5301


def _iperf_pairs(emu, pairs, seconds: float) -> list[float]:
    """Run one iperf3 flow per ``(src, dst, src_ip, dst_ip)``, all at once; Mb/s received."""
    servers, clients = [], []
    try:
        for k, (_, dst, _, _) in enumerate(pairs):
            servers.append(emu.popen(
                dst, ["iperf3", "-s", "-1", "-p", str(BASE_PORT + k)], "iperf3 server",
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_listening(emu, [(dst, BASE_PORT + k) for k, (_, dst, _, _) in enumerate(pairs)])
        for k, (src, _, src_ip, dst_ip) in enumerate(pairs):
            clients.append(emu.popen(
                src, ["iperf3", "-c", dst_ip, "-B", src_ip, "-p", str(BASE_PORT + k),
                      "-t", str(seconds), "-J"], "iperf3 client",
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace"))
        rates = []
        for proc in clients:
            out, _ = proc.communicate(timeout=seconds + 30)
            try:
                rates.append(json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6)
            except (ValueError, KeyError):
                rates.append(0.0)
        return rates
    finally:
        for p in servers + clients:
            if p.poll() is None:
                p.kill()
            p.wait()


def _listens(pid: int, port: int) -> bool:
    """A TCP socket listens on ``port`` in the network namespace of process ``pid``."""
    want = f":{port:04X}"
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        if any(c[1].endswith(want) and c[3] == "0A" for c in map(str.split, lines)):
            return True
    return False


def _wait_listening(emu, where, timeout: float = 3.0) -> None:
    """Until every ``(host, port)`` has its iperf3 server listening (or ``timeout``)."""
    pending = [(emu.host_pid(h), port) for h, port in where]
    deadline = time.time() + timeout
    while pending and time.time() < deadline:
        pending = [(pid, port) for pid, port in pending if not _listens(pid, port)]
        if pending:
            time.sleep(0.01)


def calibrate(emu, seconds: float = 2.0, seed: int = 0, per_path: bool = True) -> dict:
    """Both measurements (``per_path=False``: the aggregate only, ``paths`` left empty)."""
    fab, table = emu.fabric, emu.table
    scale = fab.scale_for(emu.link_mbps)

    def flow(s, d):
        f = flows_for(table, s, d, 1)[0]
        return (s, d, f["src"], f["dst"])

    def shaped(flow4):
        # the slowest NIC or NVLink the path's bytes all cross
        return min(g for _, g in path_links(fab, _first_path(table, *flow4))) * 1000 * scale

    hosts = [h.name for h in fab.hosts]
    paths = []
    for group in _disjoint(table, fab, per_path_flows(table, fab) if per_path else []):
        rates = _iperf_pairs(emu, [flow4 for flow4, _ in group], seconds)
        for (flow4, key), got in zip(group, rates):
            paths.append((key, {"src": flow4[0], "dst": flow4[1], "pairing": _label(key),
                                "mbps": round(got, 2), "shaped_mbps": round(shaped(flow4), 2)}))
    paths = [p for _, p in sorted(paths, key=lambda kp: kp[0])]
    # aggregate: a seeded permutation, every host sending one flow at once
    order = hosts[:]
    random.Random(seed).shuffle(order)
    flows = [flow(order[i], order[(i + 1) % len(order)]) for i in range(len(order))]
    from testbed.emulation.load_monitor import DatapathMonitor
    with DatapathMonitor(emu.vswitchd_pid()) as monitor:
        rates = _iperf_pairs(emu, flows, seconds)

    def switches(*flow4):
        return sum(1 for node in _first_path(table, *flow4) if fab.is_switch(node))
    # what the emulator forwarded, counted once per switch a byte crossed (its one
    # forwarding thread handles every packet at every switch)
    switch_mbps = sum(r * switches(*f) for r, f in zip(rates, flows))
    return {"paths": paths, "aggregate_mbps": round(sum(rates), 2),
            "aggregate_switch_mbps": round(switch_mbps, 2),
            "aggregate_shaped_mbps": round(sum(shaped(f) for f in flows), 2),
            "seconds": seconds, **datapath_ceiling(switch_mbps, seconds, monitor)}


def per_path_flows(table, fab) -> list[tuple]:
    """``((src, dst, src_ip, dst_ip), (src port, dst port, NVLink hand-overs))``: from the
    first host, the first pair that uses each NIC port pairing (each way over NVLink)."""
    hosts = [h.name for h in fab.hosts]
    todo, seen = [], set()
    for d in hosts[1:]:
        for f in flows_for(table, hosts[0], d, 1):
            path = _first_path(table, hosts[0], d, f["src"], f["dst"])
            key = table.port_pairing(path) + (nvlink_hops(fab, path),)
            if key not in seen:
                seen.add(key)
                todo.append(((hosts[0], d, f["src"], f["dst"]), key))
    return todo


def _first_path(table, s: str, d: str, src_ip: str, dst_ip: str) -> tuple:
    """The first of the pair's paths taken with these addresses."""
    return next(tuple(p) for p in table.paths(s, d)
                if path_addresses(table.fabric, p)[:2] == (src_ip, dst_ip))


def _label(key) -> str:
    """``0->1``, or ``0->1 over NVLink`` for a pairing that hands over, or ``NVLink``
    inside a server."""
    sp, dp, hops = key
    if sp < 0:
        return "NVLink"
    return f"{sp}->{dp}" + (" over NVLink" if hops else "")


def _disjoint(table, fab, todo) -> list[list]:
    """``todo``'s flows in groups, in order, whose candidate paths share no directed hop."""
    from controller.trace import disjoint_groups, hops_of_path

    def hops(item):
        (s, d, src_ip, dst_ip), _ = item
        return {h for p in table.paths(s, d) if path_addresses(fab, p)[:2] == (src_ip, dst_ip)
                for h in hops_of_path(p)}
    return [[todo[k] for k in g] for g in disjoint_groups([hops(item) for item in todo])]


def datapath_ceiling(switch_mbps: float, seconds: float, monitor) -> dict:
    """What the datapath's busiest thread spent while the aggregate ran, and the forwarding
    it could do with a whole core at that cost per byte: the aggregate is the datapath's
    ceiling only when that thread was saturated; at low rates the permutation's own flows
    (sharing links, TCP) hold it back first.  ``datapath_share`` is the thread's CPU over
    the iperf3 seconds (the few tenths of a second around them, idle, count too: a little
    high, so the ceiling a little low); ``datapath_ceiling_switch_mbps`` is None without a
    measurement."""
    cpu_s = sum(monitor.busiest) * monitor.window_s
    share = cpu_s / seconds if seconds > 0 else 0.0
    if not monitor.busiest or share <= 0.05:
        return {"datapath_share": round(share, 4) if monitor.busiest else None,
                "datapath_ceiling_switch_mbps": None}
    return {"datapath_share": round(share, 4),
            "datapath_ceiling_switch_mbps": round(switch_mbps / min(share, 1.0), 2)}


def offered_mbps(workload) -> float:
    """Average offered load of a workload: its bytes over its arrival span (>= 1 s)."""
    times = [s.prefill_end_s for s in workload.schedule] or [0.0]
    span = max(1.0, max(times) - min(s.request.arrival_s for s in workload.schedule))
    return workload.bytes_total * 8 / span / 1e6


def guard(cal: dict, offered: float) -> str | None:
    """None when the offered load fits; otherwise the refusal, with the numbers."""
    limit = GUARD * cal["aggregate_mbps"]
    if offered <= limit:
        return None
    return (f"the run offers {offered:,.1f} Mb/s on average (KV transfers and any background), "
            f"more than {GUARD:.0%} of the "
            f"{cal['aggregate_mbps']:,.1f} Mb/s this machine's emulator forwarded in "
            f"calibration (all hosts at once; shaped total {cal['aggregate_shaped_mbps']:,.1f} "
            f"Mb/s): lower the load or --link-mbps, or pass --force")
