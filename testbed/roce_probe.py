"""RoCEv2 probes between two emulated hosts, captured at the receiver (tcpdump, pcap files
that tshark and Wireshark read), one per NIC port pairing the route table uses."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from traffic.roce import ROCE_PORT, latencies
from traffic.workload import percentile

from .emulation import REPO
from .network import host_intf
from .transfers import flows_for


def roce_probe(emu, src: str, dst: str, pcap_dir: str, count: int = 10) -> list[dict]:
    fab = emu.fabric
    port_of = {p.ip: p for h in fab.hosts for p in h.ports}
    os.makedirs(pcap_dir, exist_ok=True)
    results = []
    for f in flows_for(emu.table, src, dst, 1):
        sp, dp = port_of[f["src"]], port_of[f["dst"]]
        siface, diface = host_intf(src, sp.index), host_intf(dst, dp.index)
        pcap = os.path.join(pcap_dir, f"roce-{src}-p{sp.index}-{dst}-p{dp.index}.pcap")
        cap = emu.net.get(dst).popen(["tcpdump", "-i", diface, "-U", "-n", "-w", pcap,
                                      "udp", "port", str(ROCE_PORT)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        emu.record.add_pid(cap.pid, f"tcpdump {dst}")
        try:
            ready, _, _ = select.select([cap.stderr], [], [], 10)   # "listening on ..."
            if not ready or "listening" not in cap.stderr.readline():
                raise RuntimeError(f"tcpdump on {dst} {diface} did not start")
            time.sleep(0.3)                           # its filter is attached just after
            sender = emu.net.get(src).popen(
                [sys.executable, "-m", "traffic.roce", "send", "--iface", siface,
                 "--src-mac", sp.mac, "--dst-mac", dp.mac, "--src-ip", sp.ip,
                 "--dst-ip", dp.ip, "--count", str(count)], cwd=REPO,
                env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True)
            emu.record.add_pid(sender.pid, f"roce sender {src}")
            _, err = sender.communicate(timeout=60)
            if sender.returncode:
                raise RuntimeError(f"RoCE sender on {src} failed: {err.strip()[-300:]}")
            time.sleep(0.3)
        finally:
            cap.send_signal(signal.SIGINT)
            try:
                cap.wait(timeout=5)
            except subprocess.TimeoutExpired:
                cap.kill()
                cap.wait()
        lat = [l * 1000 for _, l in latencies(pcap)]
        results.append({"src": src, "dst": dst, "pairing": f"{sp.index}->{dp.index}",
                        "src_ip": sp.ip, "dst_ip": dp.ip, "sent": count, "received": len(lat),
                        "latency_ms": {"p50": round(percentile(lat, 50), 3),
                                       "max": round(max(lat), 3)} if lat else None,
                        "pcap": pcap})
    return results
