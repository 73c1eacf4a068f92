"""The addresses a path is taken with (pure): what its GPUs bind and connect to, and those
of the NICs it crosses the fabric between, which differ where it hands over NVLink."""
from __future__ import annotations

from topologies.fabric import Fabric
from topologies.nvlink import network_part, nvlink_ip


def path_addresses(fabric: Fabric, path) -> tuple[str, str, int, int]:
    """(source IP, destination IP, source port, destination port) a path is taken with, as
    its two GPUs see it: each end's NIC address, or its NVLink address where the path hands
    over NVLink at that end (the sibling forwards it); the ports are those of the NICs the
    path crosses the fabric between.  A path inside one server: both NVLink addresses,
    ports -1."""
    net = network_part(fabric, path)
    if not net:
        return nvlink_ip(fabric, path[0]), nvlink_ip(fabric, path[-1]), -1, -1
    src_ip, dst_ip, sp, dp = network_addresses(fabric, net)
    if net[0] != path[0]:
        src_ip = nvlink_ip(fabric, path[0])
    if net[-1] != path[-1]:
        dst_ip = nvlink_ip(fabric, path[-1])
    return src_ip, dst_ip, sp, dp


def network_addresses(fabric: Fabric, net) -> tuple[str, str, int, int]:
    """(source IP, destination IP, source port, destination port) of the NICs a path's
    network part ``net`` (:func:`topologies.nvlink.network_part`) runs between."""
    s, d = net[0], net[-1]
    sp = fabric.host_port_toward(s, net[1])
    dp = fabric.host_port_toward(d, net[-2])
    return fabric.host(s).ports[sp].ip, fabric.host(d).ports[dp].ip, sp, dp


def path_links(fabric: Fabric, path) -> list[tuple[tuple, float]]:
    """``(key, Gb/s)`` of the NIC ports and NVLinks at a path's ends that each carry all of
    its bytes: the NICs it crosses the fabric between, the source's NVLink out where it
    hands over at the source, the destination's NVLink in where it does at the
    destination (keys: ``("nic", ip)``, ``("nvlink-out", gpu)``, ``("nvlink-in", gpu)``)."""
    net = network_part(fabric, path)
    out = []
    if not net or net[0] != path[0]:
        out.append((("nvlink-out", path[0]), fabric.nvlink_gbps))
    if not net or net[-1] != path[-1]:
        out.append((("nvlink-in", path[-1]), fabric.nvlink_gbps))
    if net:
        src_ip, dst_ip, sp, dp = network_addresses(fabric, net)
        out += [(("nic", src_ip), fabric.host(net[0]).ports[sp].gbps),
                (("nic", dst_ip), fabric.host(net[-1]).ports[dp].gbps)]
    return out
