"""The classic k-ary three-tier fat tree: k pods of k/2 edge and k/2 aggregation switches,
(k/2)^2 cores, k^3/4 hosts, 5k^2/4 switches, every port at ``nic_gbps``.

Switch port numbers (OpenFlow):
  edge  p{pod}e{e}: hosts at ``1..k/2``; aggregation switch ``a`` at ``k/2 + 1 + a``;
  agg   p{pod}a{a}: edge ``e`` at ``1 + e``; core ``a * k/2 + c`` at ``k/2 + 1 + c``;
  core  c{j}:       pod ``p`` at ``1 + p``.
"""
from __future__ import annotations

from topologies.fabric import MAX_HOSTS, Fabric, FabricError, Link, Switch, make_host, switch_dpid
from topologies.nvlink import with_nvlink
from topologies.param_checks import need_int, need_positive


def fattree(k: int = 4, gpus_per_server: int = 1, nic_gbps: float = 400.0,
            nvlink_gbps: float = 0) -> Fabric:
    """The k-ary fat tree; ``nvlink_gbps`` joins each server's GPUs by NVLink (0: none)."""
    k = need_int("k", k, 2)
    if k % 2:
        raise FabricError(f"k={k} must be even")
    gps = need_int("gpus_per_server", gpus_per_server, 1)
    half = k // 2
    if half % gps:
        raise FabricError(f"gpus_per_server={gps} must divide k/2={half} (hosts per edge switch)")
    nic = need_positive("nic_gbps", nic_gbps)
    if k ** 3 // 4 > MAX_HOSTS:
        raise FabricError(f"k={k} gives {k ** 3 // 4} hosts, more than the address plan holds")
    hosts, links, switches = [], [], []
    for p in range(k):
        for e in range(half):
            switches.append(Switch(f"p{p}e{e}", "edge", p * half + e,
                                   switch_dpid("edge", e, p), (("pod", p),)))
        for a in range(half):
            switches.append(Switch(f"p{p}a{a}", "agg", p * half + a,
                                   switch_dpid("agg", a, p), (("pod", p),)))
    for j in range(half * half):
        switches.append(Switch(f"c{j}", "core", j, switch_dpid("core", j)))
    for p in range(k):
        for e in range(half):
            for h in range(half):
                g = (p * half + e) * half + h
                hosts.append(make_host(g, g // gps, g % gps, (nic,)))
                links.append(Link(f"g{g}", 0, f"p{p}e{e}", h + 1, nic))
            for a in range(half):
                links.append(Link(f"p{p}e{e}", half + 1 + a, f"p{p}a{a}", 1 + e, nic))
        for a in range(half):
            for c in range(half):
                links.append(Link(f"p{p}a{a}", half + 1 + c, f"c{a * half + c}", 1 + p, nic))
    params = {"k": k, "gpus_per_server": gps, "nic_gbps": nic}
    nvlinks = with_nvlink(params, hosts, nvlink_gbps)
    fab = Fabric("fattree", params, hosts, switches, links,
                 meta={"diameter": 5, "bisection_gbps": len(hosts) * nic / 2}, nvlinks=nvlinks)
    check(fab)
    return fab


def check(fab: Fabric) -> None:
    fab.check_wiring()
    k = fab.params["k"]
    half = k // 2
    groups = fab.groups()
    want = {"edge": k * half, "agg": k * half, "core": half * half}
    for g, count in want.items():
        if len(groups.get(g, [])) != count:
            raise FabricError(f"fattree k={k} needs {count} {g} switches, "
                              f"has {len(groups.get(g, []))}")
    for s in fab.switches:
        if len(fab.neighbors(s.name)) != k:
            raise FabricError(f"{s.name} uses {len(fab.neighbors(s.name))} ports; a k={k} "
                              f"fat tree uses all {k}")
