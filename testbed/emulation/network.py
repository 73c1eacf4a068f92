"""A Fabric built in Mininet (a host per GPU, an OVS bridge per switch, an htb-shaped veth
pair per cable) and its hosts configured with addresses, routes and static neighbours, so
nothing ever floods (root)."""
from __future__ import annotations

import codecs
import shlex
from contextlib import nullcontext
from functools import partial

from controller.flows import HostConfig
from testbed.emulation import batched_build, nvlink_build
from testbed.emulation.machine_state import PREFIX, RunRecord
from topologies.fabric import HOST_SYSCTLS, Fabric, Link
from topologies.ifnames import bridge_name as _bridge_name
from topologies.ifnames import host_ifname, switch_ifname
from topologies.mininet_topo import FabricTopo

# Queue behind each shaped port: 64 packets, as a lossless (PFC) fabric shows congestion as
# delay, not loss (docs/fidelity.md, "Queues in time"); a scenario's buffer_ms replaces it
# with that many ms at the emulated rate, never under two whole segments.
LEAF_QDISC = "pfifo limit 64"
MIN_BUFFER_BYTES = 2 * 65536 + 2 * 1514      # two 64 KB TSO segments and their headers

# Hosts cap their segments at this, as ever larger segments made kept-open transfers drift
# from 1.05 to 0.83 of their ideal; large_segments lifts the cap for long transfers.
GSO_MAX_SIZE = 32768

# Segments sized past the emulated RTT (2**14 us), which the kernel's default takes for a WAN
# and answers with small segments: 3.1x the packets for the same bytes through a datapath
# whose cost is per packet.
TSO_RTT_LOG = 14


def leaf_qdisc(bw_mbps: float, buffer_ms: float | None = None) -> str:
    """The qdisc behind a port shaped to ``bw_mbps``: LEAF_QDISC without ``buffer_ms``,
    else a byte FIFO holding ``buffer_ms`` at that rate (floored)."""
    if buffer_ms is None:
        return LEAF_QDISC
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
    """FabricTopo whose switch names start with the testbed prefix (they become bridge names)."""

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
        """A shaped cable whose veth pair is created in one batch with every other's while
        the network builds (:mod:`.batched_build`), and whose ends :func:`delete_links` deletes with
        every other's in one ``ip -batch`` after the network stops."""

        def makeIntfPair(self, name1, name2, addr1=None, addr2=None, node1=None, node2=None,
                         deleteIntfs=True):
            staging = batched_build.current()
            if staging is None:
                return TCLink.makeIntfPair(name1, name2, addr1, addr2, node1, node2,
                                           deleteIntfs=deleteIntfs)
            staging.veth(name1, name2, addr1, addr2, node1, node2)
            return None

        def stop(self):
            pass

    return Cable


def _intf_class(buffer_ms: float | None):
    from mininet.link import TCIntf

    class ShapedIntf(TCIntf):
        """htb shaping above Mininet's 1 Gb/s cap, with an r2q that keeps the quantum sane
        and :func:`leaf_qdisc` below it; configured in a batch while the network builds."""
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

        def config(self, mac=None, ip=None, up=True, bw=None, gro=False, txo=True, rxo=True,
                   **params):
            if batched_build.current() is None:
                return TCIntf.config(self, mac=mac, ip=ip, up=up, bw=bw, gro=gro, txo=txo,
                                     rxo=rxo, **params)
            if any(v is not None for v in params.values()):
                raise ValueError(f"{self.name}: cannot batch {sorted(params)}")
            tc = self.bwCmds(bw=bw)[0] if bw is not None else []
            return batched_build.stage_intf(self, mac=mac, ip=ip, up=up, tc=tc, gro=gro, tx=txo,
                                    rx=rxo)

    return ShapedIntf


