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
  (ns-3's default TCP with Linux's timers: ``SEGMENT_BYTES`` segments, 200 ms minimum
  RTO, 1 s first SYN timeout, 40 ms delayed-ACK wait), a BulkSend on the source and a
  PacketSink on the destination, started at the transfer's ready time; it takes one of
  its pairing's paths by the seeded hash the model uses (:mod:`testbed.core.ecmp`).
* A scenario's ``faults`` cut cables at their times and move routes and transfers after
  the control plane's delay (:mod:`testbed.ns3.faults`).
* Time advances ``SAMPLE_S`` at a time, stopping at each fault event on the way: after
  each step every device's queue counters give the bytes each directed link carried
  (links.csv) and the sinks' counts say whether every transfer is complete.  A transfer's
  FCT runs from its ready time to the last packet of its last piece (ns-3's flow
  monitor); it is verified when its pieces' sinks received exactly its bytes.
"""
from __future__ import annotations

import ipaddress
import os
from typing import NamedTuple

from controller.flows import path_addresses
from controller.pairings import flows_for
from testbed.core.ecmp import connection_key, ecmp_choice, ecmp_salt
from testbed.core.metrics import link_summary_of_rows
from testbed.core.rows import link_row
from testbed.ns3.faults import Faults, Timeline
from testbed.ns3.routes import plan

SAMPLE_S = 0.5
QUEUE_PACKETS = 64       # a switch port's FIFO, as the emulation's shaped ports
HOST_QUEUE_PACKETS = 1000   # a NIC's: Linux's txqueuelen; a host does not drop its own
CABLE_DELAY_S = 10e-6
SEGMENT_BYTES = 1448
SOCKET_BYTES = 4 << 20
MIN_RTO_S = 0.2          # Linux's (ns-3's own is 1 s: a lost tail cost a second)
SYN_RTO_S = 1.0          # Linux's first SYN timeout (ns-3's is 3 s)
DELACK_S = 0.04          # Linux's shortest delayed-ACK wait (ns-3's 200 ms, against a 200 ms
                         # RTO, left a connection whose acknowledgements were lost for 50 ms
                         # at one segment per 200 ms for good)
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


class Simulated(NamedTuple):
    rows: list                 # transfers.csv rows
    links: list                # links.csv rows
    link_util: dict | None     # their summary
    faults: list | None        # one record per event of the fault schedule, if any


def simulate(table, work, link_mbps: float, routes=None, faults=None) -> Simulated:
    """``work`` on ``table``'s fabric (``routes``: the table's
    :func:`~testbed.ns3.routes.plan`, when already made), with the fault schedule ``faults``
    (:func:`testbed.experiment.faultplan.resolve`'s) if any (:mod:`testbed.ns3.faults`)."""
    ns = ns3()
    timeline = Timeline(table, faults, plan) if faults else None
    net = _Network(ns, table, link_mbps, routes, timeline)
    try:
        net.pieces(work)
        links = net.run(work)
        rows = net.rows(work)
        records = net.faults.finish(net.now()) if timeline else None
    finally:
        ns.Simulator.Destroy()
    return Simulated(rows, links, link_summary_of_rows(links), records)


class _Network:
    def __init__(self, ns, table, link_mbps: float, routes=None, timeline=None):
        self.ns, self.table, self.fab, self.timeline = ns, table, table.fabric, timeline
        self.plan = timeline.plans[0] if timeline else (routes or plan(table))
        self.addresses = timeline.addresses() if timeline else self.plan.addresses
        scale = self.fab.scale_for(link_mbps)
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
        self._routes()
        self.faults = Faults(self, timeline) if timeline else None
        self.pieces_: list[dict] = []

    def now(self) -> float:
        return self.ns.Simulator.Now().GetSeconds()

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
        single = {h.name for h in self.fab.hosts if len(h.ports) == 1}
        for host in single:                  # one NIC port: everything leaves by it
            self.static[host].AddNetworkRouteTo(
                ns.Ipv4Address("0.0.0.0"), ns.Ipv4Mask("0.0.0.0"), self.port_if[(host, 0)])
        plans = self.timeline.plans if self.timeline else [self.plan]
        for p in plans:                      # a path's alias routes the same way in every
            for (sw, addr), nxt in p.switch_routes.items():  # plan: all are in place first
                if (sw, addr) not in self.via:
                    self._route(sw, addr, nxt)
            for (host, addr), port in p.host_routes.items():
                if host not in single and (host, addr) not in self.via:
                    self._route(host, addr, port)

    def reroute(self, plan_e) -> None:
        """The routes of ``plan_e`` where they differ from those in use (the ports' own
        addresses': an alias's never changes), each replacing the route it supersedes."""
        single = {h.name for h in self.fab.hosts if len(h.ports) == 1}
        changed: dict = {}
        for routes in (plan_e.switch_routes, plan_e.host_routes):
            for (node, addr), via in routes.items():
                if node not in single and self.via.get((node, addr)) != via:
                    changed.setdefault(node, {})[addr] = via
        for node, new in changed.items():
            st = self.static[node]
            for i in reversed(range(st.GetNRoutes())):
                if str(st.GetRoute(i).GetDest()) in new:
                    st.RemoveRoute(i)
            for addr, via in new.items():
                self._route(node, addr, via)

    def _start(self, ti: int, t, nbytes: int, cand: tuple, at_s: float | None, **extra) -> dict:
        """A connection carrying ``nbytes`` of transfer ``ti`` over ``cand`` (path, local
        address, remote address), started at ``at_s`` (None: now)."""
        ns, tcp = self.ns, "ns3::TcpSocketFactory"
        if len(self.pieces_) >= MAX_PIECES:
            raise ValueError(f"more than {MAX_PIECES:,} connections in one workload: "
                             f"the ns3 backend gives each its own port")
        path, local, remote = cand
        port = BASE_PORT + len(self.pieces_)
        sink = ns.PacketSinkHelper(tcp, ns.InetSocketAddress(
            ns.Ipv4Address.GetAny(), port).ConvertTo()).Install(self.node[t.dst])
        sink.Start(ns.Seconds(0.0))
        bulk = ns.BulkSendHelper(tcp, ns.InetSocketAddress(
            ns.Ipv4Address(remote), port).ConvertTo())
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(nbytes))
        bulk.SetAttribute("SendSize", ns.UintegerValue(65536))
        bulk.SetAttribute("Local", ns.AddressValue(ns.InetSocketAddress(
            ns.Ipv4Address(local), 0).ConvertTo()))
        bulk.Install(self.node[t.src]).Start(ns.Seconds(0.0 if at_s is None else at_s))
        piece = {"ti": ti, "n": nbytes, "sink": sink.Get(0).GetObject[ns.PacketSink](),
                 "port": port, "path": path, "pairing": path_addresses(self.fab, path)[:2],
                 "ready": self.now() if at_s is None else at_s, "kept": None, **extra}
        self.pieces_.append(piece)
        return piece

    def pieces(self, work) -> None:
        """Every transfer's connections, their apps installed (on the table the hosts know
        at its start, when there are faults)."""
        salt, tl, self.work = ecmp_salt(work), self.timeline, work
        for ti, t in enumerate(work.transfers):
            epoch = tl.epoch_at(t.ready_s) if tl else 0
            table = tl.tables[epoch] if tl else self.table
            paths = tl.plans[epoch].paths if tl else self.plan.paths
            try:
                flows = flows_for(table, t.src, t.dst, t.bytes)
            except ValueError:               # cut off: on its own paths all the same, as
                epoch, table, paths = 0, self.table, self.plan.paths   # an agent posts it
                flows = flows_for(table, t.src, t.dst, t.bytes)
            avoided = epoch > 0 and ({(f["src"], f["dst"]) for f in flows} != {
                (f["src"], f["dst"]) for f in flows_for(self.table, t.src, t.dst, 1)})
            for k, f in enumerate(flows):
                if f["bytes"] <= 0:
                    continue
                cands = paths[(f["src"], f["dst"])]
                key = connection_key(t, k, "tcp-per-transfer", salt)
                self._start(ti, t, f["bytes"], cands[ecmp_choice(key, len(cands))], t.ready_s,
                            key=key, avoided=avoided, moved=False)

    def move(self, tl, epoch: int, now: float) -> int:
        """Pieces in flight on paths that died continue from the byte their receiver has
        (:mod:`testbed.ns3.faults`); how many moved to another pairing."""
        damage, moved = tl.damage[epoch], 0
        if damage is None:
            return 0
        last = self._rx_times()
        for piece in list(self.pieces_):
            rx = int(piece["sink"].GetTotalRx())
            if (piece["kept"] is not None or piece["ready"] > now or rx >= piece["n"]
                    or damage.path_ok(piece["path"])):
                continue
            t = self.work.transfers[piece["ti"]]
            cands = tl.candidates(epoch, t.src, t.dst, piece["pairing"])
            if not cands:
                continue                     # cut off: it waits where it is, as TCP does
            piece["kept"] = rx               # what the receiver counts of it, from now on
            key = f"{piece['key']}>{epoch}"
            new = self._start(piece["ti"], t, piece["n"] - rx,
                              cands[ecmp_choice(key, len(cands))], None, key=key,
                              avoided=piece["avoided"],
                              since=(last.get(piece["port"]) or (None, now))[1])
            new["moved"] = new["pairing"] != piece["pairing"]
            moved += new["moved"]
        return moved

    def _rx_times(self) -> dict:
        """``port -> (first, last)`` packet received of each connection so far."""
        self.monitor.CheckForLostPackets()
        cls, out = self.monitor_helper.GetClassifier(), {}
        for fid, st in self.monitor.GetFlowStats():
            if st.rxPackets:
                out[int(cls.FindFlow(fid).destinationPort)] = (
                    st.timeFirstRxPacket.GetSeconds(), st.timeLastRxPacket.GetSeconds())
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

    def run(self, work) -> list[dict]:
        """Run until every piece is in (or the horizon), stopping for each fault event and
        control step on the way; links.csv rows."""
        ns, faults = self.ns, self.faults
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
            edge = (k + 1) * SAMPLE_S
            due = faults.next_s() if faults else None
            stop = edge if due is None or due >= edge else due
            if stop > self.now():
                ns.Simulator.Stop(ns.Seconds(stop - self.now()))
                ns.Simulator.Run()
            if faults:
                faults.run_due(stop)
            if stop < edge:
                continue
            k += 1
            now = self._carried()
            rows += [link_row(k * SAMPLE_S, hop, now[hop] - before[hop], SAMPLE_S, cap)
                     for hop, cap in self.capacity.items()]
            before = now
            done = all(p["kept"] is not None or p["sink"].GetTotalRx() >= p["n"]
                       for p in self.pieces_)
            if (done and k * SAMPLE_S > last) or k * SAMPLE_S > horizon:
                return rows

    def rows(self, work) -> list[dict]:
        """transfers.csv rows, as the other backends write them (a piece left on a dead
        path counts what its receiver had then; its successor carries the rest)."""
        times = self._rx_times()
        by_transfer: dict = {}
        for p in self.pieces_:
            by_transfer.setdefault(p["ti"], []).append(p)
        return [self._row(t, by_transfer.get(ti, []), times)
                for ti, t in enumerate(work.transfers)]

    @staticmethod
    def _row(t, mine: list, times: dict) -> dict:
        final = [p for p in mine if p["kept"] is None]
        rx = {p["port"]: int(p["sink"].GetTotalRx()) for p in final}
        got = sum(p["kept"] for p in mine if p["kept"] is not None) + sum(rx.values())
        ok = (bool(final) and got == t.bytes
              and all(rx[p["port"]] == p["n"] and p["port"] in times for p in final))
        first = min((times[p["port"]][0] for p in mine if p["port"] in times), default=None)
        end = max((times[p["port"]][1] for p in final if p["port"] in times), default=None)
        again = [times[p["port"]][0] for p in mine if p.get("moved") and p["port"] in times]
        gaps = [(times[p["port"]][0] - p["since"], times[p["port"]][0]) for p in mine
                if p.get("since") is not None and not p.get("moved") and p["port"] in times]
        gap = max(gaps, default=None)

        def r(x):
            return None if x is None else round(x, 6)
        return {"request": t.request, "chunk": t.chunk, "src": t.src, "dst": t.dst,
                "pairings": sum(1 for p in mine if "since" not in p), "bytes": t.bytes,
                "ready_s": r(t.ready_s), "start_s": r(t.ready_s), "first_byte_s": r(first),
                "end_s": r(end) if ok else None,
                "fct_ms": round((end - t.ready_s) * 1000, 3) if ok else None,
                "bytes_received": got, "verified": ok,
                "status": "ok" if ok else "incomplete",
                "attempts": 2 if again else 1,
                "retry_first_byte_s": r(max(again)) if again else None,
                "avoided": any(p.get("avoided") for p in mine),
                "moves": sum(1 for p in mine if p.get("moved")),
                "gap_s": None if gap is None else r(gap[0]),
                "gap_end_s": None if gap is None else r(gap[1])}
