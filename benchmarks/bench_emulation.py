"""Emulation speed and shaping figures (root).

    sudo .venv/bin/python -m benchmarks.bench_emulation [--quick | --scale]

Figures (wall-clock seconds) and their targets:

1. ZCube n=4 (8 switches, 16 dual-homed hosts, 48 links) from nothing to verified: under
   15 s; next to stock Mininet + ryu.app.simple_switch_13 reaching a clean pingall on a
   loop-free tree of 16 hosts (the reference), the ratio testbed / stock: under 1.0.
2. ZCube n=8 (16 switches, 64 hosts, 192 links): up + verify under 15 s, teardown under
   5 s; ROFT 8x8 (64 GPUs): up + verify under 90 s.
3. Shaped goodput: one TCP flow against its shaped rate, at least 95%; four flows sharing
   one link, Jain's index of their rates at least 0.95.

Every fabric's line gives its phases, its teardown and the machine's peak memory in use
above what was in use before it (every process: OVS, hosts, agents, controller).
``--quick`` (about a minute) runs 1 and 3; ``--scale`` only the 256-GPU fabrics, ZCube n=16
(32 switches, 256 hosts, 768 links) and ROFT 32x8, up + verify under 120 s each.  Each step
has a time limit; past it the benchmark tears down and stops with one line.
"""
import argparse
import json
import subprocess
import sys
import time

from benchmarks.common import end_process, fail, limit, need_root, target
from controller.verify import jain
from testbed.emulation.agents import REPO
from testbed.emulation.emulation import Emulation
from testbed.emulation.machine_state import free_ports
from testbed.emulation.network import switch_intf
from testbed.emulation.ovs import Ovs
from topologies import roft, zcube

LABEL = 44          # width of a line's label


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


def up_and_verify(label, fabric, ovs, up_s, down_s=None, limit_s=300):
    """Bring ``fabric`` up, verify it and tear it down; print the figures against the
    targets ``up_s`` (up + verify) and ``down_s`` (teardown); up + verify in seconds."""
    t0 = time.time()
    emu = Emulation(fabric, ovs=ovs, link_mbps=100)
    with PeakMemory() as mem, limit(limit_s, f"{label}: up, verify and teardown"):
        with emu:
            report = emu.verify()
    total = time.time() - t0
    took = report["bringup_s"] + report["verify_s"]
    print(f"{label:<{LABEL}} up {report['bringup_s']:5.1f} s + verify {report['verify_s']:5.1f} "
          f"s (+ teardown) = {total:5.1f} s; pairs {report['pairs_ok']}/"
          f"{report['pairs_tested']}, paths {report['paths_ok']}/{report['paths_traced']}, "
          f"{'ok' if report['ok'] else 'FAILED'}; "
          + target(report["ok"] and took < up_s, f"verified, up + verify under {up_s:g} s"))
    print(f"{'':<{LABEL}} bring-up: {emu.phases.line()}")
    print(f"{'':<{LABEL}} verify: {report['verify_phases_s']}")
    down = emu.teardown.total()
    print(f"{'':<{LABEL}} teardown {down:.1f} s: {emu.teardown.line()}"
          + (f"; {target(down < down_s, f'under {down_s:g} s')}" if down_s else ""))
    print(f"{'':<{LABEL}} peak memory in use +{mem.mib:,.0f} MiB; "
          f"probes retried {report['probes_retried']}", flush=True)
    return took


def stock_mininet_pingall(ovs) -> float:
    """Seconds for stock Mininet, TreeTopo(depth=2, fanout=4) (16 hosts, five userspace OVS
    switches) with ryu.app.simple_switch_13, from nothing to a clean pingall."""
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
        # Not Mininet's waitConnected, which waits (forever by default) for OVS's database to
        # mark each controller connected, a column ovs-vswitchd writes only once per
        # stats-update-interval (an hour on the testbed's own OVS, testbed/emulation/ovs.py):
        # the switches are judged connected by their flow tables instead.
        net = Mininet(topo=TreeTopo(depth=2, fanout=4),
                      switch=partial(OVSSwitch, datapath="user", protocols="OpenFlow13"),
                      controller=partial(RemoteController, ip="127.0.0.1", port=port),
                      build=False, waitConnected=False)
        with limit(90, "stock Mininet: building and starting its network"):
            net.build()
            net.start()
        with limit(30, "stock Mininet: switches taking simple_switch_13's table-miss flow"):
            wait_table_miss(ovs, [s.name for s in net.switches], ctl)
        with limit(60, "stock Mininet: a clean pingall"):
            while net.pingAll(timeout=1) > 0:       # the first pings flood and learn
                pass
        dt = time.time() - t0
    finally:
        stop_stock(net, ctl)
    print(f"{'stock Mininet tree 16 hosts + simple_switch_13':<{LABEL}} pingall clean after "
          f"{dt:5.1f} s (the reference)", flush=True)
    return dt


