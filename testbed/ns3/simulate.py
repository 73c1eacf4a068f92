"""One workload simulated packet by packet on ns-3, from the same fabric, route table and
workload as the other backends, with queues, TCP and timers set as the emulation's (the
constants below say why)."""
from __future__ import annotations

import ipaddress
import os
from typing import NamedTuple

from testbed.core.metrics import link_summary_of_rows
from testbed.core.records import link_row
from testbed.ns3.faults import Faults, Timeline
from testbed.ns3.routes import plan
from testbed.ns3.transfers import TransferSender

SAMPLE_S = 0.5
QUEUE_BYTES = 64 * 65536   # what the emulation's 64-packet FIFOs hold of 64 KB segments
HOST_QUEUE_PACKETS = 1000   # a NIC's: Linux's txqueuelen; a host does not drop its own
CABLE_DELAY_S = 10e-6
SEGMENT_BYTES = 1448
SOCKET_BYTES = 4 << 20
MIN_RTO_S = 0.2          # Linux's (ns-3's own is 1 s: a lost tail cost a second)
SYN_RTO_S = 1.0          # Linux's first SYN timeout (ns-3's is 3 s)
DELACK_S = 0.04          # Linux's shortest delayed-ACK wait (ns-3's 200 ms, against the RTO,
                         # stalled a connection that lost its acknowledgements)
BASE_PORT = 10000
MAX_PIECES = 65535 - BASE_PORT
SWITCH_BASE = ipaddress.IPv4Address("172.16.0.1")   # switch interfaces need an address
_NS = []


def ns3():
    """The ns-3 bindings, imported once (its C++ loader's 'Failed to materialize symbols'
    lines, harmless, are kept from the console)."""
    if _NS:
        return _NS[0]
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            from ns import ns
    except ImportError:
        raise RuntimeError("the ns3 backend needs the ns3 package (pip install ns3; "
                           "'make setup' installs it)") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    _NS.append(ns)
    return ns


def queue_bytes(bps: float, buffer_ms: float) -> int:
    """A switch port's queue holding ``buffer_ms`` at ``bps``: no floor but two packets (the
    emulation's two 64 KB segments are its TSO's; ns-3 sends packets of one MTU)."""
    return max(round(bps / 8 * buffer_ms / 1000), 2 * 1500)


class Simulated(NamedTuple):
    rows: list                 # transfers.csv rows
    links: list                # links.csv rows
    link_util: dict | None     # their summary
    faults: list | None        # one record per event of the fault schedule, if any
    switch_drops: int = 0      # packets the switch ports' queues dropped


def simulate(table, work, link_mbps: float, routes=None, faults=None,
             transport: str = "pool", buffer_ms: float | None = None) -> Simulated:
    """``work`` on ``table``'s fabric (``routes``: the table's
    :func:`~testbed.ns3.routes.plan`, when already made), with the fault schedule ``faults``
    (:func:`testbed.experiment.fault_schedule.resolve`'s) if any (:mod:`testbed.ns3.faults`),
    over kept-open connections (``pool``) or a connection per piece (``tcp-per-transfer``),
    every switch port's queue ``buffer_ms`` deep at its rate if given (else
    ``QUEUE_BYTES``)."""
    ns = ns3()
    timeline = Timeline(table, faults, plan) if faults else None
    net = _Network(ns, table, link_mbps, routes, timeline, buffer_ms)
    try:
        net.sender = TransferSender(net, work, transport)
        net.sender.plan()
        links = net.run(work, net.sender)
        rows = net.sender.rows()
        records = net.faults.finish(net.now()) if timeline else None
        drops = sum(d.GetObject[ns.PointToPointNetDevice]().GetQueue().GetTotalDroppedPackets()
                    for d in net.switch_devs)
    finally:
        ns.Simulator.Destroy()
    return Simulated(rows, links, link_summary_of_rows(links), records, int(drops))