def _controller_class(record: RunRecord | None):
    from mininet.node import RemoteController

    class Controller(_tracked(RemoteController, record)):
        """The testbed's controller as Mininet knows it.  Mininet's own check that it
        listens (``telnet`` to its port, whose OpenFlow hello is not text) is skipped: the
        emulation waited for the controller to answer before the switches start.  Its
        shell ends with the network (Mininet's remote controller leaves it running)."""

        def checkListening(self):
            pass

        def stop(self, *args, **kwargs):
            self.terminate()

    return Controller


def _net_class():
    from mininet.net import Mininet

    class BatchedMininet(Mininet):
        """Mininet whose build stages its interface and host commands and runs them in one
        batch per namespace (:mod:`.batched_build`)."""

        def build(self):
            with batched_build.staged() as staging:
                Mininet.build(self)
            batched_build.flush(staging)

        def configHosts(self):
            if batched_build.current() is None:
                return Mininet.configHosts(self)
            for host in self.hosts:
                batched_build.stage_host(host)

    return BatchedMininet


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

        @classmethod
        def batchShutdown(cls, switches, run=None):
            """Every bridge deleted from OVSDB in one ``ovs-vsctl --no-wait``: ovs-vswitchd
            takes its ports down behind it (some 3.6 s for 384 ports on the userspace
            datapath) while the hosts stop, instead of before; a later ``ovs-vsctl`` that
            waits, as the next bring-up's does, waits for that too."""
            from mininet.util import errRun
            (run or errRun)("ovs-vsctl --no-wait " + " -- ".join(
                f"--if-exists del-br {sw}" for sw in switches), shell=True)
            for sw in switches:
                sw.terminate()
            return switches

    return Switch


def build_network(fabric: Fabric, record: RunRecord | None, link_mbps_per_nic: float,
                  datapath: str, of_port: int, buffer_ms: float | None = None, phase=None,
                  before_switches=None):
    """Create and start the Mininet network (switches point at 127.0.0.1:of_port); every
    shaped port queues into :func:`leaf_qdisc` for ``buffer_ms``.  ``phase`` (a
    :class:`testbed.emulation.phase_timer.Phases`) times ``network`` (namespaces, veths and
    their shaping), ``controller`` (``before_switches``, e.g. waiting for the controller
    to listen, so switches need not back off before they connect) and ``switches`` (OVS
    bridges and ports, pointed at the controller)."""
    phase = phase or (lambda name: nullcontext())
    with phase("network"):
        from mininet.node import Host
        scale = fabric.scale_for(link_mbps_per_nic)
        if record is not None:
            record.add_bridges(bridge_name(s.name) for s in fabric.switches)
            record.add_links(root_links(fabric))
        topo = PrefixedFabricTopo(fabric=fabric,
                                  link_opts=lambda link: {"bw": link_mbps(link, scale)})
        switch_cls = partial(_switch_class(record), protocols="OpenFlow13",
                             failMode="secure", datapath=datapath, reconnectms=1000, batch=True)
        shaped = _intf_class(buffer_ms)
        net = _net_class()(topo=topo, switch=switch_cls, host=_tracked(Host, record),
                           link=partial(_cable_class(), cls1=shaped, cls2=shaped), controller=None,
                           autoSetMacs=False, autoStaticArp=False, build=False,
                           waitConnected=False)
        net.build()
        if fabric.nvlinks:
            build_nvlink(net, fabric, record, scale, buffer_ms)
        quiet_root_interfaces(fabric)
    if before_switches is not None:
        with phase("controller"):
            before_switches()
    with phase("switches"):
        net.addController(_controller_class(record)("c0", ip="127.0.0.1", port=of_port))
        net.start()
    return net


def build_nvlink(net, fabric: Fabric, record: RunRecord | None, scale: float,
                 buffer_ms: float | None) -> None:
    """Every server's NVSwitch and its GPUs' veths to it (:mod:`.nvlink_build`), recorded
    first so a failed build is cleaned up."""
    if record is not None:
        record.add_links(nvlink_build.root_names(fabric, PREFIX))
    mbps = fabric.nvlink_gbps * 1000.0 * scale
    batches = nvlink_build.build_batches(
        fabric, {h.name: net.get(h.name).pid for h in fabric.hosts}, mbps,
        leaf_qdisc(mbps, buffer_ms), PREFIX)
    root = batches.pop("")
    batched_build.run_scripts({"root": (None, root.script())})
    batched_build.run_scripts({name: (b.pid, b.script()) for name, b in batches.items()})


