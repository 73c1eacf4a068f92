"""RoCEv2 probes between two emulated hosts, one per NIC port pairing the route table uses,
captured at the receiver in pcap files that tshark and Wireshark read."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from controller.flows import path_addresses
from controller.pairings import flows_for
from testbed.core.metrics import percentile
from testbed.emulation.agents import REPO
from testbed.emulation.network import host_intf
from traffic.roce import ROCE_PORT, latencies


def _walk(fab, src: str, dst: str, deltas: dict, count: int):
    """The path the probes took: from ``src``, each step along the one hop whose packet
    counter grew by at least ``count``; None when that is not a single path to ``dst``."""
    crossed = {h for h, d in deltas.items() if d >= count}
    path, here = [src], src
    while here != dst and len(path) <= len(fab.switches) + 2:
        nxt = [v for (u, v) in crossed if u == here and v not in path]
        if len(nxt) != 1:
            return None
        here = nxt[0]
        path.append(here)
    return path if here == dst else None


def roce_probe(emu, src: str, dst: str, pcap_dir: str, count: int = 10) -> list[dict]:
    """Per port pairing: ``count`` RoCEv2 probes, the path they took through the switches
    (from the datapath's port counters, read before and after; the fabric is otherwise idle)
    and their one-way latency (from the receiver's capture)."""
    fab = emu.fabric
    hops = sorted({(c.a, c.b) for c in fab.links} | {(c.b, c.a) for c in fab.links})
    port_of = {p.ip: p for h in fab.hosts for p in h.ports}
    os.makedirs(pcap_dir, exist_ok=True)
    results = []
    for f in flows_for(emu.table, src, dst, 1):
        sp, dp = port_of[f["src"]], port_of[f["dst"]]
        siface, diface = host_intf(src, sp.index), host_intf(dst, dp.index)
        pcap = os.path.join(pcap_dir, f"roce-{src}-p{sp.index}-{dst}-p{dp.index}.pcap")
        cap = emu.popen(dst, ["tcpdump", "-i", diface, "--immediate-mode", "-U", "-n", "-w", pcap,
                              "udp", "port", str(ROCE_PORT)], "tcpdump",
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                        errors="replace")
        try:
            ready, _, _ = select.select([cap.stderr], [], [], 10)   # "listening on ..."
            if not ready or "listening" not in cap.stderr.readline():
                raise RuntimeError(f"tcpdump on {dst} {diface} did not start")
            time.sleep(0.3)                           # its filter is attached just after
            before = emu.port_counters()
            sender = emu.popen(
                src, [sys.executable, "-m", "traffic.roce", "send", "--iface", siface,
                      "--src-mac", sp.mac, "--dst-mac", dp.mac, "--src-ip", sp.ip,
                      "--dst-ip", dp.ip, "--count", str(count)], "roce sender", cwd=REPO,
                env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True, errors="replace")
            _, err = sender.communicate(timeout=60)
            if sender.returncode:
                raise RuntimeError(f"RoCE sender on {src} failed: {err.strip()[-300:]}")
            time.sleep(0.3)
            after = emu.port_counters()
        finally:
            cap.send_signal(signal.SIGINT)
            try:
                cap.wait(timeout=5)
            except subprocess.TimeoutExpired:
                cap.kill()
                cap.wait()
        lat = [s * 1000 for _, s in latencies(pcap)]
        deltas = {h: emu.hop_counter(after, *h) - emu.hop_counter(before, *h) for h in hops}
        path = _walk(fab, src, dst, deltas, count)
        results.append({"src": src, "dst": dst, "pairing": f"{sp.index}->{dp.index}",
                        "path": path, "computed": [list(p) for p in emu.table.paths(src, dst)
                                                   if path_addresses(fab, p)[:2] == (sp.ip, dp.ip)],
                        "src_ip": sp.ip, "dst_ip": dp.ip, "sent": count, "received": len(lat),
                        "latency_ms": {"p50": round(percentile(lat, 50), 3),
                                       "max": round(max(lat), 3)} if lat else None,
                        "pcap": pcap})
    return results