class _Network:
    def __init__(self, ns, table, link_mbps: float, routes=None, timeline=None,
                 buffer_ms: float | None = None):
        self.ns, self.table, self.fab, self.timeline = ns, table, table.fabric, timeline
        self.buffer_ms, self.link_mbps = buffer_ms, link_mbps
        self.plan = timeline.plans[0] if timeline else (routes or plan(table))
        self.addresses = timeline.addresses() if timeline else self.plan.addresses
        scale = self.fab.scale_for(link_mbps)
        # ns-3's default TCP, CUBIC, as the emulation's, with Linux's segments and timers
        for key, value in (("ns3::TcpSocket::SegmentSize", ns.UintegerValue(SEGMENT_BYTES)),
                           ("ns3::TcpSocket::SndBufSize", ns.UintegerValue(SOCKET_BYTES)),
                           ("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(SOCKET_BYTES)),
                           ("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.Seconds(MIN_RTO_S))),
                           ("ns3::TcpSocket::ConnTimeout", ns.TimeValue(ns.Seconds(SYN_RTO_S))),
                           ("ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.Seconds(DELACK_S)))):
            ns.Config.SetDefault(key, value)
        names = [h.name for h in self.fab.hosts] + [s.name for s in self.fab.switches]
        self.nodes = ns.NodeContainer()
        self.nodes.Create(len(names))
        self.node = {n: self.nodes.Get(i) for i, n in enumerate(names)}
        self.routing = ns.Ipv4StaticRoutingHelper()
        stack = ns.InternetStackHelper()
        stack.SetRoutingHelper(self.routing)
        stack.Install(self.nodes)
        self.out: dict = {}              # (u, v) -> [(device, interface)] one per cable
        self.port_if: dict = {}          # (host, NIC port) -> interface
        self.capacity: dict = {}         # (u, v) -> Mb/s
        self.cable_dev: dict = {}        # Link -> its two devices
        self._cables(scale)
        self.static = {n: self.routing.GetStaticRouting(node.GetObject[ns.Ipv4]())
                       for n, node in self.node.items()}
        self.via: dict = {}              # (node, address) -> next node or NIC port, in use
        self.single = {h.name for h in self.fab.hosts if len(h.ports) == 1}   # default route
        self._routes()
        self.faults = Faults(self, timeline) if timeline else None
        self.ports = 0                   # destination ports handed out (next_port)

    def now(self) -> float:
        return self.ns.Simulator.Now().GetSeconds()

    def _cables(self, scale: float) -> None:
        ns, fab = self.ns, self.fab
        p2p = ns.PointToPointHelper()
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                     ns.QueueSizeValue(ns.QueueSize(f"{QUEUE_BYTES}B")))
        p2p.SetChannelAttribute("Delay", ns.TimeValue(ns.Seconds(CABLE_DELAY_S)))
        switch_ips, self.switch_devs = 0, []
        for link in fab.links:
            bps = link.gbps * 1e9 * scale
            p2p.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(int(bps))))
            pair = p2p.Install(self.node[link.a], self.node[link.b])
            self.cable_dev[link] = (pair.Get(0), pair.Get(1))
            for u, v, dev, port in ((link.a, link.b, pair.Get(0), link.a_port),
                                    (link.b, link.a, pair.Get(1), link.b_port)):
                ip = self.node[u].GetObject[ns.Ipv4]()
                i = ip.AddInterface(dev)
                if fab.is_host(u):
                    addrs = self.addresses[(u, port)]
                    self.port_if[(u, port)] = i
                    dev.GetObject[ns.PointToPointNetDevice]().GetQueue().SetMaxSize(
                        ns.QueueSize(f"{HOST_QUEUE_PACKETS}p"))
                else:
                    addrs, switch_ips = [str(SWITCH_BASE + switch_ips)], switch_ips + 1
                    self.switch_devs.append(dev)
                    if self.buffer_ms is not None:   # the same time as the emulation's ports
                        dev.GetObject[ns.PointToPointNetDevice]().GetQueue().SetMaxSize(
                            ns.QueueSize(f"{queue_bytes(bps, self.buffer_ms)}B"))
                for a in addrs:
                    ip.AddAddress(i, ns.Ipv4InterfaceAddress(
                        ns.Ipv4Address(a), ns.Ipv4Mask("255.255.255.255")))
                ip.SetUp(i)
                self.out.setdefault((u, v), []).append((dev, i))
                self.capacity[(u, v)] = self.capacity.get((u, v), 0.0) + bps / 1e6

    def _route(self, node: str, addr: str, via) -> None:
        """``node``'s route to ``addr``: to the next node ``via`` (a switch), or out of NIC
        port ``via`` (a host)."""
        ns = self.ns
        iface = (self.out[(node, via)][0][1] if self.fab.is_switch(node)
                 else self.port_if[(node, via)])
        self.static[node].AddHostRouteTo(ns.Ipv4Address(addr), iface)
        self.via[(node, addr)] = via

    def _routes(self) -> None:
        ns = self.ns
        for host in self.single:             # one NIC port: everything leaves by it
            self.static[host].AddNetworkRouteTo(
                ns.Ipv4Address("0.0.0.0"), ns.Ipv4Mask("0.0.0.0"), self.port_if[(host, 0)])
        plans = self.timeline.plans if self.timeline else [self.plan]
        for p in plans:                      # a path's alias routes the same way in every
            for (sw, addr), nxt in p.switch_routes.items():  # plan: all are in place first
                if (sw, addr) not in self.via:
                    self._route(sw, addr, nxt)
            for (host, addr), port in p.host_routes.items():
                if host not in self.single and (host, addr) not in self.via:
                    self._route(host, addr, port)

    def reroute(self, plan_e) -> None:
        """The routes of ``plan_e`` where they differ from those in use (the ports' own
        addresses': an alias's never changes), each replacing the route it supersedes."""
        changed: dict = {}
        for routes in (plan_e.switch_routes, plan_e.host_routes):
            for (node, addr), via in routes.items():
                if node not in self.single and self.via.get((node, addr)) != via:
                    changed.setdefault(node, {})[addr] = via
        for node, new in changed.items():
            st = self.static[node]
            for i in reversed(range(st.GetNRoutes())):
                if str(st.GetRoute(i).GetDest()) in new:
                    st.RemoveRoute(i)
            for addr, via in new.items():
                self._route(node, addr, via)

    def sink(self, host: str) -> tuple[int, object]:
        """A PacketSink on ``host`` listening from now on a port no connection has used."""
        ns, port = self.ns, self.next_port()
        app = ns.PacketSinkHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(
            ns.Ipv4Address.GetAny(), port).ConvertTo()).Install(self.node[host])
        app.Start(ns.Seconds(0.0))
        return port, app.Get(0).GetObject[ns.PacketSink]()

    def next_port(self) -> int:
        """A destination port no connection has used (one per connection: the flow monitor
        tells connections apart by it)."""
        if self.ports >= MAX_PIECES:
            raise ValueError(f"more than {MAX_PIECES:,} connections in one workload: "
                             f"the ns3 backend gives each its own port")
        self.ports += 1
        return BASE_PORT + self.ports - 1

    def rx_times(self) -> dict:
        """``port -> (first, last)`` packet received of each connection so far."""
        self.monitor.CheckForLostPackets()
        cls, out = self.monitor_helper.GetClassifier(), {}
        for fid, st in self.monitor.GetFlowStats():
            if st.rxPackets:
                out[int(cls.FindFlow(fid).destinationPort)] = (
                    st.timeFirstRxPacket.GetSeconds(), st.timeLastRxPacket.GetSeconds())
        return out

    def _link_bytes(self) -> dict:
        """Bytes sent over each directed link so far (its devices' queues)."""
        ns, got = self.ns, {}
        for hop, devs in self.out.items():
            total = 0
            for dev, _ in devs:
                q = dev.GetObject[ns.PointToPointNetDevice]().GetQueue()
                total += q.GetTotalReceivedBytes() - q.GetTotalDroppedBytes()
            got[hop] = total
        return got

    def run(self, work, sender) -> list[dict]:
        """Run until every piece is in (or the horizon), stopping for each fault event,
        control step and posting on a kept-open connection on the way; links.csv rows."""
        ns, faults = self.ns, self.faults
        hosts = ns.NodeContainer()
        for h in self.fab.hosts:
            hosts.Add(self.node[h.name])
        self.monitor_helper = ns.FlowMonitorHelper()
        self.monitor = self.monitor_helper.Install(hosts)
        slowest = min(self.capacity.values())
        last = max((t.ready_s for t in work.transfers), default=0.0)
        horizon = last + 30 + 4 * work.bytes_total * 8 / (slowest * 1e6)
        if sender.pool is not None:
            ns.Simulator.Stop(ns.Seconds(0))
            ns.Simulator.Run()                # the nodes up, then the connections opened
            sender.open_pool()
        rows, before, k = [], self._link_bytes(), 0
        while True:
            edge = (k + 1) * SAMPLE_S
            stop = min([x for x in (faults.next_s() if faults else None,
                                    sender.next_post_s()) if x is not None] + [edge])
            if stop > self.now():
                ns.Simulator.Stop(ns.Seconds(stop - self.now()))
                ns.Simulator.Run()
            if faults:
                faults.run_due(stop)
            if sender.pool is not None:
                sender.post_due(stop)
            if stop < edge:
                continue
            k += 1
            now = self._link_bytes()
            rows += [link_row(k * SAMPLE_S, hop, now[hop] - before[hop], SAMPLE_S, cap)
                     for hop, cap in self.capacity.items()]
            before = now
            if (sender.done() and k * SAMPLE_S > last) or k * SAMPLE_S > horizon:
                return rows