def delete_links(fabric: Fabric) -> None:
    """Delete the root namespace's ends of the fabric's cables (each takes its peer with it)
    in one ``ip -batch``; ends already gone are skipped (``-force``).  Only names with
    the testbed's prefix."""
    import subprocess
    names = root_links(fabric) + nvlink_build.root_names(fabric, PREFIX)
    lines = "".join(f"link del {name}\n" for name in names if name.startswith(PREFIX))
    subprocess.run(["ip", "-force", "-batch", "-"], input=lines, text=True,
                   capture_output=True)


def quiet_root_interfaces(fabric: Fabric) -> None:
    """No IPv6 on the switch ends of cables: the root namespace's kernel would otherwise send
    router solicitations and MLD reports into the fabric, which port counters would see."""
    for name in (root_links(fabric) + [bridge_name(s.name) for s in fabric.switches]
                 + nvlink_build.root_names(fabric, PREFIX)):
        try:
            with open(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6", "w") as f:
                f.write("1")
        except OSError:
            pass      # no IPv6 in this kernel, or the bridge port does not exist yet


def configure_hosts(net, fabric: Fabric, configs: dict[str, HostConfig], tso: bool,
                    large_segments: bool = False) -> None:
    """Addresses, routes, neighbours, segment caps and sysctls on every host: one ``ip
    -batch`` (netlink) and one ``sysctl`` per host, every host at once (:mod:`.batched_build`);
    segments sized past the emulated RTT (:data:`TSO_RTT_LOG`), capped at
    :data:`GSO_MAX_SIZE` unless ``large_segments``."""
    sysctls = dict(HOST_SYSCTLS, **{"net.ipv4.tcp_tso_rtt_log": TSO_RTT_LOG},
                   **(nvlink_build.FORWARD_SYSCTLS if fabric.nvlinks else {}))
    sysctl = "sysctl -q -e -w " + " ".join(shlex.quote(f"{k}={v}") for k, v in sysctls.items())
    gso = "" if large_segments else str(GSO_MAX_SIZE)
    batched_build.run_scripts({h.name: (net.get(h.name).pid,
                                host_batch(h, configs[h.name], tso, sysctl, gso).script())
                       for h in fabric.hosts})


def host_batch(h, cfg: HostConfig, tso: bool, sysctl: str, gso: str) -> batched_build.NodeBatch:
    """One host's configuration as a batch: ``sysctl`` (-e: a kernel without a key skips
    it), /32 addresses, ports up, routes, static neighbours, ``gso`` as every port's
    gso_max_size ("" for none) and, without ``tso`` (userspace datapath without TSO),
    segmentation in the host's kernel instead."""
    b = batched_build.NodeBatch(None, sh=[sysctl])
    name = {p.index: host_intf(h.name, p.index) for p in h.ports}
    for port, ip in cfg.addresses:
        b.ip += [f"addr flush dev {name[port]}", f"addr add {ip}/32 dev {name[port]}",
                 f"link set dev {name[port]} up"]
    b.ip += [f"route replace {prefix} dev {name[port]} src {src} scope link"
             for prefix, port, src in cfg.routes]
    b.ip += [f"neigh replace {ip} lladdr {mac} dev {name[port]} nud permanent"
             for ip, mac, port in cfg.neighbours]
    for p in h.ports:
        if gso:
            b.ip.append(f"link set dev {name[p.index]} gso_max_size {shlex.quote(gso)}")
        if not tso:
            b.sh.append(f"ethtool -K {shlex.quote(name[p.index])} tx off >/dev/null 2>&1 || true")
    if cfg.nvlink is not None:
        ip, sh = nvlink_build.host_lines(h, cfg.nvlink, gso, tso)
        b.ip += ip
        b.sh += sh
    return b
