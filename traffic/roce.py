"""RoCEv2-framed probes: Ethernet / IPv4 / UDP 4791 / InfiniBand BTH (UD SEND ONLY) with a
send timestamp as payload.  Capture tools (tcpdump, tshark, Wireshark) decode them as RoCE.

Sent from inside an emulated host (``python -m traffic.roce send ...``); a capture on the
receiving interface gives each probe's one-way latency (every namespace shares one clock).
"""
from __future__ import annotations

import argparse
import struct
import time

ROCE_PORT = 4791
OPCODE_UD_SEND_ONLY = 0x64


def probe(src_mac, dst_mac, src_ip, dst_ip, psn, qp=1, sport=49152, stamp=None):
    from scapy.all import IP, UDP, Ether, Raw
    from scapy.contrib.roce import BTH
    payload = struct.pack("!d", time.time() if stamp is None else stamp)
    return (Ether(src=src_mac, dst=dst_mac) / IP(src=src_ip, dst=dst_ip, ttl=64)
            / UDP(sport=sport, dport=ROCE_PORT) / BTH(opcode=OPCODE_UD_SEND_ONLY, dqpn=qp,
                                                        psn=psn) / Raw(payload))


def latencies(pcap_path) -> list[tuple[int, float]]:
    """``(psn, one-way latency in s)`` of every RoCE probe in a capture."""
    from scapy.all import UDP, rdpcap
    from scapy.contrib.roce import BTH
    out = []
    for pkt in rdpcap(str(pcap_path)):
        if UDP in pkt and pkt[UDP].dport == ROCE_PORT and BTH in pkt:
            raw = bytes(pkt[BTH].payload)
            if len(raw) >= 8:
                (sent,) = struct.unpack("!d", raw[:8])
                out.append((pkt[BTH].psn, float(pkt.time) - sent))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m traffic.roce")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send", help="send RoCEv2 probes out of one interface")
    for opt in ("--iface", "--src-mac", "--dst-mac", "--src-ip", "--dst-ip"):
        s.add_argument(opt, required=True)
    s.add_argument("--count", type=int, default=10)
    s.add_argument("--gap-ms", type=float, default=10.0)
    s.add_argument("--qp", type=int, default=1)
    args = p.parse_args(argv)
    from scapy.all import conf
    sock = conf.L2socket(iface=args.iface)
    try:
        for psn in range(args.count):
            sock.send(probe(args.src_mac, args.dst_mac, args.src_ip, args.dst_ip, psn, args.qp))
            time.sleep(args.gap_ms / 1000.0)
    finally:
        sock.close()


if __name__ == "__main__":
    main()
