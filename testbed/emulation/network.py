"""Build a Fabric in Mininet and configure its hosts (side effects; root only).

One Mininet host per GPU with one interface per NIC port (``g3-eth0``, ``g3-eth1``), one OVS
bridge per switch named with the testbed's prefix (switch ``a0`` is bridge ``zca0``; its
ports are ``zca0-eth<port>``), every cable an htb-shaped veth pair.  Hosts are configured
with pyroute2 from :func:`controller.flows.compile_host_config`: /32 addresses, one route per
address plane (or per destination), static neighbours, no IPv6, so nothing ever floods.
"""
from __future__ import annotations

import codecs
import os
import shlex
from contextlib import contextmanager, nullcontext
from functools import partial

from controller.flows import HostConfig
from testbed.emulation.state import PREFIX, RunRecord
from topologies.fabric import HOST_SYSCTLS, Fabric, Link
from topologies.ifnames import bridge_name as _bridge_name
from topologies.ifnames import host_ifname, switch_ifname
from topologies.mininet_topo import FabricTopo

# Queue behind each shaped port: a shallow FIFO, as a switch port has.  With htb's default
# (a FIFO of txqueuelen = 1000 packets) four TCP flows into one port shared it with a Jain
# index of 0.90-0.98 over three runs; with 64 packets, 0.97-0.98 (benchmarks/).
# $ZCUBE_LEAF_QDISC overrides it ("" for htb's default, "fq_codel" where the kernel has it).
# A scenario's buffer_ms replaces it with a byte FIFO holding buffer_ms of the port's emulated
# rate, but never less than MIN_BUFFER_BYTES: hosts hand their NIC TSO segments of up to 64 KB
# which the userspace datapath forwards whole, so a queue shallower than two of them drops
# every big segment that meets another.  Real switch buffers are microseconds deep at real
# rates, which no emulation forwarding 64 KB segments can reproduce: buffer_ms is time at the
# emulated rate, not the real switch's.
LEAF_QDISC = "pfifo limit 64"
MIN_BUFFER_BYTES = 2 * 65536 + 2 * 1514      # two 64 KB TSO segments and their headers

# Largest segment a host's TCP hands its NIC port.  The userspace datapath forwards TSO
# segments whole, so every htb-shaped hop stores and forwards up to 64 KB at once, which at
# tens of Mb/s adds milliseconds per switch crossed, and an idle htb port passes a whole
# segment ahead of its rate.  As a kept-open connection's minimum RTT estimate falls, Linux
# grows its segments towards 64 KB, and the demo's ZCube transfers (168 KB per port) drifted
# from 1.05 to 0.83 of their ideal over five transfers on the same connections; capped at
# 32 KB, eight sequences of five stayed at 0.98-1.06 (medians).  So hosts cap their ports
# at GSO_MAX_SIZE unless the scenario asks for large segments (TSO_RTT_LOG below), whose
# long transfers need the packets fewer.  $ZCUBE_GSO_MAX_SIZE overrides it ("" for none).
GSO_MAX_SIZE = 32768

# How big a segment TCP hands the NIC.  Linux sizes it to about 1 ms of the pacing rate, plus
# up to 64 KB more when the connection's minimum RTT is under 2**tcp_tso_rtt_log us (default
# 9: 512 us, a datacenter's).  The emulation's links run thousands of times slower than real
# ones, so its RTTs are milliseconds, which the kernel takes for a WAN and answers with small
# segments: on a network-bound workload at 50 Mb/s the datapath, whose cost is per packet,
# carried 3.1x the packets for the same bytes (its busiest thread at 0.98 of a core, p99,
# against 0.45 with 2**14 us = 16 ms, which covers every emulated RTT).  Large segments cost
# fidelity on short transfers, though: an idle htb port passes a whole segment ahead of its
# rate, and the demo's ZCube transfers (2-3 segments per port) then took 0.81x their ideal.
# So a scenario asks for it (``large_segments: true``); $ZCUBE_TSO_RTT_LOG sets the value
# for any run ("9": the kernel's default).
TSO_RTT_LOG = 14


def leaf_qdisc(bw_mbps: float, buffer_ms: float | None = None) -> str:
    """The qdisc behind a port shaped to ``bw_mbps``: LEAF_QDISC (or $ZCUBE_LEAF_QDISC)
    without ``buffer_ms``, else a byte FIFO holding ``buffer_ms`` at that rate (floored)."""
    if buffer_ms is None:
        return os.environ.get("ZCUBE_LEAF_QDISC", LEAF_QDISC)
    limit = max(round(bw_mbps * 1e6 / 8 * buffer_ms / 1000), MIN_BUFFER_BYTES)
    return f"bfifo limit {limit}"


def bridge_name(switch: str) -> str:
    return _bridge_name(switch, PREFIX)


