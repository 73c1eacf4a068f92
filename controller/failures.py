"""Failed fabric elements (pure): which cables and switches are dead, and which directed hops
and paths that kills; elements are written ``a2``, ``g3:1``, ``a0:6``, ``a0-b1`` or
``a0:6-b1:5`` (:meth:`Failures.parse`)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Iterator

from topologies.fabric import Fabric, FabricError, Link


@dataclass(frozen=True)
class Failures:
    """Dead cables and dead switches (names).  Empty is falsy."""
    links: frozenset = frozenset()
    switches: frozenset = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "links", frozenset(self.links))
        object.__setattr__(self, "switches", frozenset(self.switches))

    def __bool__(self) -> bool:
        return bool(self.links or self.switches)

    def __or__(self, other: "Failures") -> "Failures":
        return Failures(self.links | other.links, self.switches | other.switches)

    @classmethod
    def parse(cls, fabric: Fabric, items: Iterable[str]) -> "Failures":
        """Failures from element texts (``a2``: a switch; ``g3:1``: NIC port 1 of host g3;
        ``a0:6``: the cable at port 6 of a0; ``a0-b1``: every cable between them;
        ``a0:6-b1:5``: that one cable); raises FabricError naming a bad one."""
        links, switches = set(), set()
        for item in items:
            text = item.strip()
            if "-" in text:
                ends = [_parse_end(fabric, t, text) for t in text.split("-", 1)]
                (u, up), (v, vp) = ends
                if up is not None and vp is not None:
                    link = cable_at(fabric, u, up)
                    if {(link.a, link.a_port), (link.b, link.b_port)} != {(u, up), (v, vp)}:
                        raise FabricError(f"{text}: {u}:{up} is cabled to "
                                          f"{_other_end(link, u, up)}, not {v}:{vp}")
                    links.add(link)
                    continue
                if up is not None or vp is not None:
                    raise FabricError(f"{text}: give both ports or neither")
                found = [link for _, peer, _, link in fabric.neighbors(u) if peer == v]
                if not found:
                    raise FabricError(f"{text}: no cable between {u} and {v}")
                links.update(found)
            else:
                node, port = _parse_end(fabric, text, text)
                if port is None:
                    if not fabric.is_switch(node):
                        raise FabricError(f"{text}: give a host's NIC port as {node}:<port>")
                    switches.add(node)
                else:
                    links.add(cable_at(fabric, node, port))
        return cls(links, switches)

    def describe(self, fabric: Fabric) -> dict:
        """JSON-friendly: ``{"switches": [...], "host_ports": ["g3:1"],
        "links": ["a0:6-b1:5"]}``."""
        host_ports, links = [], []
        for link in self.links:
            if fabric.is_host(link.a):
                host_ports.append(f"{link.a}:{link.a_port}")
            elif fabric.is_host(link.b):
                host_ports.append(f"{link.b}:{link.b_port}")
            else:
                links.append(f"{link.a}:{link.a_port}-{link.b}:{link.b_port}")
        return {"switches": sorted(self.switches, key=_natural),
                "host_ports": sorted(host_ports, key=_natural),
                "links": sorted(links, key=_natural)}


def _natural(text: str):
    """Sort key that puts ``g2`` before ``g10``."""
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _parse_end(fabric: Fabric, text: str, whole: str) -> tuple[str, int | None]:
    node, sep, port = text.strip().partition(":")
    if not (fabric.is_switch(node) or fabric.is_host(node)):
        raise FabricError(f"{whole}: no node named {node!r}")
    if not sep:
        return node, None
    try:
        return node, int(port)
    except ValueError:
        raise FabricError(f"{whole}: port {port!r} is not a number") from None


def _other_end(link: Link, node: str, port: int) -> str:
    return (f"{link.b}:{link.b_port}" if (link.a, link.a_port) == (node, port)
            else f"{link.a}:{link.a_port}")


def cable_at(fabric: Fabric, node: str, port: int) -> Link:
    """The cable plugged into ``port`` of ``node`` (an OpenFlow port, or a NIC port index)."""
    for my_port, _, _, link in fabric.neighbors(node):
        if my_port == port:
            return link
    raise FabricError(f"nothing is cabled to port {port} of {node}")


def switch_ports(fabric: Fabric) -> dict[tuple[int, int], tuple[str, Link]]:
    """``(dpid, OpenFlow port) -> (switch name, cable)`` for every cabled switch port: what a
    port-status message from a switch is about."""
    out = {}
    for sw in fabric.switches:
        for my_port, _, _, link in fabric.neighbors(sw.name):
            out[(sw.dpid, my_port)] = (sw.name, link)
    return out


def dead_cables(fabric: Fabric, failures: Failures) -> frozenset:
    """Every cable the failures take down: the failed cables, and every cable at a failed
    switch."""
    dead = set(failures.links)
    for sw in failures.switches:
        dead.update(link for _, _, _, link in fabric.neighbors(sw))
    return frozenset(dead)


def _hop_key(u: str, v: str) -> tuple[str, str]:
    return (u, v) if u <= v else (v, u)


class Damage:
    """:class:`Failures` resolved against a fabric.  Raises FabricError for an element the
    fabric does not have."""

    def __init__(self, fabric: Fabric, failures: Failures):
        known = set(fabric.links)
        for link in failures.links:
            if link not in known:
                raise FabricError(f"failed cable {link.a}:{link.a_port}-{link.b}:{link.b_port} "
                                  f"is not in this {fabric.kind} fabric")
        for sw in failures.switches:
            fabric.switch(sw)            # raises for an unknown name
        self.fabric = fabric
        self.failures = failures
        self.cables = dead_cables(fabric, failures)
        self.switches = failures.switches
        total: Counter = Counter(_hop_key(link.a, link.b) for link in fabric.links)
        gone: Counter = Counter(_hop_key(link.a, link.b) for link in self.cables)
        self.hops = set()
        for (u, v), count in gone.items():
            if count == total[(u, v)]:
                self.hops.update({(u, v), (v, u)})

    def hop_ok(self, u: str, v: str) -> bool:
        return (u, v) not in self.hops

    def path_ok(self, path) -> bool:
        """True when no hop of the host-to-host ``path`` is dead."""
        hops = self.hops
        return not any((path[k], path[k + 1]) in hops for k in range(len(path) - 1))

    def live_ports(self, u: str, v: str) -> list[tuple[int, int]]:
        """``(port on u, port on v)`` of the live cables between ``u`` and ``v``."""
        return [(mp, pp) for mp, peer, pp, link in self.fabric.neighbors(u)
                if peer == v and link not in self.cables]

    def live_switch_links(self) -> Iterator[Link]:
        return (link for link in self.fabric.switch_links() if link not in self.cables)


def host_pieces(fabric: Fabric, failures: Failures) -> dict[str, int]:
    """GPU -> the connected piece of what survives ``failures`` it is in (switches, cables,
    NICs, and each server's NVLink when it has one): two GPUs can reach each other exactly
    when their pieces match, since every policy's last fallback takes any surviving path.
    Linear in the fabric, where asking the route table of every pair is quadratic."""
    import networkx as nx
    damage = Damage(fabric, failures)
    g = nx.Graph()
    g.add_nodes_from(h.name for h in fabric.hosts)
    g.add_edges_from((link.a, link.b) for link in fabric.links if link not in damage.cables)
    g.add_edges_from((link.a, link.b) for link in fabric.nvlinks)
    g.remove_nodes_from(damage.switches)
    hosts = {h.name for h in fabric.hosts}
    return {node: k for k, piece in enumerate(nx.connected_components(g))
            for node in piece if node in hosts}


class CutPairs:
    """The GPU pairs ``failures`` leave no path, answering ``(src, dst) in`` without listing
    them (:func:`host_pieces`)."""

    def __init__(self, fabric: Fabric, failures: Failures):
        self.pieces = host_pieces(fabric, failures)

    def __contains__(self, pair) -> bool:
        return self.pieces[pair[0]] != self.pieces[pair[1]]


def reachable_share(fabric: Fabric, failures: Failures) -> float:
    """The share of GPUs that can still reach every other one around ``failures``: those in
    the largest piece (:func:`host_pieces`)."""
    pieces = Counter(host_pieces(fabric, failures).values())
    return max(pieces.values()) / len(fabric.hosts) if fabric.hosts else 1.0


def disconnected_count(fabric: Fabric, failures: Failures) -> int:
    """Ordered GPU pairs ``failures`` leave no path, from :func:`host_pieces`."""
    sizes = Counter(host_pieces(fabric, failures).values()).values()
    n = len(fabric.hosts)
    return n * (n - 1) - sum(c * (c - 1) for c in sizes)
