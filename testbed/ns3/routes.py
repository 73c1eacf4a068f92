"""Static routes for ns-3 that follow the route table's paths exactly, ECMP and spraying
included (pure): every path gets an alias address to route by, as destination routes alone
cannot send two connections to one address two ways."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from controller.addresses import network_addresses, path_addresses
from topologies.nvlink import network_part

ALIAS_BASE = ipaddress.IPv4Address("100.64.0.1")


class NotRoutable(ValueError):
    pass


@dataclass
class Plan:
    switch_routes: dict = field(default_factory=dict)   # (switch, address) -> next node
    host_routes: dict = field(default_factory=dict)     # (host, address) -> NIC port index
    addresses: dict = field(default_factory=dict)       # (host, port) -> [address, ...]
    paths: dict = field(default_factory=dict)           # pairing -> [(path, local, remote)]


def plan(table, alias: dict | None = None) -> Plan:
    """Addresses and routes for every ordered pair's paths: a path ``g - s1 - s2 .. sk - d`` is
    keyed by its switches after the first, each NIC port has an alias address per key of the
    paths ending at it (key ``()``: its own address), and each switch routes an alias to the
    key's next switch; acknowledgements return along the table's first path.  A path that
    hands over NVLink is routed between the NICs it crosses the fabric between (its
    connection runs from and to those GPUs, :mod:`testbed.ns3.transfers`); one inside a
    server has no route.  ``alias``
    (``(host, port, key) -> address``), shared between the plans of one fabric's tables
    with and without failures, gives a path the same alias in all of them, so an alias's
    route is the same in every plan: the next switch of its key."""
    fab = table.fabric
    out = Plan()
    alias = {} if alias is None else alias
    given: set = set()
    for h in fab.hosts:
        for p in h.ports:
            out.addresses[(h.name, p.index)] = [p.ip]

    def address(host: str, port: int, key: tuple) -> str:
        if not key:
            return fab.host(host).ports[port].ip
        if (host, port, key) not in alias:
            alias[(host, port, key)] = str(ALIAS_BASE + len(alias))
        ip = alias[(host, port, key)]
        if ip not in given:
            given.add(ip)
            out.addresses[(host, port)].append(ip)
        return ip

    def put(store, k, v):
        if store.setdefault(k, v) != v:
            raise NotRoutable(f"{k[0]} would send {k[1]} two ways ({store[k]} and {v})")
    for s in fab.hosts:
        for d in fab.hosts:
            if s is d:
                continue
            for path in table.paths(s.name, d.name):
                net = network_part(fab, path)
                if not net:
                    continue                 # inside one server: NVLink, no network
                src_ip, dst_ip, sp, dp = network_addresses(fab, net)
                remote = address(net[-1], dp, tuple(net[2:-1]))
                out.paths.setdefault(path_addresses(fab, path)[:2], []).append(
                    (tuple(path), src_ip, remote))
                put(out.host_routes, (net[0], remote), sp)
                out.host_routes.setdefault((net[0], dst_ip), sp)
                for i in range(1, len(net) - 1):
                    put(out.switch_routes, (net[i], remote), net[i + 1])
                    out.switch_routes.setdefault((net[i], dst_ip), net[i + 1])
    return out
