"""Emulation speed and shaping figures (root).  Prints figures; asserts nothing.

    sudo .venv/bin/python benchmarks/bench_emulation.py [--quick | --scale]

1. ZCube n=4 (8 switches, 16 dual-homed hosts, 48 links) from nothing to verified, next to
   stock Mininet + ryu.app.simple_switch_13 reaching pingall on a loop-free tree of 16 hosts.
2. ZCube n=8 (16 switches, 64 hosts, 192 links) and ROFT 8x8 (64 GPUs): up + verify.
3. Shaped goodput: one TCP flow against its shaped rate; four flows sharing one link
   (Jain's index of their rates).

Every fabric's line gives its phases, its teardown and the machine's peak memory in use
above what was in use before it (every process: OVS, hosts, agents, controller).
``--scale`` runs only the 256-GPU fabrics: ZCube n=16 (32 switches, 256 hosts, 768 links)
and ROFT 32x8 (256 GPUs).
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mininet.log import setLogLevel  # noqa: E402

from controller.verify import jain  # noqa: E402
from testbed.emulation.emulation import REPO, Emulation  # noqa: E402
from testbed.emulation.network import switch_intf  # noqa: E402
from testbed.emulation.ovs import Ovs  # noqa: E402
from testbed.emulation.state import free_ports  # noqa: E402
from topologies import roft, zcube  # noqa: E402


class PeakMemory:
    """The machine's memory in use (total - available) at its highest while the block runs,
    above what was in use when it began, sampled every 0.2 s."""

    def __enter__(self):
        import threading

        import psutil
        self._used = lambda: psutil.virtual_memory().total - psutil.virtual_memory().available
        self.base = self.peak = self._used()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self._used())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def mib(self) -> float:
        return (self.peak - self.base) / 2**20


def up_and_verify(label, fabric, ovs, **opts):
    t0 = time.time()
    emu = Emulation(fabric, ovs=ovs, link_mbps=100, **opts)
    with PeakMemory() as mem:
        with emu:
            report = emu.verify()
    total = time.time() - t0
    print(f"{label:<44} up {report['bringup_s']:5.1f} s + verify {report['verify_s']:5.1f} s "
          f"(+ teardown) = {total:5.1f} s; pairs {report['pairs_ok']}/{report['pairs_tested']}, "
          f"paths {report['paths_ok']}/{report['paths_traced']}, "
          f"{'ok' if report['ok'] else 'FAILED'}")
    print(f"{'':<44} bring-up: {emu.phases.line()}")
    print(f"{'':<44} verify: {report['verify_phases_s']}")
    print(f"{'':<44} teardown {emu.teardown.total():.1f} s: {emu.teardown.line()}")
    print(f"{'':<44} peak memory in use +{mem.mib:,.0f} MiB; "
          f"probes retried {report['probes_retried']}")
    return report["bringup_s"] + report["verify_s"]


def stock_mininet_pingall(ovs):
    """Stock Mininet: TreeTopo(depth=2, fanout=4) = 16 hosts, simple_switch_13, pingall."""
    from functools import partial

    from mininet.net import Mininet
    from mininet.node import OVSSwitch, RemoteController
    from mininet.topolib import TreeTopo
    port, rest = free_ports(2)
    ctl = subprocess.Popen([sys.executable, "-W", "ignore", "-m", "controller.launch",
                            "--app", "ryu.app.simple_switch_13", "--of-port", str(port),
                            "--rest-port", str(rest)], cwd=REPO,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    net = None
    try:
        time.sleep(0.5)
        net = Mininet(topo=TreeTopo(depth=2, fanout=4),
                      switch=partial(OVSSwitch, datapath="user", protocols="OpenFlow13"),
                      controller=partial(RemoteController, ip="127.0.0.1", port=port),
                      waitConnected=True)
        net.start()
        loss = net.pingAll(timeout=2)
        while loss > 0 and time.time() - t0 < 60:       # first pings flood and learn
            loss = net.pingAll(timeout=2)
        dt = time.time() - t0
    finally:
        if net is not None:
            net.stop()
        ctl.terminate()
        ctl.wait()
    print(f"{'stock Mininet tree 16 hosts + simple_switch_13':<44} pingall clean after "
          f"{dt:5.1f} s")
    return dt


def iperf(client, server_ip, port, seconds, bind=None):
    extra = f" -B {bind}" if bind else ""
    out = client.cmd(f"iperf3 -c {server_ip} -p {port} -t {seconds} -J{extra}")
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6


def shaped_goodput(ovs):
    rate = 100.0
    with Emulation(roft(4, 2), ovs=ovs, link_mbps=rate) as emu:
        fab = emu.fabric
        dst = emu.net.get("g0")
        dst_ip = fab.host("g0").ports[0].ip
        pidfiles = []
        for k in range(5):
            pf = f"/tmp/zcube-bench-iperf3-{k}.pid"
            pidfiles.append(pf)
            dst.cmd(f"iperf3 -s -1 -D -p {5201 + k} --pidfile {pf}")
        time.sleep(0.5)
        one = iperf(emu.net.get("g2"), dst_ip, 5201, 5)
        print(f"{'one TCP flow, link shaped to 100 Mb/s':<44} {one:6.1f} Mb/s = "
              f"{100 * one / rate:5.1f}% of the shaped rate")
        # four senders on other servers share g0's one 100 Mb/s link
        senders = ["g2", "g4", "g6", "g3"]
        # all four run together; their shares are read from the switch ports where each
        # enters the fabric, over a common 5 s window after a 3 s start-up
        procs = [emu.net.get(h).popen(["iperf3", "-c", dst_ip, "-p", str(5202 + i), "-t", "10"],
                                      stdout=subprocess.DEVNULL)
                 for i, h in enumerate(senders)]
        ports = [switch_intf(*fab.attachment(h, 0)) for h in senders]
        time.sleep(3)
        before = emu.port_counters("bytes")
        time.sleep(5)
        after = emu.port_counters("bytes")
        rates = [(after[p][0] - before[p][0]) * 8 / 5 / 1e6 for p in ports]
        for p in procs:
            p.wait()
        for pf in pidfiles:
            pid = dst.cmd(f"cat {pf} 2>/dev/null").strip()
            if pid.isdigit():
                dst.cmd(f"kill {pid}")
            dst.cmd(f"rm -f {pf}")
    print(f"{'four TCP flows into one 100 Mb/s link':<44} "
          f"{', '.join(f'{r:.1f}' for r in rates)} Mb/s (offered, at their ingress ports); "
          f"sum {sum(rates):.1f}; Jain {jain(rates):.3f}")


def main():
    quick = "--quick" in sys.argv
    setLogLevel("warning")
    ovs = Ovs().ensure()
    ovs.export_env()
    if "--scale" in sys.argv:
        try:
            up_and_verify("zcube n=16 (256 hosts, 768 links)", zcube(16, 8), ovs)
            up_and_verify("roft 32x8 (256 GPUs)", roft(32, 8), ovs)
        finally:
            ovs.stop()
        return
    try:
        ours = up_and_verify("zcube n=4, policy zcube (to verified)", zcube(4, 4), ovs)
        stock = stock_mininet_pingall(ovs)
        print(f"{'ratio (testbed verified / stock pingall)':<44} {ours / stock:5.2f}")
        if not quick:
            up_and_verify("zcube n=8 (64 hosts, 192 links)", zcube(8, 8), ovs)
            up_and_verify("roft 8x8 (64 GPUs)", roft(8, 8), ovs)
        shaped_goodput(ovs)
    finally:
        ovs.stop()


if __name__ == "__main__":
    main()