def stop_stock(net, ctl) -> None:
    """Stop stock Mininet, then its controller; a network that does not stop cleanly (one
    cut short by a time limit) is said in a line, so the benchmark's own message stands."""
    try:
        if net is not None:
            net.stop()
    except Exception as err:
        print(f"stock Mininet did not stop cleanly: {err}", file=sys.stderr, flush=True)
    finally:
        end_process(ctl, 10)


def wait_table_miss(ovs, switches: list[str], ctl) -> None:
    """Wait until every one of ``switches`` holds simple_switch_13's table-miss flow (sent
    to the controller), which it installs once a switch has connected: the switch is then
    connected and forwards through the controller, whatever OVS's database says yet."""
    pending = list(switches)
    while pending:
        if ctl.poll() is not None:
            fail(f"stock Mininet: ryu.app.simple_switch_13 exited (status {ctl.returncode})",
                 1)
        pending = [s for s in pending
                   if "actions=CONTROLLER" not in ovs.ofctl("dump-flows", s, check=False)]
        if pending:
            time.sleep(0.05)


def iperf(client, server_ip, port, seconds, bind=None) -> float:
    """Mb/s one iperf3 client in ``client`` got through to ``server_ip:port``."""
    extra = f" -B {bind}" if bind else ""
    with limit(seconds + 30, f"iperf3 from {client.name} to {server_ip}"):
        out = client.cmd(f"iperf3 -c {server_ip} -p {port} -t {seconds} -J "
                         f"--connect-timeout 3000{extra}")
    try:
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    except (ValueError, KeyError):
        fail(f"iperf3 from {client.name} to {server_ip} gave no result: "
             f"{out.strip().splitlines()[-1:] or 'nothing'}", 1)


def shaped_goodput(ovs) -> None:
    rate = 100.0
    with limit(300, "shaped goodput on ROFT 4x2: bring-up, flows and teardown"), \
            Emulation(roft(4, 2), ovs=ovs, link_mbps=rate) as emu:
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
        print(f"{'one TCP flow, link shaped to 100 Mb/s':<{LABEL}} {one:6.1f} Mb/s = "
              f"{100 * one / rate:5.1f}% of the shaped rate; "
              + target(one >= 0.95 * rate, "at least 95%"), flush=True)
        rates = shared_link(emu, dst_ip)
        for pf in pidfiles:
            pid = dst.cmd(f"cat {pf} 2>/dev/null").strip()
            if pid.isdigit():
                dst.cmd(f"kill {pid}")
            dst.cmd(f"rm -f {pf}")
    index = jain(rates)
    print(f"{'four TCP flows into one 100 Mb/s link':<{LABEL}} "
          f"{', '.join(f'{r:.1f}' for r in rates)} Mb/s (offered, at their ingress ports); "
          f"sum {sum(rates):.1f}; Jain {index:.3f}; " + target(index >= 0.95, "at least 0.95"),
          flush=True)


def shared_link(emu, dst_ip) -> list[float]:
    """Four senders on other servers into g0's one 100 Mb/s link, all at once: each one's
    Mb/s read from the switch port where it enters the fabric, over a common 5 s window
    after a 3 s start-up."""
    senders = ["g2", "g4", "g6", "g3"]
    procs = [emu.net.get(h).popen(["iperf3", "-c", dst_ip, "-p", str(5202 + i), "-t", "10",
                                   "--connect-timeout", "3000"], stdout=subprocess.DEVNULL)
             for i, h in enumerate(senders)]
    ports = [switch_intf(*emu.fabric.attachment(h, 0)) for h in senders]
    time.sleep(3)
    before = emu.port_counters("bytes")
    time.sleep(5)
    after = emu.port_counters("bytes")
    try:
        for p in procs:
            p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        fail("four iperf3 clients sharing one link: not done within 30 s of their 10", 1)
    return [(after[p][0] - before[p][0]) * 8 / 5 / 1e6 for p in ports]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="ZCube n=4 against stock Mininet, "
                                                           "and the shaped goodput")
    mode.add_argument("--scale", action="store_true", help="only the 256-GPU fabrics")
    args = p.parse_args(argv)
    need_root()
    from mininet.log import setLogLevel
    setLogLevel("warning")
    with limit(60, "starting Open vSwitch"):
        ovs = Ovs().ensure()
    ovs.export_env()
    try:
        if args.scale:
            up_and_verify("zcube n=16 (256 hosts, 768 links)", zcube(16, 8), ovs, 120,
                          limit_s=900)
            up_and_verify("roft 32x8 (256 GPUs)", roft(32, 8), ovs, 120, limit_s=900)
            return
        ours = up_and_verify("zcube n=4, policy zcube (to verified)", zcube(4, 4), ovs, 15)
        stock = stock_mininet_pingall(ovs)
        print(f"{'ratio (testbed verified / stock pingall)':<{LABEL}} {ours / stock:5.2f}; "
              + target(ours < stock, "under 1.0"), flush=True)
        if not args.quick:
            up_and_verify("zcube n=8 (64 hosts, 192 links)", zcube(8, 8), ovs, 15, 5)
            up_and_verify("roft 8x8 (64 GPUs)", roft(8, 8), ovs, 90)
        shaped_goodput(ovs)
    finally:
        ovs.stop()


if __name__ == "__main__":
    main()
