"""How faithful the emulated transfers are: FCT over ideal through the product's own agents,
alone and in bursts, per fabric and transport (root).

    sudo .venv/bin/python -m benchmarks.bench_fidelity [--link-mbps 100] [--size-scale 1]
        [--transports pool,tcp-per-transfer] [--bursts 10] [--repeats 10] [--quick]

Sizes are the demo's: llama3-70b at 8,192 tokens, TP4 to TP4, KV scaled like the links
(1:4,000 at 100 Mb/s), i.e. 167,772 bytes per transfer (ZCube: 83,886 per port at half the
NIC rate; ROFT: all of it on one port at the NIC rate; both 13.4 ms at 100 Mb/s).
``--size-scale`` multiplies the sizes (time dilation when combined with a lower rate).
Ideal = size over port rate plus one base round trip (a tiny transfer on the same pair).

Alone: each kind of cross-rail pair carries one transfer at a time (``--repeats`` times).
Burst: ``--bursts`` requests, 0.5 s apart, each sending its four cross-rail transfers at
once (8 flows on ZCube, 4 on ROFT, no link shared).  Figures: p50 / p90 / p99 / max of
FCT/ideal, and for each burst how late transfers started and the packet account (lost in
the emulator, dropped by shaped queues, retransmitted).  Targets, for the kept-open
connections (``pool``, the product's transport): alone p99 under 1.25, burst p90 under
1.30; ``tcp-per-transfer`` is the reference without them (its burst p90 was 1.8-1.9).
``--quick`` (about a minute): pool only, 5 bursts, 5 repeats.
"""
import argparse
from types import SimpleNamespace

from benchmarks.common import limit, need_root, target
from testbed.core.fidelity import lateness_ms
from testbed.core.metrics import percentile
from testbed.emulation.emulation import Emulation
from testbed.emulation.isolated import ideal_s, isolated_transfers
from testbed.emulation.ovs import Ovs
from testbed.emulation.packet_account import PacketAccount
from testbed.emulation.transfers import open_connections, run_transfers
from topologies import roft, zcube
from traffic.placement import deploy
from traffic.types import Transfer

BYTES = 167_772          # llama3-70b, 8,192 tokens, TP4 -> TP4, 1:4,000
TARGETS = {"alone": (99, 1.25), "burst": (90, 1.30)}     # pool: percentile, FCT / ideal


def burst_workload(fabric, size: int, bursts: int):
    pd = deploy(fabric, 4, 4, placement="cross-rail")
    pairs = list(zip(pd.prefill[0].gpus, pd.decode[0].gpus))
    transfers = [Transfer(b, s, d, size, 0.5 * b) for b in range(bursts) for s, d in pairs]
    return SimpleNamespace(transfers=transfers, bytes_total=size * len(transfers))


def figures(xs, transport: str, kind: str) -> str:
    """The percentiles of FCT / ideal ``xs``, with the target where ``transport`` has one."""
    if not xs:
        return "no verified transfers; " + target(False, "verified transfers")
    said = (f"p50 {percentile(xs, 50):.3f}  p90 {percentile(xs, 90):.3f}  "
            f"p99 {percentile(xs, 99):.3f}  max {max(xs):.3f}  (n={len(xs)})")
    if transport != "pool":
        return said + "; no target (the reference)"
    q, most = TARGETS[kind]
    return said + "; " + target(percentile(xs, q) < most, f"p{q} under {most:.2f}")


def burst(emu, work, transport: str, rtt: dict) -> tuple[list[float], str]:
    if transport == "pool":
        open_connections(emu, work)
    with PacketAccount(emu) as account, limit(60 + len(work.transfers), "a burst"):
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
    with limit(900, f"{fab.label}: bring-up, transfers and teardown"), \
            Emulation(fab, ovs=ovs, link_mbps=args.link_mbps) as emu:
        for transport in args.transports.split(","):
            if transport == "pool":
                open_connections(emu, work)
            with limit(60 + 10 * args.repeats, f"{fab.label}: isolated transfers"):
                iso = isolated_transfers(emu, work, transport, repeats=args.repeats)
            alone = [x for k in iso["kinds"] for x in k["fct_over_ideal"]]
            rtt = {}
            for k in iso["kinds"]:
                rtt[(k["src"], k["dst"])] = k["base_rtt_ms"] / 1000
            base = sum(rtt.values()) / len(rtt) if rtt else 0.0
            pairs = {(t.src, t.dst) for t in work.transfers}
            rtt = {p: rtt.get(p, base) for p in pairs}
            print(f"{fab.label:<10} {transport:<16} alone  (base RTT {1000 * base:.2f} ms)  "
                  f"{figures(alone, transport, 'alone')}", flush=True)
            fcts, emulator = burst(emu, work, transport, rtt)
            print(f"{fab.label:<10} {transport:<16} burst  "
                  f"{figures(fcts, transport, 'burst')}", flush=True)
            print(f"{'':<10} {'':<16}        {emulator}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--link-mbps", type=float, default=100.0)
    p.add_argument("--size-scale", type=float, default=1.0,
                   help="multiply the demo's transfer sizes (after scaling with the rate)")
    p.add_argument("--transports", default="pool,tcp-per-transfer")
    p.add_argument("--bursts", type=int, default=10)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--fabrics", default="zcube,roft")
    p.add_argument("--quick", action="store_true", help="pool only, 5 bursts, 5 repeats")
    args = p.parse_args(argv)
    if args.quick:
        args.transports, args.bursts, args.repeats = "pool", 5, 5
    bad = set(args.transports.split(",")) - {"pool", "tcp-per-transfer"}
    if bad or set(args.fabrics.split(",")) - {"zcube", "roft"}:
        p.error("--transports takes pool and tcp-per-transfer, --fabrics zcube and roft")
    need_root()
    from mininet.log import setLogLevel
    setLogLevel("warning")
    with limit(60, "starting Open vSwitch"):
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
