"""How faithful the emulated transfers are: FCT over ideal through the product's own agents,
alone and in bursts, per fabric and transport (root).

    sudo .venv/bin/python benchmarks/bench_fidelity.py [--link-mbps 100] [--size-scale 1]
        [--transports pool,tcp-per-transfer] [--bursts 10] [--repeats 10]

Sizes are the demo's: llama3-70b at 8,192 tokens, TP4 to TP4, KV scaled like the links
(1:4,000 at 100 Mb/s), i.e. 167,772 bytes per transfer (ZCube: 83,886 per port at half the
NIC rate; ROFT: all of it on one port at the NIC rate; both 13.4 ms at 100 Mb/s).
``--size-scale`` multiplies the sizes (time dilation when combined with a lower rate).
Ideal = size over port rate plus one base round trip (a tiny transfer on the same pair).

Alone: each kind of cross-rail pair carries one transfer at a time (``--repeats`` times).
Burst: ``--bursts`` requests, 0.5 s apart, each sending its four cross-rail transfers at
once (8 flows on ZCube, 4 on ROFT, no link shared).  Prints p50 / p90 / p99 / max of
FCT/ideal, and for each burst how late transfers started and the packet account (lost in
the emulator, dropped by shaped queues, retransmitted); asserts nothing.  For a before/after:
``ZCUBE_OVS_SEND_BUFFER=default`` leaves the datapath's send buffer at the kernel default and
``ZCUBE_AGENT_REALTIME=0`` leaves the agents' timer threads at normal priority.
"""
import argparse
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mininet.log import setLogLevel  # noqa: E402

from testbed.core.fidelity import lateness_ms  # noqa: E402
from testbed.core.metrics import percentile  # noqa: E402
from testbed.emulation.emulation import Emulation  # noqa: E402
from testbed.emulation.fidelity import ideal_s, isolated_transfers  # noqa: E402
from testbed.emulation.loss import PacketAccount  # noqa: E402
from testbed.emulation.ovs import Ovs  # noqa: E402
from testbed.emulation.transfers import open_connections, run_transfers  # noqa: E402
from topologies import roft, zcube  # noqa: E402
from traffic.placement import deploy  # noqa: E402
from traffic.types import Transfer  # noqa: E402

BYTES = 167_772          # llama3-70b, 8,192 tokens, TP4 -> TP4, 1:4,000


def burst_workload(fabric, size: int, bursts: int):
    pd = deploy(fabric, 4, 4, placement="cross-rail")
    pairs = list(zip(pd.prefill[0].gpus, pd.decode[0].gpus))
    transfers = [Transfer(b, s, d, size, 0.5 * b) for b in range(bursts) for s, d in pairs]
    return SimpleNamespace(transfers=transfers, bytes_total=size * len(transfers))


def figures(xs) -> str:
    if not xs:
        return "no verified transfers"
    return (f"p50 {percentile(xs, 50):.3f}  p90 {percentile(xs, 90):.3f}  "
            f"p99 {percentile(xs, 99):.3f}  max {max(xs):.3f}  (n={len(xs)})")


def burst(emu, work, transport: str, rtt: dict) -> tuple[list[float], str]:
    if transport == "pool":
        open_connections(emu, work)
    with PacketAccount(emu) as account:
        rows = run_transfers(emu, work, transport=transport)
    loss, late = account.summary() or {}, sorted(lateness_ms(rows) or [0.0])
    emulator = (f"start lateness p99 {percentile(late, 99):.2f} ms; packets lost in the emulator "
                f"{loss.get('lost_in_emulator')} of {loss.get('sent_packets')}, queue drops "
                f"{loss.get('queue_drops')}, TCP retransmissions "
                f"{loss.get('retransmitted_segments')}")
    return [r["fct_ms"] / 1000 / (ideal_s(emu.table, emu.link_mbps, r["src"], r["dst"],
                                          r["bytes"]) + rtt.get((r["src"], r["dst"]), 0.0))
            for r in rows if r["verified"]], emulator


def one_fabric(fab, ovs, args) -> None:
    size = int(BYTES * args.size_scale * args.link_mbps / 100)
    work = burst_workload(fab, size, args.bursts)
    with Emulation(fab, ovs=ovs, link_mbps=args.link_mbps) as emu:
        for transport in args.transports.split(","):
            if transport == "pool":
                open_connections(emu, work)
            iso = isolated_transfers(emu, work, transport, repeats=args.repeats)
            alone = [x for k in iso["kinds"] for x in k["fct_over_ideal"]]
            rtt = {}
            for k in iso["kinds"]:
                rtt[(k["src"], k["dst"])] = k["base_rtt_ms"] / 1000
            base = sum(rtt.values()) / len(rtt) if rtt else 0.0
            pairs = {(t.src, t.dst) for t in work.transfers}
            rtt = {p: rtt.get(p, base) for p in pairs}
            print(f"{fab.label:<10} {transport:<16} alone  {figures(alone)}  "
                  f"(base RTT {1000 * base:.2f} ms)", flush=True)
            fcts, emulator = burst(emu, work, transport, rtt)
            print(f"{fab.label:<10} {transport:<16} burst  {figures(fcts)}", flush=True)
            print(f"{'':<10} {'':<16}        {emulator}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--link-mbps", type=float, default=100.0)
    p.add_argument("--size-scale", type=float, default=1.0,
                   help="multiply the demo's transfer sizes (after scaling with the rate)")
    p.add_argument("--transports", default="pool,tcp-per-transfer")
    p.add_argument("--bursts", type=int, default=10)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--fabrics", default="zcube,roft")
    args = p.parse_args()
    setLogLevel("warning")
    ovs = Ovs().ensure()
    ovs.export_env()
    print(f"NIC {args.link_mbps:g} Mb/s, {int(BYTES * args.size_scale * args.link_mbps / 100):,}"
          f" bytes per transfer", flush=True)
    try:
        for name in args.fabrics.split(","):
            one_fabric(zcube(4, 4) if name == "zcube" else roft(4, 4), ovs, args)
    finally:
        ovs.stop()


if __name__ == "__main__":
    main()
