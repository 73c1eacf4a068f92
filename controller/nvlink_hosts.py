"""What the hosts of an NVLink fabric need beyond their NIC routes (pure): each GPU's NVLink
address and its siblings', and for every path that hands over NVLink, the routes that take
it to the sibling, out of the sibling's NIC and back (its acknowledgements) at every host
on the way.  A sibling forwards what reaches it on NVLink by its own table, selected by
the interface it arrived on; a GPU's own addresses select tables of their own, so a route
through a sibling never competes with the GPU's NIC routes to the same address."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from controller.addresses import network_addresses, path_addresses
from topologies.nvlink import NVLINK_PORT, network_part, nvlink_ip, nvlink_mac, siblings

TABLE_FORWARD = 1999      # what a GPU forwards between its NVLink and its NIC
TABLE_BASE = 1000         # + a NIC port's index (NVLink: + 254): routes from that address


def table_of(port: int) -> int:
    """The routing table of what a GPU sends from its address on ``port`` (NVLink: -1)."""
    return TABLE_BASE + (254 if port == NVLINK_PORT else port)


@dataclass
class NvlinkConfig:
    """One GPU's NVLink part: its address and MAC; routes ``(table, prefix, port, via,
    src)`` (port -1: the NVLink interface; via: the sibling's NVLink address or None) and
    neighbours ``(ip, mac, port)`` besides its NIC routes."""
    address: str
    mac: str
    routes: list = field(default_factory=list)
    neighbours: list = field(default_factory=list)


def used_ends(table, src: str, dst: str) -> dict:
    """Per pairing, the ends of the network part its hosts route over: its first path's
    (a host routes one address one way, so one sibling per pairing and direction)."""
    out: dict = {}
    for path in table.paths(src, dst):
        net = network_part(table.fabric, path)
        if net:
            out.setdefault(path_addresses(table.fabric, path)[:2], (net[0], net[-1]))
    return out


def through_hosts(table, src: str, dst: str):
    """``(path, network part, pairing, handed)`` for every path of the pair whose routes are
    made here (NVLink fabrics only): one that hands over NVLink (``handed``, both ways), or
    one whose return the reverse pair's routes do not give (it answers from the NIC
    address a reverse pair that hands over never uses), each between its pairing's
    :func:`used_ends`."""
    fabric = table.fabric
    if not fabric.nvlinks:
        return
    ends = used_ends(table, src, dst)
    back = None
    for path in table.paths(src, dst):
        net = network_part(fabric, path)
        if not net:
            continue
        pairing = path_addresses(fabric, path)[:2]
        if ends[pairing] != (net[0], net[-1]):
            continue
        if len(net) != len(path):
            yield path, net, pairing, True
            continue
        if back is None:
            back = {path_addresses(fabric, p)[:2] for p in table.paths(dst, src)}
        if pairing[::-1] not in back:
            yield path, net, pairing, False


def nvlink_configs(table) -> dict[str, NvlinkConfig]:
    """Every GPU's :class:`NvlinkConfig` (none without NVLink); where two paths would set
    one route two ways, the first path's stays (the verifier's traces show the other)."""
    fabric = table.fabric
    if not fabric.nvlinks:
        return {}
    out = {h.name: NvlinkConfig(nvlink_ip(fabric, h.name), nvlink_mac(fabric, h.name))
           for h in fabric.hosts}
    routes: dict = defaultdict(dict)          # host -> (table, prefix) -> route
    neigh: dict = defaultdict(dict)           # host -> (ip, port) -> mac
    for name, cfg in out.items():
        for sib in siblings(fabric, name):
            ip = out[sib].address
            routes[name][(254, f"{ip}/32")] = (254, f"{ip}/32", NVLINK_PORT, None, cfg.address)
            neigh[name][(ip, NVLINK_PORT)] = out[sib].mac
    for s, d in table.pairs():
        for path, net, (a_src, a_dst), handed in through_hosts(table, s, d):
            if handed:
                _one_way(fabric, out, routes, neigh, path, net, a_src, a_dst)
            _one_way(fabric, out, routes, neigh, path[::-1], net[::-1], a_dst, a_src)
    for name, cfg in out.items():
        cfg.routes = sorted(routes[name].values(), key=lambda r: (r[0], r[1]))
        cfg.neighbours = sorted((ip, mac, port) for (ip, port), mac in neigh[name].items())
    return out


def _one_way(fabric, out, routes, neigh, path, net, a_src, a_dst) -> None:
    """The routes and neighbours that carry ``path`` one way: from its first GPU, through a
    sibling's NIC where it starts over NVLink, to the NIC at the network part's end (which
    reaches a sibling's NVLink address by the NVLink route every GPU has)."""
    sender, relay = path[0], net[0]
    _, _, rp, ep = network_addresses(fabric, net)
    mac_end = fabric.host(net[-1]).ports[ep].mac
    prefix = f"{a_dst}/32"
    if relay != sender:
        routes[sender].setdefault((table_of(NVLINK_PORT), prefix), (
            table_of(NVLINK_PORT), prefix, NVLINK_PORT, out[relay].address, a_src))
        routes[relay].setdefault((TABLE_FORWARD, prefix), (
            TABLE_FORWARD, prefix, rp, None, None))
        neigh[relay].setdefault((a_dst, rp), mac_end)
    else:
        routes[sender].setdefault((table_of(rp), prefix), (table_of(rp), prefix, rp, None, a_src))
        neigh[sender].setdefault((a_dst, rp), mac_end)
