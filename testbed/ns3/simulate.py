"""One workload simulated packet by packet on ns-3, from the same fabric, route table and
workload as the other backends.

* A node per GPU and per switch; one point-to-point channel per cable at the cable's
  scaled rate with ``CABLE_DELAY_S`` of propagation; every switch port's queue a drop-tail
  FIFO of ``QUEUE_PACKETS`` packets (the emulation's shaped ports have 64), every NIC
  port's one of ``HOST_QUEUE_PACKETS`` (Linux holds a host's own packets back rather than
  drop them; ns-3's TCP has no such back-pressure), with no queue discipline above them.
* Addresses and static routes from :func:`testbed.ns3.routes.plan`: every packet follows
  one of the route table's paths for its pair, ECMP and spraying included.
* Each transfer is split over its pairings and lanes as the emulation splits it
  (:func:`controller.pairings.flows_for`); each piece is a TCP connection of its own
  (ns-3's default TCP, ``SEGMENT_BYTES`` segments, Linux's 200 ms minimum RTO), a BulkSend
  on the source and a PacketSink on the destination, started at the transfer's ready
  time; it takes one of its pairing's
  paths by the seeded hash the model uses (:mod:`testbed.core.ecmp`).
* Time advances ``SAMPLE_S`` at a time: after each step every device's queue counters give
  the bytes each directed link carried (links.csv) and the sinks' counts say whether every
  transfer is complete.  A transfer's FCT runs from its ready time to the last packet of
  its last piece (ns-3's flow monitor); it is verified when every piece's sink received
  exactly its bytes.
"""
from __future__ import annotations

import ipaddress
import os

from controller.pairings import flows_for
from testbed.core.ecmp import connection_key, ecmp_choice, ecmp_salt
from testbed.core.metrics import link_summary_of_rows
from testbed.core.rows import link_row
from testbed.ns3.routes import plan

SAMPLE_S = 0.5
QUEUE_PACKETS = 64       # a switch port's FIFO, as the emulation's shaped ports
HOST_QUEUE_PACKETS = 1000   # a NIC's: Linux's txqueuelen; a host does not drop its own
CABLE_DELAY_S = 10e-6
SEGMENT_BYTES = 1448
SOCKET_BYTES = 4 << 20
MIN_RTO_S = 0.2          # Linux's (ns-3's own is 1 s: a lost tail cost a second)
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


def simulate(table, work, link_mbps: float, routes=None) -> tuple[list, list, dict | None]:
    """``(transfer rows, link rows, link summary)`` of ``work`` on ``table``'s fabric
    (``routes``: the table's :func:`~testbed.ns3.routes.plan`, when already made)."""
    ns = ns3()
    net = _Network(ns, table, link_mbps, routes)
    try:
        pieces = net.pieces(work)
        links = net.run(work, pieces)
        rows = net.rows(work, pieces)
    finally:
        ns.Simulator.Destroy()
    return rows, links, link_summary_of_rows(links)


