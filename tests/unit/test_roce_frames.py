"""RoCEv2 probe frames and latency extraction (pure, scapy)."""
import pytest

pytest.importorskip("scapy")

from traffic.roce import ROCE_PORT, latencies, probe  # noqa: E402


def test_probe_is_udp_4791_with_a_ud_send_only_bth():
    raw = bytes(probe("02:00:00:00:00:00", "02:01:00:00:00:05", "10.0.1.0", "10.1.1.5",
                      psn=7, qp=3, stamp=1.5))
    assert raw[12:14] == b"\x08\x00"                          # IPv4
    assert int.from_bytes(raw[36:38], "big") == ROCE_PORT     # UDP destination port
    bth = raw[42:54]
    assert bth[0] == 0x64                                     # opcode UD SEND ONLY
    assert int.from_bytes(bth[5:8], "big") == 3               # destination QP
    assert int.from_bytes(bth[9:12], "big") == 7              # PSN


def test_latencies_read_the_send_stamp_against_the_capture_time(tmp_path):
    from scapy.all import wrpcap
    pkts = []
    for psn, (sent, seen) in enumerate([(10.0, 10.002), (11.0, 11.0035)]):
        p = probe("02:00:00:00:00:00", "02:01:00:00:00:05", "10.0.1.0", "10.1.1.5", psn,
                  stamp=sent)
        p.time = seen
        pkts.append(p)
    wrpcap(str(tmp_path / "x.pcap"), pkts)
    got = latencies(tmp_path / "x.pcap")
    assert [psn for psn, _ in got] == [0, 1]
    assert [round(lat, 4) for _, lat in got] == [0.002, 0.0035]
