"""Shortest switch paths of a fabric, and of the cables that survive its failures (pure):
what ECMP and every policy's last fallback route over."""
from __future__ import annotations

import networkx as nx

from controller.failures import Damage
from topologies.fabric import Fabric

Path = tuple


class ShortestPaths:
    """All shortest switch-to-switch paths of a fabric, computed lazily and cached; with
    ``damage``, over the cables that survive it only."""

    def __init__(self, fabric: Fabric, damage: Damage | None = None):
        self.fabric = fabric
        links = fabric.switch_links() if damage is None else damage.live_switch_links()
        self.graph = fabric.switch_graph(links)
        self._dist: dict[str, dict[str, int]] = {}
        self._paths: dict[tuple[str, str], list[tuple[str, ...]]] = {}

    def dist_from(self, src: str) -> dict[str, int]:
        """Hops from switch ``src`` to every switch it reaches."""
        d = self._dist.get(src)
        if d is None:
            d = self._dist[src] = nx.single_source_shortest_path_length(self.graph, src)
        return d

    def distance(self, u: str, v: str) -> int | None:
        return self.dist_from(v).get(u)

    def paths(self, u: str, v: str) -> list[tuple[str, ...]]:
        """Every shortest switch sequence from ``u`` to ``v`` (inclusive), sorted (the order
        ECMP buckets and the ``shortest`` hash depend on)."""
        key = (u, v)
        got = self._paths.get(key)
        if got is None:
            try:
                got = sorted(tuple(p) for p in nx.all_shortest_paths(self.graph, u, v))
            except nx.NetworkXNoPath:
                got = []
            self._paths[key] = got
        return got


def shortest_candidates(fabric: Fabric, sp: ShortestPaths, src: str, dst: str,
                         damage: Damage | None = None) -> list[Path]:
    """Every shortest path over every NIC port pairing (``sp`` and ``damage`` agreeing on
    what survives)."""
    best, out = None, []
    for sw_s, _ in fabric.attachments(src):
        if damage is not None and not damage.hop_ok(src, sw_s):
            continue
        for sw_d, _ in fabric.attachments(dst):
            if damage is not None and not damage.hop_ok(sw_d, dst):
                continue
            dist = sp.distance(sw_s, sw_d)
            if dist is None:
                continue
            if best is None or dist < best:
                best, out = dist, []
            if dist == best:
                out.extend((src,) + p + (dst,) for p in sp.paths(sw_s, sw_d))
    return out