def switch_intf(switch: str, port: int) -> str:
    return switch_ifname(switch, port, PREFIX)


host_intf = host_ifname


def link_mbps(link: Link, scale: float) -> float:
    """Emulated rate of a cable: its real rate times the run's scale factor."""
    return link.gbps * 1000.0 * scale


def root_links(fabric: Fabric) -> list[str]:
    """Interface names the build creates in the root namespace (switch ends of cables)."""
    names = []
    for link in fabric.links:
        for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
            if fabric.is_switch(node):
                names.append(switch_intf(node, port))
    return names


class PrefixedFabricTopo(FabricTopo):
    """FabricTopo whose switch names carry the testbed prefix (they become bridge names)."""

    def addSwitch(self, name, **opts):
        return super().addSwitch(bridge_name(name), **opts)

    def addLink(self, node1, node2, port1=None, port2=None, key=None, **opts):
        fab = self.fabric
        n1 = bridge_name(node1) if fab.is_switch(node1) else node1
        n2 = bridge_name(node2) if fab.is_switch(node2) else node2
        return super().addLink(n1, n2, port1, port2, key, **opts)


def _tracked(cls, record: RunRecord | None):
    """A Mininet node class that records its shell's PID the moment it exists, and reads
    its shell's output with a decoder that replaces a byte that is not UTF-8 (Mininet's own
    raises, and one stray byte from a host ended a run with a traceback)."""
    def startShell(self, *args, **kwargs):
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        cls.startShell(self, *args, **kwargs)
        if record is not None:
            record.add_pid(self.pid, f"mininet {self.name}")
    return type(f"Tracked{cls.__name__}", (cls,), {"startShell": startShell})


def _cable_class():
    from mininet.link import TCLink

    class Cable(TCLink):
        """A shaped cable whose ends :func:`delete_links` deletes with every other's in one
        ``ip -batch`` after the network stops, not one shell command per end."""

        def stop(self):
            pass

    return Cable


def _switch_class(record: RunRecord | None):
    from mininet.node import OVSSwitch
    switch_base = _tracked(OVSSwitch, record)

    class Switch(switch_base):
        """Started with every other switch in one ``ovs-vsctl``, each port given a
        ``linux-noop`` QoS in the same transaction, so OVS leaves the shaping Mininet put
        on it alone and nothing has to be re-applied (Mininet's batch start-up re-runs
        every shaped port's ``tc`` commands, some 5 s at 384 ports)."""

        @classmethod
        def batchStartup(cls, switches, run=None):
            from mininet.util import errRun
            run = run or errRun
            cmds = []
            for k, sw in enumerate(switches):
                ports = [i.name for i in sw.intfList() if i.name != "lo"]
                cmd = " ".join(c.strip() for c in sw.commands)
                if ports:
                    cmd += f" -- --id=@noop{k} create qos type=linux-noop " + " ".join(
                        f"-- set port {p} qos=@noop{k}" for p in ports)
                cmds.append(cmd)
                sw.commands, sw.batch = [], False
            line = "ovs-vsctl"
            for cmd in cmds:
                if len(line) + len(cmd) >= switch_base.argmax and line != "ovs-vsctl":
                    run(line, shell=True)
                    line = "ovs-vsctl"
                line += " " + cmd
            if line != "ovs-vsctl":
                run(line, shell=True)
            return switches

    return Switch


def build_network(fabric: Fabric, record: RunRecord | None, link_mbps_per_nic: float,
                  datapath: str, of_port: int, buffer_ms: float | None = None, phase=None):
    """Create and start the Mininet network (switches point at 127.0.0.1:of_port); every
    shaped port queues into :func:`leaf_qdisc` for ``buffer_ms``.  ``phase`` (a
    :class:`testbed.emulation.phases.Phases`) times ``network`` (namespaces, veths and
    their shaping) and ``switches`` (OVS bridges and ports, pointed at the controller)."""
    phase = phase or (lambda name: nullcontext())
    from mininet.link import TCIntf
    from mininet.net import Mininet
    from mininet.node import Host, RemoteController

    class ShapedIntf(TCIntf):
        """htb shaping above Mininet's 1 Gb/s cap, with an r2q that keeps the quantum sane."""
        bwParamMax = 100_000

        def bwCmds(self, bw=None, **params):
            cmds, parent = TCIntf.bwCmds(self, bw=bw, **params)
            if bw:
                r2q = max(10, int(bw * 1e6 / 8 / 100_000) + 1)
                cmds = [c.replace("htb default 1", f"htb default 1 r2q {r2q}") for c in cmds]
                leaf = leaf_qdisc(bw, buffer_ms)
                if leaf:
                    cmds.append(f"%s qdisc add dev %s parent 5:1 handle 10: {leaf}")
            return cmds, parent

    scale = fabric.scale_for(link_mbps_per_nic)
    if record is not None:
        record.add_bridges(bridge_name(s.name) for s in fabric.switches)
        record.add_links(root_links(fabric))
    topo = PrefixedFabricTopo(fabric=fabric,
                              link_opts=lambda link: {"bw": link_mbps(link, scale)})
    switch_cls = partial(_switch_class(record), protocols="OpenFlow13",
                         failMode="secure", datapath=datapath, reconnectms=1000, batch=True)
    net = Mininet(topo=topo, switch=switch_cls, host=_tracked(Host, record),
                  link=partial(_cable_class(), cls1=ShapedIntf, cls2=ShapedIntf), controller=None,
                  autoSetMacs=False, autoStaticArp=False, build=False, waitConnected=False)
    net.addController(RemoteController("c0", ip="127.0.0.1", port=of_port))
    with phase("network"):
        net.build()
        quiet_root_interfaces(fabric)
    with phase("switches"):
        net.start()
    return net


