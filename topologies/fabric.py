"""The Fabric: one plain-data description of a network (GPU hosts with NIC ports, switches,
cables) that every other part reads; names, MACs, IPs and DPIDs follow from position, so
each says where its node sits."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from topologies.errors import MAX_HOSTS, FabricError  # noqa: F401  (part of this module's API)

JSON_FORMAT_VERSION = 1

# Role codes for the top byte of a switch DPID, so a DPID in a log says what the switch is.
ROLE_CODES = {"A": 0x0A, "B": 0x0B, "leaf": 0x1E, "spine": 0x5E,
              "edge": 0xE0, "agg": 0xA0, "core": 0xC0}



def host_ip(gpu: int, port: int) -> str:
    """IPv4 address of NIC port ``port`` of GPU ``gpu``, one /16 per NIC port index
    (``g13`` port 1 is ``10.1.1.13``)."""
    return f"10.{port}.{1 + gpu // 256}.{gpu % 256}"


def host_mac(gpu: int, port: int) -> str:
    """``02:<port>:00:<gpu as 3 bytes>``."""
    return "02:%02x:00:%02x:%02x:%02x" % (port, (gpu >> 16) & 255, (gpu >> 8) & 255, gpu & 255)


def gpu_of_ip(ip: str) -> tuple[int, int]:
    """Inverse of :func:`host_ip`: ``(gpu, port)``."""
    try:
        a, p, hi, lo = (int(x) for x in ip.split("."))
    except ValueError:
        raise FabricError(f"{ip!r} is not an IPv4 address") from None
    if a != 10 or not (1 <= hi <= 254) or not (0 <= lo <= 255) or not (0 <= p <= 255):
        raise FabricError(f"{ip} is not a testbed host address")
    return (hi - 1) * 256 + lo, p


def switch_dpid(group: str, index: int, pod: int = 0) -> int:
    """The role code in the top byte, then pod and index (``a2`` is ``0a00000000000002``)."""
    return (ROLE_CODES[group] << 56) | (pod << 24) | index


PREFIX_LEN = 16


# Kernel settings every GPU host gets (emulated hosts, containerlab nodes): no IPv6 (no
# router or neighbour solicitations wandering the fabric), answer ARP only for an address
# on the asking interface, and no reverse-path filter (a reply may arrive on the other port).
HOST_SYSCTLS = {
    "net.ipv6.conf.all.disable_ipv6": 1,
    "net.ipv6.conf.default.disable_ipv6": 1,
    "net.ipv4.conf.all.arp_ignore": 1,
    "net.ipv4.conf.all.arp_announce": 2,
    "net.ipv4.conf.all.rp_filter": 0,
    "net.ipv4.conf.default.rp_filter": 0,
    # a kept-open KV connection keeps its congestion window between transfers, as an RDMA
    # queue pair starts every transfer at line rate
    "net.ipv4.tcp_slow_start_after_idle": 0,
}

@dataclass(frozen=True)
class Port:
    """One NIC port of a GPU host."""
    index: int
    ip: str
    mac: str
    gbps: float


@dataclass(frozen=True)
class Host:
    """One GPU with its NIC.  ``index`` is the global GPU number."""
    name: str
    index: int
    server: int
    rank: int
    ports: tuple[Port, ...]


@dataclass(frozen=True)
class Switch:
    name: str
    group: str          # A/B (zcube), leaf/spine (roft), edge/agg/core (fattree)
    index: int          # position inside its group
    dpid: int
    attrs: tuple = ()   # extra (key, value) pairs: rail, pod, ...

    @property
    def dpid_hex(self) -> str:
        return "%016x" % self.dpid

    def attr(self, key, default=None):
        return dict(self.attrs).get(key, default)


@dataclass(frozen=True)
class Link:
    """A cable.  ``a_port``/``b_port`` are OpenFlow port numbers on switches and NIC port
    indices on hosts.  Links are stored with the host (or the lower tier) on side ``a``."""
    a: str
    a_port: int
    b: str
    b_port: int
    gbps: float


@dataclass
class Fabric:
    kind: str
    params: dict
    hosts: list[Host]
    switches: list[Switch]
    links: list[Link]
    meta: dict = field(default_factory=dict)   # closed-form facts the builder knows
    # NVLink inside each server: GPU (port -1) to its server's domain ``nv<server>`` (port =
    # rank); kept apart from ``links``, the cables, as no switch or optic carries it
    nvlinks: list[Link] = field(default_factory=list)

    def __post_init__(self):
        self._host_by_name = {h.name: h for h in self.hosts}
        self._domain_of = {link.a: link.b for link in self.nvlinks}
        self._domains = set(self._domain_of.values())
        self._switch_by_name = {s.name: s for s in self.switches}
        self._adj: dict[str, list[tuple[int, str, int, Link]]] = {}
        for link in self.links:
            self._adj.setdefault(link.a, []).append((link.a_port, link.b, link.b_port, link))
            self._adj.setdefault(link.b, []).append((link.b_port, link.a, link.a_port, link))
        # attachment[h][p] = (switch, switch_port) that NIC port p of host h plugs into
        self._attach: dict[str, list[tuple[str, int]]] = {}
        for h in self.hosts:
            att: list = [None] * len(h.ports)
            for my_port, peer, peer_port, _ in self._adj.get(h.name, ()):
                if 0 <= my_port < len(att):
                    att[my_port] = (peer, peer_port)
            self._attach[h.name] = att

    # -- lookups -------------------------------------------------------------------------
    def host(self, name: str) -> Host:
        try:
            return self._host_by_name[name]
        except KeyError:
            raise FabricError(f"no host named {name!r} in this {self.kind} fabric") from None

    def switch(self, name: str) -> Switch:
        try:
            return self._switch_by_name[name]
        except KeyError:
            raise FabricError(f"no switch named {name!r} in this {self.kind} fabric") from None

    def is_host(self, name: str) -> bool:
        return name in self._host_by_name

    def is_switch(self, name: str) -> bool:
        return name in self._switch_by_name

    def is_domain(self, name: str) -> bool:
        """True for a server's NVLink domain (``nv<server>``)."""
        return name in self._domains

    def domain_of(self, host: str) -> str | None:
        """The NVLink domain of ``host``'s server, None without NVLink."""
        return self._domain_of.get(host)

    @property
    def nvlink_gbps(self) -> float:
        """NVLink rate per GPU, each way; 0 when the servers have none."""
        return self.nvlinks[0].gbps if self.nvlinks else 0.0

    def neighbors(self, name: str) -> list[tuple[int, str, int, Link]]:
        """``(my_port, peer, peer_port, link)`` for every cable at ``name``."""
        return self._adj.get(name, [])

    def attachment(self, host: str, port: int) -> tuple[str, int]:
        """``(switch, switch_port)`` that NIC port ``port`` of ``host`` plugs into."""
        att = self._attach[host][port]
        if att is None:
            raise FabricError(f"{host} port {port} is not cabled")
        return att

    def attachments(self, host: str) -> list[tuple[str, int]]:
        return self._attach[host]

    def host_port_toward(self, host: str, switch: str) -> int:
        """NIC port index of ``host`` that plugs into ``switch``."""
        for p, (sw, _) in enumerate(self._attach[host]):
            if sw == switch:
                return p
        raise FabricError(f"{host} has no port on {switch}")

    def ports_between(self, a: str, b: str) -> list[tuple[int, int]]:
        """``(port on a, port on b)`` for every cable between ``a`` and ``b``."""
        return [(mp, pp) for mp, peer, pp, _ in self._adj.get(a, ()) if peer == b]

    def switch_links(self) -> Iterator[Link]:
        switches = self._switch_by_name
        return (link for link in self.links if link.a in switches and link.b in switches)

    def host_links(self) -> Iterator[Link]:
        hosts = self._host_by_name
        return (link for link in self.links if link.a in hosts or link.b in hosts)

    def groups(self) -> dict[str, list[Switch]]:
        out: dict[str, list[Switch]] = {}
        for s in self.switches:
            out.setdefault(s.group, []).append(s)
        return out

    def servers(self) -> dict[int, list[Host]]:
        out: dict[int, list[Host]] = {}
        for h in self.hosts:
            out.setdefault(h.server, []).append(h)
        return out

    @property
    def nic_gbps(self) -> float:
        """Total NIC bandwidth of one GPU (all ports), taken from the first host."""
        return sum(p.gbps for p in self.hosts[0].ports) if self.hosts else 0.0

    def scale_for(self, link_mbps: float) -> float:
        """The scale factor of an emulation whose GPU NICs run at ``link_mbps``: emulated
        over real NIC rate.  Links and KV sizes are scaled by it (ZCUBE.md section 6)."""
        return link_mbps / (self.nic_gbps * 1000.0)

    @property
    def name(self) -> str:
        args = ",".join(f"{k}={v}" for k, v in self.params.items() if v is not None)
        return f"{self.kind}({args})"

    @property
    def label(self) -> str:
        """Short name for tables and plots: ``zcube n=4``, ``roft 4x4 os=2``, ``fattree k=4``."""
        p = self.params
        if self.kind == "zcube" and "n" in p:
            extra = f" m={p['parallel']}" if p.get("parallel", 1) != 1 else ""
            return f"zcube n={p['n']}{extra}"
        if self.kind == "roft" and "servers" in p:
            extra = f" os={p['oversubscription']:g}" if p.get("oversubscription", 1) != 1 else ""
            return f"roft {p['servers']}x{p['gpus_per_server']}{extra}"
        if self.kind == "fattree" and "k" in p:
            return f"fattree k={p['k']}"
        return self.kind

    def __repr__(self) -> str:
        return (f"<Fabric {self.name}: {len(self.hosts)} hosts, {len(self.switches)} switches, "
                f"{len(self.links)} links>")

    # -- checks every fabric must pass --------------------------------------------------
    # -- checks every fabric must pass --------------------------------------------------
    def check_wiring(self) -> None:
        """Generic sanity: unique names, ports used once, links between known nodes,
        every NIC port cabled to a switch, addresses unique, NVLink per server.  Raises
        FabricError."""
        from topologies.wiring import check_wiring
        check_wiring(self)

    # -- export / import ----------------------------------------------------------------
    def to_networkx(self):
        """networkx graph (a MultiGraph when two nodes share several cables)."""
        import networkx as nx
        pairs = {}
        for link in self.links:
            key = frozenset((link.a, link.b))
            pairs[key] = pairs.get(key, 0) + 1
        multi = any(c > 1 for c in pairs.values())
        g = nx.MultiGraph() if multi else nx.Graph()
        g.graph.update(fabric=self.kind, params=dict(self.params), meta=dict(self.meta),
                       format_version=JSON_FORMAT_VERSION)
        for h in self.hosts:
            g.add_node(h.name, kind="host", index=h.index, server=h.server, rank=h.rank,
                       ports=[{"index": p.index, "ip": p.ip, "mac": p.mac, "gbps": p.gbps}
                              for p in h.ports])
        for s in self.switches:
            g.add_node(s.name, kind="switch", group=s.group, index=s.index, dpid=s.dpid_hex,
                       **dict(s.attrs))
        for link in self.links:
            g.add_edge(link.a, link.b, a=link.a, a_port=link.a_port, b=link.b, b_port=link.b_port,
                       gbps=link.gbps)
        for link in self.nvlinks:
            if link.b not in g:
                g.add_node(link.b, kind="nvlink")
            g.add_edge(link.a, link.b, a=link.a, a_port=link.a_port, b=link.b, b_port=link.b_port,
                       gbps=link.gbps, nvlink=True)
        return g

    def switch_graph(self, links: Iterable[Link] | None = None):
        """networkx Graph of the switches (every one a node) joined by ``links`` (default:
        every switch-to-switch cable); parallel cables are one edge."""
        import networkx as nx
        g = nx.Graph()
        g.add_nodes_from(s.name for s in self.switches)
        if links is None:
            links = self.switch_links()
        g.add_edges_from((link.a, link.b) for link in links)
        return g

    def to_json_dict(self) -> dict:
        import networkx as nx
        return nx.node_link_data(self.to_networkx(), edges="links")

    @classmethod
    def from_json_dict(cls, data: dict) -> "Fabric":
        """Rebuild a Fabric from :meth:`to_json_dict` output (or a user's hand-edited copy)."""
        try:
            graph = data.get("graph", {})
            hosts, switches, links = [], [], []
            for n in data["nodes"]:
                if n["kind"] == "host":
                    ports = tuple(Port(int(p["index"]), str(p["ip"]), str(p["mac"]),
                                       float(p["gbps"])) for p in n["ports"])
                    hosts.append(Host(n["id"], int(n["index"]), int(n["server"]), int(n["rank"]),
                                      ports))
                elif n["kind"] == "switch":
                    extra = tuple(sorted((k, v) for k, v in n.items()
                                         if k not in ("id", "kind", "group", "index", "dpid")))
                    switches.append(Switch(n["id"], n["group"], int(n["index"]),
                                           int(n["dpid"], 16), extra))
                elif n["kind"] != "nvlink":
                    raise FabricError(f"node {n.get('id')!r} has unknown kind {n['kind']!r}")
            nvlinks = []
            for e in data["links"]:
                a, b = e.get("a", e["source"]), e.get("b", e["target"])
                (nvlinks if e.get("nvlink") else links).append(
                    Link(a, int(e["a_port"]), b, int(e["b_port"]), float(e["gbps"])))
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise FabricError(f"fabric JSON is missing or mistypes field {err}") from None
        hosts.sort(key=lambda h: h.index)
        fab = cls(graph.get("fabric", "custom"), dict(graph.get("params", {})), hosts, switches,
                  links, dict(graph.get("meta", {})), nvlinks)
        fab.check_wiring()
        return fab


def load_fabric(path: str) -> Fabric:
    import json
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as err:
        raise FabricError(f"cannot read fabric file {path}: {err.strerror}") from None
    except ValueError as err:
        raise FabricError(f"fabric file {path} is not JSON: {err}") from None
    return Fabric.from_json_dict(data)


def save_fabric(fabric: Fabric, path: str) -> None:
    import json
    with open(path, "w") as f:
        json.dump(fabric.to_json_dict(), f, indent=1)


def make_host(gpu: int, server: int, rank: int, port_gbps: Iterable[float]) -> Host:
    ports = tuple(Port(p, host_ip(gpu, p), host_mac(gpu, p), float(g))
                  for p, g in enumerate(port_gbps))
    return Host(f"g{gpu}", gpu, server, rank, ports)
