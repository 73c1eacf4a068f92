"""Sub-flows and their pinning: each transfer split evenly over its NIC port pairings as
:func:`controller.pairings.flows_for` splits it, and each sub-flow hashed onto one ECMP
path by its connection's seeded key, as a select group pins a connection."""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.pairings import flow_paths
from testbed.core.ecmp import connection_key, ecmp_choice
from testbed.model.capacity import Resources


class Routes:
    """Per GPU pair, its pairings in ``flows_for`` order, each with its paths as tuples of
    hop indices (computed on first use)."""

    def __init__(self, table, hop_index: dict):
        self.table = table
        self.hop_index = hop_index
        self._pairs: dict[tuple[str, str], list] = {}

    def __call__(self, src: str, dst: str) -> list:
        """``[(flow number, (source address, destination address, lane), [path as hop
        indices, ...]), ...]`` from ``src`` to ``dst``: one per pairing (``spray``: per
        pairing and lane; ``spray:all``: per path, each the only path of its lane)."""
        r = self._pairs.get((src, dst))
        if r is None:
            hop_index = self.hop_index
            r = self._pairs[(src, dst)] = [
                (k, addrs, [tuple(hop_index[(p[i], p[i + 1])] for i in range(len(p) - 1))
                            for p in paths])
                for k, addrs, paths in flow_paths(self.table, src, dst)]
        return r


@dataclass
class SubFlows:
    """Every sub-flow of a workload, by index, and per transfer how many it has."""
    start: list = field(default_factory=list)      # its bytes flow from, s (idle connection)
    transfer: list = field(default_factory=list)   # index of its transfer
    nbytes: list = field(default_factory=list)     # bytes it sends
    links: list = field(default_factory=list)      # resource indices it crosses
    conn: list = field(default_factory=list)       # its kept-open connection, -1: its own
    addrs: list = field(default_factory=list)      # (source, destination address, lane)
    key: list = field(default_factory=list)        # what ECMP hashes to pin it to a path
    n_sub: list = field(default_factory=list)      # per transfer: its sub-flows

    def __len__(self) -> int:
        return len(self.start)

    def arrivals(self) -> list:
        """Sub-flow indices in the order they start (ties by index)."""
        start = self.start
        return sorted(range(len(start)), key=lambda f: (start[f], f))


def subflows(table, transfers, res: Resources, latency_s: float,
             transport: str = "pool", salt: str = "") -> SubFlows:
    """The sub-flows of ``transfers`` over ``table``, each pinned to one path.  A sub-flow starts
    ``latency_s`` plus the store-and-forward delay of its path after its transfer is ready
    (or later, behind the sub-flows before it on its connection, with ``pool``); with the
    datapath modelled it crosses that resource once per switch (a weight)."""
    route = Routes(table, res.hop_index)
    hop_delay = res.hop_delay
    conns: dict = {}                    # (source address, destination address) -> index
    out = SubFlows(n_sub=[0] * len(transfers))
    for i, t in enumerate(transfers):
        r = route(t.src, t.dst)
        share, extra = divmod(int(t.bytes), len(r))
        out.n_sub[i] = len(r)
        for k, addrs, paths in r:
            key = connection_key(t, k, transport, salt)
            path = paths[ecmp_choice(key, len(paths))]
            out.start.append(t.ready_s + latency_s + sum(hop_delay[h] for h in path))
            out.transfer.append(i)
            out.nbytes.append(share + (1 if k < extra else 0))
            out.links.append(crossed(path, res.dp))
            out.conn.append(conns.setdefault(addrs, len(conns)) if transport == "pool" else -1)
            out.addrs.append(addrs)
            out.key.append(key)
    return out


def crossed(path: tuple, dp: int | None) -> tuple:
    """The resources a sub-flow on ``path`` (hop indices) uses: its hops and, with the
    datapath modelled, the datapath once per switch."""
    return path if dp is None else path + (dp,) * (len(path) - 1)


def repinned(route: Routes, src: str, dst: str, addrs: tuple, key: str):
    """``(addresses, path as hop indices)`` a sub-flow of ``src -> dst`` on ``addrs`` with
    ECMP key ``key`` takes under ``route``'s table: its own pairing's paths if they are
    still routed, else another pairing's, as an agent moves a connection off a dead one;
    None when the table leaves the pair no path."""
    try:
        options = route(src, dst)
    except ValueError:                  # no route: failures cut the pair off
        return None
    mine = next((paths for _, a, paths in options if a == addrs), None)
    if mine is None:
        _, addrs, mine = options[ecmp_choice(key, len(options))]
    return addrs, mine[ecmp_choice(key, len(mine))]
