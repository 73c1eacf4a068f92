"""NVLink inside a server: every GPU of a server joined through its NVSwitch (one domain node,
``nv<server>``), so a GPU can hand bytes to a sibling that sends them from its own NIC (rail
matching, NCCL's PXN) or take them from one whose NIC received them.  Server-internal: no
switch ports, no optics, never in ``Fabric.links``."""
from __future__ import annotations

from topologies.fabric import Fabric, Host, Link, host_ip, host_mac
from topologies.param_checks import need_positive

# An H100's NVLink: 900 GB/s counting both directions, so 450 GB/s, 3,600 Gb/s each way.
NVLINK_GBPS = 3600.0
NVLINK_PORT = -1          # a GPU's NVLink is not one of its NIC ports
NVLINK_PLANE = 254        # the address plane of NVLink, beyond any NIC port index


def nvlink_ip(fabric: Fabric, host: str) -> str:
    """The address a GPU is reached at over its server's NVLink (``10.254.x.y``, the NIC
    plan's with port 254)."""
    return host_ip(fabric.host(host).index, NVLINK_PLANE)


def nvlink_mac(fabric: Fabric, host: str) -> str:
    """The MAC of a GPU's NVLink interface on the emulation (the NIC plan's, port 254)."""
    return host_mac(fabric.host(host).index, NVLINK_PLANE)


def domain_name(server: int) -> str:
    return f"nv{server}"


def nvlinks_for(hosts: list[Host], gbps) -> list[Link]:
    """One NVLink per GPU to its server's domain, at ``gbps`` each way; none for a falsy
    ``gbps`` (the servers have no NVLink)."""
    if gbps is None or gbps is False or gbps == 0:
        return []
    rate = NVLINK_GBPS if gbps is True else need_positive("nvlink_gbps", gbps)
    return [Link(h.name, NVLINK_PORT, domain_name(h.server), h.rank, rate) for h in hosts]


def with_nvlink(params: dict, hosts: list[Host], gbps) -> list[Link]:
    """The builders' part: the NVLinks of ``hosts``, recording the rate in ``params`` when the
    servers have them (so a fabric without NVLink keeps the parameters it always had)."""
    links = nvlinks_for(hosts, gbps)
    if links:
        params["nvlink_gbps"] = links[0].gbps
    return links


def siblings(fabric: Fabric, host: str) -> list[str]:
    """The other GPUs of ``host``'s server when they share an NVLink domain, else none."""
    if fabric.domain_of(host) is None:
        return []
    h = fabric.host(host)
    return [g.name for g in fabric.servers()[h.server] if g.name != host]


def network_part(fabric: Fabric, path) -> tuple:
    """The part of a host-to-host ``path`` that crosses switches: without a leading
    ``(gpu, nv<s>)`` hand-over to a sibling and a trailing one from a sibling; empty for a
    path that stays inside one server."""
    i, j = 0, len(path) - 1
    if j >= 2 and fabric.is_domain(path[1]):
        i = 2
    if j - i >= 2 and fabric.is_domain(path[j - 1]):
        j -= 2
    return tuple(path[i:j + 1]) if j > i else ()


def nvlink_hops(fabric: Fabric, path) -> int:
    """How many NVLink hand-overs ``path`` makes (0, 1 or 2)."""
    return sum(1 for node in path[1:-1] if fabric.is_domain(node))
