"""How big are the segments a host hands its NIC port with ``large_segments``, and does
the connection's minimum RTT set them (root)?

    sudo .venv/bin/python benchmarks/bench_segments.py [--mbps 25] [--transfers 8]
        [--rtt-logs 9,14,20] [--bring-ups 2]

Linux adds up to 64 KB to a TCP segment when the connection's minimum RTT is under
2**tcp_tso_rtt_log us, and halves the bonus for each doubling above it (default 9: 512 us).
A whole 64 KB segment takes 21 ms to cross each shaped port at 25 Mb/s, so only a
connection's small packets (its handshake, the framing) give RTT samples under the
testbed's 16 ms (network.TSO_RTT_LOG).  For each ``tcp_tso_rtt_log``
(``$ZCUBE_TSO_RTT_LOG``), brings up ROFT 4x4 (ECMP) ``--bring-ups`` times and carries
``--transfers`` 2 MB transfers, one at a time, from g0 to g5 (three switches) over the
kept-open connection; prints, per transfer, the bytes per packet the sender's IP layer sent
and the connection's minimum RTT (``ss -ti``).  Asserts nothing.
"""
import argparse
import os
import re
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mininet.log import setLogLevel  # noqa: E402

from testbed.emulation.emulation import Emulation  # noqa: E402
from testbed.emulation.loss import snmp  # noqa: E402
from testbed.emulation.ovs import Ovs  # noqa: E402
from testbed.emulation.transfers import run_transfers  # noqa: E402
from topologies import roft  # noqa: E402
from traffic.kvpool import POOL_PORT  # noqa: E402
from traffic.types import Transfer  # noqa: E402

SRC, DST, SIZE = "g0", "g5", 2_000_000


def min_rtt_ms(emu) -> list[float]:
    """The minimum RTT (ms) of each of the sender's connections to the pool port."""
    out = emu.host_cmd(SRC, f"ss -tin state established '( dport = :{POOL_PORT} )'")
    return [float(x) for x in re.findall(r"minrtt:([\d.]+)", out)]


def one_bring_up(ovs, mbps: float, transfers: int) -> list[tuple]:
    work = SimpleNamespace(transfers=[Transfer(0, SRC, DST, SIZE, 0.0, 0)], bytes_total=SIZE)
    got = []
    with Emulation(roft(4, 4), policy="ecmp", link_mbps=mbps, ovs=ovs, log=lambda m: None,
                   large_segments=True) as emu:
        pid = emu.net.get(SRC).pid
        for _ in range(transfers):
            before = snmp(pid)["Ip.OutRequests"]
            row = run_transfers(emu, work, start_delay_s=0.2)[0]
            sent = snmp(pid)["Ip.OutRequests"] - before
            got.append((SIZE / sent, min_rtt_ms(emu), row["verified"]))
    return got


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mbps", type=float, default=25.0, help="NIC rate per GPU, Mb/s")
    p.add_argument("--transfers", type=int, default=8, help="transfers per bring-up")
    p.add_argument("--rtt-logs", default="9,14,20", help="tcp_tso_rtt_log values, comma list")
    p.add_argument("--bring-ups", type=int, default=2, help="bring-ups per value")
    args = p.parse_args()
    setLogLevel("warning")
    ovs = Ovs().ensure()
    ovs.export_env()
    try:
        for log in args.rtt_logs.split(","):
            os.environ["ZCUBE_TSO_RTT_LOG"] = log.strip()
            for k in range(args.bring_ups):
                got = one_bring_up(ovs, args.mbps, args.transfers)
                print(f"tso_rtt_log {log} ({2 ** int(log) / 1000:g} ms), bring-up {k + 1}: "
                      "KB per packet " + " ".join(f"{b / 1000:.1f}" for b, _, _ in got)
                      + "; min RTT ms " + " ".join(
                          "/".join(f"{r:.1f}" for r in rtts) for _, rtts, _ in got)
                      + ("" if all(v for _, _, v in got) else "; NOT ALL VERIFIED"),
                      flush=True)
    finally:
        os.environ.pop("ZCUBE_TSO_RTT_LOG", None)
        ovs.stop()


if __name__ == "__main__":
    main()
