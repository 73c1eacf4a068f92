"""Kept-open connections on ns-3 (``transport: pool``): one TCP connection per pairing and
lane, opened at the start and pinned to a path by the model's seeded hash, its transfers
sent in order and each one's completion read from the receiver's byte count."""
from __future__ import annotations

from testbed.core.ecmp import ecmp_choice

POOL_SNDBUF = 1 << 31    # every byte a connection is given waits in its send buffer (ns-3
                         # holds no payload for it); a workload that gives one more fails
_MARKS = """
#include "ns3/packet-sink.h"
#include "ns3/simulator.h"
namespace zcube_ns3 {
struct Marks {
  std::vector<uint64_t> starts, ends;
  std::vector<double> first, done;
  uint64_t rx = 0;
  double last = -1;
  size_t nf = 0, nd = 0;
  void Add(uint64_t start, uint64_t end) {
    starts.push_back(start); ends.push_back(end); first.push_back(-1); done.push_back(-1);
  }
  void Rx(ns3::Ptr<const ns3::Packet> p, const ns3::Address&) {
    rx += p->GetSize();
    double now = ns3::Simulator::Now().GetSeconds();
    last = now;
    while (nf < starts.size() && rx > starts[nf]) { first[nf++] = now; }
    while (nd < ends.size() && rx >= ends[nd]) { done[nd++] = now; }
  }
};
inline void Watch(ns3::Ptr<ns3::PacketSink> sink, Marks* m) {
  sink->TraceConnectWithoutContext("Rx", ns3::MakeCallback(&Marks::Rx, m));
}
}
"""
_DEFINED: list = []


def _cpp():
    if not _DEFINED:
        import cppyy
        cppyy.cppdef(_MARKS)
        _DEFINED.append(cppyy.gbl.zcube_ns3)
    return _DEFINED[0]


class Pool:
    """The kept-open connections of one simulated network (``net``: its
    :class:`testbed.ns3.simulate._Network`)."""

    def __init__(self, net):
        self.net, self.cpp = net, _cpp()
        self.conns: dict = {}            # (pairing, lane) -> the connection in use
        self.all: list = []              # every connection opened, kept alive for ns-3

    def open(self, src: str, dst: str, pairing: tuple, lane: int, cands: list, key: str):
        """The connection of ``pairing`` and ``lane`` over one of ``cands`` (path, local,
        remote), chosen by ``key``'s hash, opened now."""
        ns, net = self.net.ns, self.net
        path, local, remote = cands[ecmp_choice(key, len(cands))]
        port, sink = net.sink(dst)
        marks = self.cpp.Marks()
        self.cpp.Watch(sink, marks)
        sock = ns.Socket.CreateSocket(net.node[src],
                                      ns.TypeId.LookupByName("ns3::TcpSocketFactory"))
        sock.SetAttribute("SndBufSize", ns.UintegerValue(POOL_SNDBUF - 1))
        sock.Bind(ns.InetSocketAddress(ns.Ipv4Address(local), 0).ConvertTo())
        sock.Connect(ns.InetSocketAddress(ns.Ipv4Address(remote), port).ConvertTo())
        conn = {"sock": sock, "marks": marks, "path": path, "sent": 0, "key": key,
                "src": src, "dst": dst, "pairing": pairing, "lane": lane}
        self.conns[(pairing, lane)] = conn
        self.all.append((conn, sink))
        return conn

    def send(self, piece: dict) -> None:
        """Post ``piece`` on its pairing's connection, now."""
        conn = self.conns[(piece["pairing"], piece["lane"])]
        n = piece["n"]
        if conn["sock"].Send(self.net.ns.Packet(n), 0) < 0:
            raise ValueError(f"one kept-open connection was given more than "
                             f"{POOL_SNDBUF:,} bytes")
        piece.update(conn=conn, mark=len(conn["marks"].ends), path=conn["path"],
                     start=conn["sent"])
        conn["marks"].Add(conn["sent"], conn["sent"] + n)
        conn["sent"] += n

    @staticmethod
    def rx(piece: dict) -> int:
        """Bytes of ``piece`` its receiver has."""
        if "conn" not in piece:
            return 0
        got = int(piece["conn"]["marks"].rx) - piece["start"]
        return max(0, min(piece["n"], got))

    @staticmethod
    def times(piece: dict) -> tuple | None:
        """(first byte, last byte so far) received of ``piece``, None before its first."""
        if "conn" not in piece:
            return None
        m, k = piece["conn"]["marks"], piece["mark"]
        first, done = float(m.first[k]), float(m.done[k])
        return None if first < 0 else (first, done if done >= 0 else float(m.last))

    def replace(self, conn: dict, cands: list, epoch: int) -> None:
        """A connection whose path died: its pairing's next one over ``cands``, if any."""
        if cands:
            self.open(conn["src"], conn["dst"], conn["pairing"], conn["lane"], cands,
                      f"{conn['key']}>{epoch}")
