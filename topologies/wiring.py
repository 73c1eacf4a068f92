"""The checks every fabric must pass, whoever built it: names, ports, cables, addresses and
NVLink domains, each refusal naming what is wrong."""
from __future__ import annotations

import ipaddress

from topologies.errors import MAX_HOSTS, FabricError


def check_wiring(fab) -> None:
    """Generic sanity: unique names, ports used once, links between known nodes,
    every NIC port cabled to a switch, addresses unique.  Raises FabricError."""
    names = set()
    for n in [h.name for h in fab.hosts] + [s.name for s in fab.switches]:
        if n in names:
            raise FabricError(f"node name {n!r} is used twice")
        names.add(n)
    if len(fab.hosts) > MAX_HOSTS:
        raise FabricError(f"{len(fab.hosts)} hosts exceed the address plan ({MAX_HOSTS})")
    _check_links(fab, names)
    _check_host_ports(fab)
    _check_nvlinks(fab, names)


def _check_nvlinks(fab, names: set) -> None:
    """Every GPU of a server, once each, on that server's one NVLink domain."""
    if not fab.nvlinks:
        return
    hosts = {h.name: h for h in fab.hosts}
    seen: dict[str, str] = {}
    for link in fab.nvlinks:
        host = hosts.get(link.a)
        if host is None or link.b in names or link.a in seen:
            raise FabricError(f"NVLink {link.a}-{link.b} must join a GPU, once, to its "
                              f"server's domain")
        if link.b != f"nv{host.server}" or not link.gbps > 0:
            raise FabricError(f"NVLink {link.a}-{link.b}: {link.a} is on server "
                              f"{host.server} (domain nv{host.server}); rate must be > 0")
        seen[link.a] = link.b
    if len(seen) != len(fab.hosts):
        missing = next(h.name for h in fab.hosts if h.name not in seen)
        raise FabricError(f"{missing} has no NVLink while its fabric's other GPUs do")


def _check_links(fab, names: set) -> None:
    """Every cable between known nodes, on ports that exist and are used once, with a
    positive bandwidth, and not from host to host."""
    hosts = {h.name: h for h in fab.hosts}
    used: set[tuple[str, int]] = set()
    for link in fab.links:
        for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
            if node not in names:
                raise FabricError(f"link {link.a}-{link.b} names unknown node {node!r}")
            host = hosts.get(node)
            if host is not None and not 0 <= port < len(host.ports):
                raise FabricError(f"link {link.a}-{link.b} uses port {port} of {node}, which "
                                  f"has {len(host.ports)} NIC port(s)")
            if (node, port) in used:
                raise FabricError(f"port {port} of {node} is cabled twice")
            used.add((node, port))
        if not link.gbps > 0:  # also refuses NaN
            raise FabricError(f"link {link.a}-{link.b} has bandwidth {link.gbps} Gb/s; "
                              f"must be > 0")
        if link.a in hosts and link.b in hosts:
            raise FabricError(f"link {link.a}-{link.b} joins two hosts directly")


def _check_host_ports(fab) -> None:
    """Every NIC port cabled, with a valid IPv4 address of its own and a positive
    bandwidth."""
    ips = set()
    for h in fab.hosts:
        for p, att in enumerate(fab.attachments(h.name)):
            if att is None:
                raise FabricError(f"{h.name} port {p} is not cabled to a switch")
        for port in h.ports:
            try:
                ipaddress.IPv4Address(port.ip)
            except ValueError:
                raise FabricError(f"{h.name} port {port.index}: {port.ip!r} is not an IPv4 "
                                  f"address") from None
            if not port.gbps > 0:
                raise FabricError(f"{h.name} port {port.index} has bandwidth {port.gbps} "
                                  f"Gb/s; must be > 0")
            if port.ip in ips:
                raise FabricError(f"address {port.ip} is used twice")
            ips.add(port.ip)
