"""Routes through the servers' NVLink (pure).  A pair inside one server crosses only its
NVLink.  Under ``pxn`` a transfer between ranks that differ first crosses NVLink to the
source server's GPU of the destination's rank and leaves through that GPU's NIC, as NCCL's
PXN does: at the source, so the destination's own NIC writes straight into its memory and
one NIC gathers what its server's GPUs send to one rank.  Where failures cut a GPU's NIC
off, its traffic goes through a sibling's NIC at either end."""
from __future__ import annotations

from controller.failures import Damage
from controller.shortest import Path, ShortestPaths, shortest_candidates
from topologies.fabric import Fabric, FabricError
from topologies.nvlink import siblings


def inside_server(fabric: Fabric, src: str, dst: str) -> Path | None:
    """``(src, nv<s>, dst)`` when both GPUs share an NVLink domain, else None."""
    domain = fabric.domain_of(src)
    if domain is not None and domain == fabric.domain_of(dst):
        return (src, domain, dst)
    return None


def through(fabric: Fabric, src: str, dst: str, path: Path) -> Path:
    """``path`` (from a GPU of ``src``'s server to one of ``dst``'s) with the NVLink
    hand-overs that take it from ``src`` and to ``dst``."""
    head = (src, fabric.domain_of(src)) if path[0] != src else ()
    tail = (fabric.domain_of(dst), dst) if path[-1] != dst else ()
    return head + tuple(path) + tail


def rank_relay(fabric: Fabric, src: str, dst: str) -> str:
    """The GPU of ``src``'s server with ``dst``'s rank (``src`` itself when the ranks match or
    its server has no such GPU)."""
    want = fabric.host(dst).rank
    if fabric.host(src).rank == want:
        return src
    return next((g for g in siblings(fabric, src) if fabric.host(g).rank == want), src)


def nvlink_detours(fabric: Fabric, sp: ShortestPaths, damage: Damage, src: str,
                   dst: str) -> list[Path]:
    """For a pair failures cut off: the surviving shortest paths from a GPU of ``src``'s
    server to one of ``dst``'s, with their NVLink hand-overs, the fewest switches first, then
    the fewest hand-overs; none without NVLink or when every way is cut.  Of siblings that
    tie, the first: a pairing of addresses goes one way through the hosts that forward it
    (:mod:`controller.nvlink_hosts`), as one proxy GPU serves a connection."""
    if fabric.domain_of(src) is None:
        return []
    best, out, chosen = None, [], {}
    for a in [src] + siblings(fabric, src):
        for b in [dst] + siblings(fabric, dst):
            cands = shortest_candidates(fabric, sp, a, b, damage)
            if not cands:
                continue
            cost = (len(cands[0]) - 2, (a != src) + (b != dst))
            if best is None or cost < best:
                best, out, chosen = cost, [], {}
            if cost == best and chosen.setdefault((a != src, b != dst), (a, b)) == (a, b):
                out += [through(fabric, src, dst, p) for p in cands]
    return out


def need_nvlink(fabric: Fabric, policy: str) -> None:
    if not fabric.nvlinks:
        raise FabricError(f"policy {policy} needs NVLink inside the servers (nvlink_gbps); "
                          f"this {fabric.kind} fabric has none")
