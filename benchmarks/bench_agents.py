"""KV transfer agents: isolated-transfer FCT against size / shaped rate, and the agents' CPU
under a PD workload, on ZCube n=4 and ROFT 4x4 at 100 Mb/s NICs (root).

    sudo .venv/bin/python -m benchmarks.bench_agents [--quick]

An isolated transfer on ZCube is striped over two ports (each half the NIC rate), on ROFT it
uses one port at the NIC rate: ideal FCT = size / NIC rate (payload only; TCP/IP headers
alone cost about 3%).  Figures and targets: FCT / ideal of an isolated 5 MB transfer (three
each) under 1.10, of a 1 MB one under 1.20 (the handshake and slow start weigh more); the
agents' CPU per host while carrying 80 requests (cross-rail, TP4 to TP4) under 5% of one
core, every transfer verified.  ``--quick`` (about a minute): 5 MB only, and 40 requests.
"""
import argparse
import os
import time
from types import SimpleNamespace

from benchmarks.common import limit, need_root, target
from testbed.emulation.emulation import Emulation
from testbed.emulation.ovs import Ovs
from testbed.emulation.transfers import run_transfers
from topologies import roft, zcube
from traffic.arrivals import poisson
from traffic.models import get_model
from traffic.placement import deploy
from traffic.types import Scale, Transfer
from traffic.workload import build_workload

NIC_MBPS = 100.0
TARGETS = {1_000_000: 1.20, 5_000_000: 1.10}       # FCT / ideal, by size in bytes
CPU_SHARE = 0.05                                    # of one core, per host at most


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def isolated(emu, src, dst, size, repeat=3):
    ratios = []
    for k in range(repeat):
        w = SimpleNamespace(transfers=[Transfer(k, src, dst, size, 0.0)], bytes_total=size)
        with limit(60, f"{emu.fabric.label}: an isolated {size / 1e6:g} MB transfer"):
            row = run_transfers(emu, w, start_delay_s=0.3)[0]
        ideal_ms = size * 8 / (NIC_MBPS * 1e6) * 1000
        ratios.append(row["fct_ms"] / ideal_ms)
    return ratios


def workload(emu, fab, requests: int) -> None:
    """``requests`` PD requests at 8/s carried by the agents: their CPU per host."""
    f = NIC_MBPS / 400_000
    w = build_workload(poisson(8, count=requests, seed=2, input_tokens=8192),
                       deploy(fab, 4, 4, placement="cross-rail"), get_model("llama3-70b"),
                       scale=Scale(f, f))
    before = {h: cpu_seconds(a.proc.pid) for h, a in emu.agents.items()}
    t0 = time.time()
    with limit(120 + requests, f"{fab.label}: {requests} requests"):
        rows = run_transfers(emu, w)
    wall = time.time() - t0
    cpu = {h: cpu_seconds(a.proc.pid) - before[h] for h, a in emu.agents.items()}
    verified = sum(r["verified"] for r in rows)
    share = max(cpu.values()) / wall
    print(f"{fab.label:<10} {requests} requests, {len(rows)} transfers, "
          f"{w.bytes_total / 1e6:.1f} MB in {wall:.1f} s: agent CPU per host "
          f"max {max(cpu.values()):.2f} s, mean {sum(cpu.values()) / len(cpu):.2f} s "
          f"({100 * share:.1f}% of one core at most); {verified}/{len(rows)} verified; "
          + target(share < CPU_SHARE and verified == len(rows),
                   f"under {CPU_SHARE:.0%} of a core, all verified"), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="5 MB transfers only, 40 requests")
    args = p.parse_args(argv)
    need_root()
    from mininet.log import setLogLevel
    setLogLevel("warning")
    sizes = (5_000_000,) if args.quick else (1_000_000, 5_000_000)
    with limit(60, "starting Open vSwitch"):
        ovs = Ovs().ensure()
    ovs.export_env()
    try:
        for fab, src, dst in ((zcube(4, 4), "g0", "g5"), (roft(4, 4), "g0", "g5")):
            with limit(600, f"{fab.label}: bring-up, transfers and teardown"), \
                    Emulation(fab, ovs=ovs, link_mbps=NIC_MBPS) as emu:
                for size in sizes:
                    r = isolated(emu, src, dst, size)
                    print(f"{fab.label:<10} isolated {size / 1e6:.0f} MB {src}->{dst}: FCT / "
                          f"(size / {NIC_MBPS:.0f} Mb/s) = {', '.join(f'{x:.3f}' for x in r)}; "
                          + target(max(r) < TARGETS[size], f"under {TARGETS[size]:.2f}"),
                          flush=True)
                workload(emu, fab, 40 if args.quick else 80)
    finally:
        ovs.stop()


if __name__ == "__main__":
    main()