class _Network:
    def __init__(self, ns, table, link_mbps: float, routes=None):
        self.ns, self.table, self.fab = ns, table, table.fabric
        self.plan = routes or plan(table)
        scale = self.fab.scale_for(link_mbps)
        for key, value in (("ns3::TcpSocket::SegmentSize", ns.UintegerValue(SEGMENT_BYTES)),
                           ("ns3::TcpSocket::SndBufSize", ns.UintegerValue(SOCKET_BYTES)),
                           ("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(SOCKET_BYTES)),
                           ("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.Seconds(MIN_RTO_S)))):
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
        self._cables(scale)
        self._routes()

    def _cables(self, scale: float) -> None:
        ns, fab = self.ns, self.fab
        p2p = ns.PointToPointHelper()
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                     ns.QueueSizeValue(ns.QueueSize(f"{QUEUE_PACKETS}p")))
        p2p.SetChannelAttribute("Delay", ns.TimeValue(ns.Seconds(CABLE_DELAY_S)))
        switch_ips = 0
        for link in fab.links:
            bps = link.gbps * 1e9 * scale
            p2p.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(int(bps))))
            pair = p2p.Install(self.node[link.a], self.node[link.b])
            for u, v, dev, port in ((link.a, link.b, pair.Get(0), link.a_port),
                                    (link.b, link.a, pair.Get(1), link.b_port)):
                ip = self.node[u].GetObject[ns.Ipv4]()
                i = ip.AddInterface(dev)
                if fab.is_host(u):
                    addrs = self.plan.addresses[(u, port)]
                    self.port_if[(u, port)] = i
                    dev.GetObject[ns.PointToPointNetDevice]().GetQueue().SetMaxSize(
                        ns.QueueSize(f"{HOST_QUEUE_PACKETS}p"))
                else:
                    addrs, switch_ips = [str(SWITCH_BASE + switch_ips)], switch_ips + 1
                for a in addrs:
                    ip.AddAddress(i, ns.Ipv4InterfaceAddress(
                        ns.Ipv4Address(a), ns.Ipv4Mask("255.255.255.255")))
                ip.SetUp(i)
                self.out.setdefault((u, v), []).append((dev, i))
                self.capacity[(u, v)] = self.capacity.get((u, v), 0.0) + bps / 1e6

    def _routes(self) -> None:
        ns = self.ns
        static = {n: self.routing.GetStaticRouting(node.GetObject[ns.Ipv4]())
                  for n, node in self.node.items()}
        for (sw, addr), nxt in self.plan.switch_routes.items():
            static[sw].AddHostRouteTo(ns.Ipv4Address(addr), self.out[(sw, nxt)][0][1])
        single = {h.name for h in self.fab.hosts if len(h.ports) == 1}
        for host in single:                  # one NIC port: everything leaves by it
            static[host].AddNetworkRouteTo(ns.Ipv4Address("0.0.0.0"), ns.Ipv4Mask("0.0.0.0"),
                                           self.port_if[(host, 0)])
        for (host, addr), port in self.plan.host_routes.items():
            if host not in single:
                static[host].AddHostRouteTo(ns.Ipv4Address(addr), self.port_if[(host, port)])

    def pieces(self, work) -> list[tuple]:
        """``(transfer index, bytes, sink, port)`` per connection, its apps installed."""
        ns, salt, out = self.ns, ecmp_salt(work), []
        tcp = "ns3::TcpSocketFactory"
        for ti, t in enumerate(work.transfers):
            for k, f in enumerate(flows_for(self.table, t.src, t.dst, t.bytes)):
                if f["bytes"] <= 0:
                    continue
                if len(out) >= MAX_PIECES:
                    raise ValueError(f"more than {MAX_PIECES:,} connections in one workload: "
                                     f"the ns3 backend gives each its own port")
                cands = self.plan.paths[(f["src"], f["dst"])]
                _, local, remote = cands[ecmp_choice(
                    connection_key(t, k, "tcp-per-transfer", salt), len(cands))]
                port = BASE_PORT + len(out)
                sink = ns.PacketSinkHelper(tcp, ns.InetSocketAddress(
                    ns.Ipv4Address.GetAny(), port).ConvertTo()).Install(self.node[t.dst])
                sink.Start(ns.Seconds(0.0))
                bulk = ns.BulkSendHelper(tcp, ns.InetSocketAddress(
                    ns.Ipv4Address(remote), port).ConvertTo())
                bulk.SetAttribute("MaxBytes", ns.UintegerValue(f["bytes"]))
                bulk.SetAttribute("SendSize", ns.UintegerValue(65536))
                bulk.SetAttribute("Local", ns.AddressValue(ns.InetSocketAddress(
                    ns.Ipv4Address(local), 0).ConvertTo()))
                bulk.Install(self.node[t.src]).Start(ns.Seconds(t.ready_s))
                out.append((ti, f["bytes"], sink.Get(0).GetObject[ns.PacketSink](), port))
        return out

    def _carried(self) -> dict:
        """Bytes each directed link has carried so far (its devices' queues)."""
        ns, got = self.ns, {}
        for hop, devs in self.out.items():
            total = 0
            for dev, _ in devs:
                q = dev.GetObject[ns.PointToPointNetDevice]().GetQueue()
                total += q.GetTotalReceivedBytes() - q.GetTotalDroppedBytes()
            got[hop] = total
        return got

    def run(self, work, pieces) -> list[dict]:
        """Run until every piece is in (or the horizon); links.csv rows."""
        ns = self.ns
        hosts = ns.NodeContainer()
        for h in self.fab.hosts:
            hosts.Add(self.node[h.name])
        self.monitor_helper = ns.FlowMonitorHelper()
        self.monitor = self.monitor_helper.Install(hosts)
        slowest = min(self.capacity.values())
        last = max((t.ready_s for t in work.transfers), default=0.0)
        horizon = last + 30 + 4 * work.bytes_total * 8 / (slowest * 1e6)
        rows, before, k = [], self._carried(), 0
        while True:
            ns.Simulator.Stop(ns.Seconds(SAMPLE_S))
            ns.Simulator.Run()
            k += 1
            now = self._carried()
            rows += [link_row(k * SAMPLE_S, hop, now[hop] - before[hop], SAMPLE_S, cap)
                     for hop, cap in self.capacity.items()]
            before = now
            done = all(sink.GetTotalRx() >= n for _, n, sink, _ in pieces)
            if (done and k * SAMPLE_S > last) or k * SAMPLE_S > horizon:
                return rows

    def rows(self, work, pieces) -> list[dict]:
        """transfers.csv rows, as the other backends write them."""
        self.monitor.CheckForLostPackets()
        cls = self.monitor_helper.GetClassifier()
        times = {}
        for fid, st in self.monitor.GetFlowStats():
            ft = cls.FindFlow(fid)
            if st.rxPackets:
                times[int(ft.destinationPort)] = (st.timeFirstRxPacket.GetSeconds(),
                                                  st.timeLastRxPacket.GetSeconds())
        by_transfer: dict = {}
        for ti, n, sink, port in pieces:
            by_transfer.setdefault(ti, []).append((n, int(sink.GetTotalRx()), times.get(port)))
        out = []
        for ti, t in enumerate(work.transfers):
            mine = by_transfer.get(ti, [])
            got = sum(rx for _, rx, _ in mine)
            ok = bool(mine) and all(rx == n and tm for n, rx, tm in mine)
            first = min((tm[0] for _, _, tm in mine if tm), default=None)
            end = max((tm[1] for _, _, tm in mine if tm), default=None)
            out.append({"request": t.request, "chunk": t.chunk, "src": t.src, "dst": t.dst,
                        "pairings": len(mine), "bytes": t.bytes,
                        "ready_s": round(t.ready_s, 6), "start_s": round(t.ready_s, 6),
                        "first_byte_s": round(first, 6) if first is not None else None,
                        "end_s": round(end, 6) if ok else None,
                        "fct_ms": round((end - t.ready_s) * 1000, 3) if ok else None,
                        "bytes_received": got, "verified": ok,
                        "status": "ok" if ok else "incomplete", "attempts": 1})
        return out
