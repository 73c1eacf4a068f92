"""KV transfer agents: isolated-transfer FCT against size/shaped rate, and agent CPU (root).

    sudo .venv/bin/python benchmarks/bench_agents.py

Prints figures; asserts nothing.  An isolated transfer on ZCube is striped over two ports
(each half the NIC rate), on ROFT it uses one port at the NIC rate: ideal FCT = size / NIC.
"""
import os
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mininet.log import setLogLevel  # noqa: E402

from testbed.emulation.emulation import Emulation  # noqa: E402
from testbed.emulation.ovs import Ovs  # noqa: E402
from testbed.emulation.transfers import run_transfers  # noqa: E402
from topologies import roft, zcube  # noqa: E402
from traffic.arrivals import poisson  # noqa: E402
from traffic.models import get_model  # noqa: E402
from traffic.placement import deploy  # noqa: E402
from traffic.types import Scale, Transfer  # noqa: E402
from traffic.workload import build_workload  # noqa: E402

NIC_MBPS = 100.0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def isolated(emu, src, dst, size, repeat=3):
    ratios = []
    for k in range(repeat):
        w = SimpleNamespace(transfers=[Transfer(k, src, dst, size, 0.0)], bytes_total=size)
        row = run_transfers(emu, w, start_delay_s=0.3)[0]
        ideal_ms = size * 8 / (NIC_MBPS * 1e6) * 1000
        ratios.append(row["fct_ms"] / ideal_ms)
    return ratios


def main():
    setLogLevel("warning")
    ovs = Ovs().ensure()
    ovs.export_env()
    try:
        for fab, src, dst in ((zcube(4, 4), "g0", "g5"), (roft(4, 4), "g0", "g5")):
            with Emulation(fab, ovs=ovs, link_mbps=NIC_MBPS) as emu:
                for size in (1_000_000, 5_000_000):
                    r = isolated(emu, src, dst, size)
                    print(f"{fab.label:<10} isolated {size / 1e6:.0f} MB {src}->{dst}: FCT / "
                          f"(size / {NIC_MBPS:.0f} Mb/s) = {', '.join(f'{x:.3f}' for x in r)}")
                f = NIC_MBPS / 400_000
                w = build_workload(poisson(8, count=80, seed=2, input_tokens=8192),
                                   deploy(fab, 4, 4, placement="cross-rail"),
                                   get_model("llama3-70b"), scale=Scale(f, f))
                before = {h: cpu_seconds(a.proc.pid) for h, a in emu.agents.items()}
                t0 = time.time()
                rows = run_transfers(emu, w)
                wall = time.time() - t0
                cpu = {h: cpu_seconds(a.proc.pid) - before[h] for h, a in emu.agents.items()}
                print(f"{fab.label:<10} 80 requests, {len(rows)} transfers, "
                      f"{w.bytes_total / 1e6:.1f} MB in {wall:.1f} s: agent CPU per host "
                      f"max {max(cpu.values()):.2f} s, mean {sum(cpu.values()) / len(cpu):.2f} s "
                      f"({100 * max(cpu.values()) / wall:.1f}% of one core at most); "
                      f"{sum(r['verified'] for r in rows)}/{len(rows)} verified")
    finally:
        ovs.stop()


if __name__ == "__main__":
    main()
