"""ROFT: a rail-optimised two-tier Clos (ZCUBE.md section 1), the usual fabric for training.

Local rank ``r`` of every server plugs into a leaf of rail ``r``; a rail gets more leaves
when one leaf runs out of ports.  Leaves connect to every spine with the same number of
cables.  Every port runs at ``nic_gbps`` (one NIC port per GPU).

Switch port numbers (OpenFlow):
  leaf: ports ``1..d`` to the servers it serves (in server order), ``d + 1 ..`` to spines,
        spine ``s`` cable ``k`` at ``d + 1 + s * per_pair + k``;
  spine: leaf ``l`` (global leaf index) cable ``k`` at ``1 + l * per_pair + k``.
"""
from __future__ import annotations

import math

from topologies.fabric import MAX_HOSTS, Fabric, FabricError, Link, Switch, make_host, switch_dpid
from topologies.nvlink import with_nvlink
from topologies.param_checks import need_int, need_positive


def roft(servers: int = 4, gpus_per_server: int = 4, spines: int | None = None,
         oversubscription: float = 1.0, nic_gbps: float = 400.0, radix: int = 64,
         nvlink_gbps: float = 0) -> Fabric:
    """Rail-optimised Clos of ``servers * gpus_per_server`` GPUs.

    ``oversubscription`` is leaf down/up bandwidth (1 = full bisection); it must divide the
    number of servers on a leaf.  ``spines`` defaults to one cable from every leaf to every
    spine; otherwise each leaf's uplinks are split evenly over the spines.  ``radix`` is the
    port count of every switch.  ``nvlink_gbps`` joins each server's GPUs by NVLink at that
    rate per GPU each way (True: :data:`topologies.nvlink.NVLINK_GBPS`; 0: none).
    """
    servers = need_int("servers", servers, 1)
    gps = need_int("gpus_per_server", gpus_per_server, 1)
    x = need_positive("oversubscription", oversubscription)
    nic = need_positive("nic_gbps", nic_gbps)
    radix = need_int("radix", radix, 2)
    if servers * gps < 2:
        raise FabricError("servers * gpus_per_server must be at least 2")
    if servers * gps > MAX_HOSTS:
        raise FabricError(f"{servers * gps} GPUs exceed the address plan ({MAX_HOSTS:,})")
    leaves_per_rail, d, up, n_spines, per_pair = _leaf_layout(servers, gps, spines, x, radix)
    hosts, switches, links = _wire(servers, gps, nic, leaves_per_rail, d, n_spines, per_pair)
    params = {"servers": servers, "gpus_per_server": gps, "spines": n_spines,
              "oversubscription": x, "nic_gbps": nic, "radix": radix}
    nvlinks = with_nvlink(params, hosts, nvlink_gbps)
    fab = Fabric("roft", params, hosts, switches, links,
                 meta={"diameter": 3 if gps * leaves_per_rail > 1 else 1,
                       "bisection_gbps": servers * gps * nic / 2 / (d / up)}, nvlinks=nvlinks)
    check(fab)
    return fab


def _leaf_layout(servers: int, gps: int, spines: int | None, x: float,
                 radix: int) -> tuple[int, int, int, int, int]:
    """``(leaves per rail, servers per leaf, uplinks per leaf, spines, cables per leaf-spine
    pair)``: the fewest leaves per rail whose ports hold their servers and uplinks.  Refuses
    an oversubscription, a spine count or a radix that cannot be laid out."""
    # largest number of servers one leaf can serve with its uplinks in the same radix
    d_max = max((d for d in range(1, radix) if d + math.ceil(d / x) <= radix), default=0)
    if d_max == 0:
        raise FabricError(f"radix={radix} leaves no port for hosts at oversubscription={x:g}")
    leaves_per_rail = math.ceil(servers / d_max)
    d = math.ceil(servers / leaves_per_rail)          # servers per leaf (last may have fewer)
    up = d / x
    if abs(up - round(up)) > 1e-9 or round(up) < 1:
        ok = [str(v) for v in range(1, d + 1) if d % v == 0]
        raise FabricError(f"oversubscription={x:g} must divide the {d} hosts of each leaf "
                          f"(possible: {', '.join(ok)})")
    up = int(round(up))
    n_spines = up if spines is None else need_int("spines", spines, 1)
    if up % n_spines:
        raise FabricError(f"spines={n_spines} must divide the {up} uplinks of each leaf")
    per_pair = up // n_spines
    n_leaves = gps * leaves_per_rail
    if n_leaves * per_pair > radix:
        raise FabricError(f"a spine would need {n_leaves * per_pair} ports but radix={radix}; "
                          f"use more spines, a larger radix, or a 3-tier fattree")
    return leaves_per_rail, d, up, n_spines, per_pair


def _wire(servers: int, gps: int, nic: float, leaves_per_rail: int, d: int, n_spines: int,
          per_pair: int) -> tuple[list, list, list]:
    """``(hosts, switches, links)`` of the layout, numbered as in the module docstring."""
    hosts, links, switches = [], [], []
    for r in range(gps):
        for k in range(leaves_per_rail):
            idx = r * leaves_per_rail + k
            switches.append(Switch(f"l{idx}", "leaf", idx, switch_dpid("leaf", idx),
                                   (("rail", r),)))
    switches += [Switch(f"s{s}", "spine", s, switch_dpid("spine", s)) for s in range(n_spines)]
    for srv in range(servers):
        k, pos = divmod(srv, d)
        for r in range(gps):
            g = srv * gps + r
            hosts.append(make_host(g, srv, r, (nic,)))
            links.append(Link(f"g{g}", 0, f"l{r * leaves_per_rail + k}", pos + 1, nic))
    hosts.sort(key=lambda h: h.index)
    for leaf in range(gps * leaves_per_rail):
        for s in range(n_spines):
            for c in range(per_pair):
                links.append(Link(f"l{leaf}", d + 1 + s * per_pair + c,
                                  f"s{s}", 1 + leaf * per_pair + c, nic))
    return hosts, switches, links


def check(fab: Fabric) -> None:
    """Every GPU on a leaf of its rank's rail; every leaf cabled equally to every spine."""
    fab.check_wiring()
    groups = fab.groups()
    leaves = groups.get("leaf", [])
    spines = groups.get("spine", [])
    for h in fab.hosts:
        att = fab.attachments(h.name)
        if len(att) != 1:
            raise FabricError(f"{h.name} must have one NIC port in roft, has {len(att)}")
        leaf = fab.switch(att[0][0])
        if leaf.group != "leaf" or leaf.attr("rail") != h.rank:
            raise FabricError(f"{h.name} (rank {h.rank}) is on {leaf.name}, "
                              f"not a rail-{h.rank} leaf")
    counts: dict[tuple[str, str], int] = {}
    for link in fab.switch_links():
        if fab.switch(link.a).group != "leaf" or fab.switch(link.b).group != "spine":
            raise FabricError(f"link {link.a}-{link.b} must join a leaf to a spine")
        counts[(link.a, link.b)] = counts.get((link.a, link.b), 0) + 1
    want = {counts.get((leaves[0].name, s.name), 0) for s in spines} if leaves else set()
    for leaf in leaves:
        got = {counts.get((leaf.name, s.name), 0) for s in spines}
        if got != want or 0 in got:
            raise FabricError(f"{leaf.name} is not cabled equally to every spine")