def delete_links(fabric: Fabric) -> None:
    """Delete the root namespace's ends of the fabric's cables (each takes its peer with it)
    in one ``ip -batch``; ends already gone are skipped (``-force``).  Only names carrying
    the testbed's prefix."""
    import subprocess
    lines = "".join(f"link del {name}\n" for name in root_links(fabric)
                    if name.startswith(PREFIX))
    subprocess.run(["ip", "-force", "-batch", "-"], input=lines, text=True,
                   capture_output=True)


def quiet_root_interfaces(fabric: Fabric) -> None:
    """No IPv6 on the switch ends of cables: the root namespace's kernel would otherwise send
    router solicitations and MLD reports into the fabric, which port counters would see."""
    for name in root_links(fabric) + [bridge_name(s.name) for s in fabric.switches]:
        try:
            with open(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6", "w") as f:
                f.write("1")
        except OSError:
            pass      # no IPv6 in this kernel, or the bridge port does not exist yet


@contextmanager
def host_netlink(node, host):
    """pyroute2 inside ``host``'s namespace (Mininet ``node``), and its NIC port index ->
    interface index."""
    from pyroute2 import IPRoute
    with IPRoute(netns=f"/proc/{node.pid}/ns/net", flags=0) as ipr:
        yield ipr, {p.index: ipr.link_lookup(ifname=host_intf(host.name, p.index))[0]
                    for p in host.ports}


def set_routes(ipr, idx, routes) -> None:
    """Replace each ``(prefix, NIC port, source ip)`` route."""
    for prefix, port, src in routes:
        dst, plen = prefix.split("/")
        ipr.route("replace", dst=dst, dst_len=int(plen), oif=idx[port], prefsrc=src,
                  scope="link")


def set_neighbours(ipr, idx, neighbours) -> None:
    """Replace each ``(ip, mac, NIC port)`` static neighbour entry."""
    for ip, mac, port in neighbours:
        ipr.neigh("replace", dst=ip, lladdr=mac, ifindex=idx[port], state="permanent")


def configure_hosts(net, fabric: Fabric, configs: dict[str, HostConfig], tso: bool,
                    large_segments: bool = False) -> None:
    """Addresses, routes, neighbours and sysctls on every host, through pyroute2;
    ``large_segments``: :data:`TSO_RTT_LOG` too."""
    sysctls = dict(HOST_SYSCTLS)
    rtt_log = os.environ.get("ZCUBE_TSO_RTT_LOG", str(TSO_RTT_LOG) if large_segments else "")
    if rtt_log:
        sysctls["net.ipv4.tcp_tso_rtt_log"] = rtt_log
    sysctl = " ".join(shlex.quote(f"{k}={v}") for k, v in sysctls.items())
    for h in fabric.hosts:
        node = net.get(h.name)
        node.cmd(f"sysctl -q -e -w {sysctl}")       # -e: a kernel without a key skips it
        if not tso:
            # userspace datapath without TSO: segment in the host kernel instead
            for p in h.ports:
                node.cmd(f"ethtool -K {shlex.quote(host_intf(h.name, p.index))} tx off "
                         f">/dev/null 2>&1")
        cfg = configs[h.name]
        with host_netlink(node, h) as (ipr, idx):
            for port, ip in cfg.addresses:
                ipr.flush_addr(index=idx[port])
                ipr.addr("add", index=idx[port], address=ip, prefixlen=32)
                ipr.link("set", index=idx[port], state="up")
            set_routes(ipr, idx, cfg.routes)
            set_neighbours(ipr, idx, cfg.neighbours)
        gso = os.environ.get("ZCUBE_GSO_MAX_SIZE",
                             "" if large_segments else str(GSO_MAX_SIZE))
        if gso:
            for p in h.ports:
                node.cmd(f"ip link set dev {shlex.quote(host_intf(h.name, p.index))} "
                         f"gso_max_size {shlex.quote(gso)}")
