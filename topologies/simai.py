"""A Fabric as the ns-3 topology file SimAI (astra-sim on ns-3) reads, pure; routing is
SimAI's own, not the testbed's policies."""
from __future__ import annotations

import math
import re

from .fabric import Fabric, FabricError

DEFAULT_GPU_TYPE = "H100"
DEFAULT_NVLINK_GBPS = 2880.0
DEFAULT_LATENCY_MS = 0.0005
DEFAULT_NVLINK_LATENCY_MS = 0.000025


def _decimal(x: float) -> str:
    """A plain decimal (never ``2.5e-05``), without trailing zeros."""
    text = f"{x:.9f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def rate(gbps: float) -> str:
    return f"{_decimal(gbps)}Gbps"


def latency(ms: float) -> str:
    return f"{_decimal(ms)}ms"


def _need(name: str, value, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FabricError(f"{name} must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise FabricError(f"{name} must be {'greater than' if positive else 'at least'} 0, "
                          f"got {value:g}")
    return float(value)


def _nvlink_rate(fabric: Fabric, gbps: float | None) -> float:
    """The NVLink rate to write: the fabric's own, else ``gbps``, else SimAI's default."""
    if gbps is None:
        gbps = fabric.nvlink_gbps or DEFAULT_NVLINK_GBPS
    nvlink = _need("NVLink rate", gbps, True)
    if fabric.nvlinks and nvlink != fabric.nvlink_gbps:
        raise FabricError(f"this fabric's NVLink runs at {fabric.nvlink_gbps:g} Gb/s; the "
                          f"export's NVLink rate ({nvlink:g}) must be the same")
    return nvlink


def simai_lines(fabric: Fabric, gpu_type: str = DEFAULT_GPU_TYPE,
                nvlink_gbps: float | None = None,
                latency_ms: float = DEFAULT_LATENCY_MS,
                nvlink_latency_ms: float = DEFAULT_NVLINK_LATENCY_MS,
                error_rate: float = 0.0, nvswitches_per_server: int = 1) -> list[str]:
    """The topology file's lines (:func:`to_simai` says what they hold)."""
    if not isinstance(gpu_type, str) or not re.match(r"^\S+$", gpu_type):
        raise FabricError(f"GPU type {gpu_type!r} must be one word, e.g. {DEFAULT_GPU_TYPE}")
    nvlink = _nvlink_rate(fabric, nvlink_gbps)
    lat = _need("link latency", latency_ms, False)
    nvlat = _need("NVLink latency", nvlink_latency_ms, False)
    err = _need("error rate", error_rate, False)
    if (isinstance(nvswitches_per_server, bool) or not isinstance(nvswitches_per_server, int)
            or nvswitches_per_server < 0):
        raise FabricError(f"NVSwitches per server must be a whole number >= 0, "
                          f"got {nvswitches_per_server!r}")
    if not fabric.hosts:
        raise FabricError("a SimAI topology needs at least one GPU")
    hosts = sorted(fabric.hosts, key=lambda h: h.index)
    gpu_id = {h.name: i for i, h in enumerate(hosts)}
    by_server = fabric.servers()                 # once: building it walks every host
    servers = sorted(by_server)
    sizes = {len(by_server[s]) for s in servers}
    if len(sizes) != 1:
        raise FabricError(f"servers hold {sorted(sizes)} GPUs; SimAI needs the same number on "
                          f"every server")
    gps = sizes.pop()
    n = len(hosts)
    nv_first = {srv: n + k * nvswitches_per_server for k, srv in enumerate(servers)}
    n_nv = len(servers) * nvswitches_per_server
    switch_id = {s.name: n + n_nv + i for i, s in enumerate(fabric.switches)}

    def node(name: str) -> int:
        return gpu_id[name] if name in gpu_id else switch_id[name]

    def line(src: int, dst: int, gbps: float, ms: float) -> str:
        return f"{src} {dst} {rate(gbps)} {latency(ms)} {_decimal(err)}"

    links: list[str] = []
    for h in hosts:
        g = gpu_id[h.name]
        links += [line(g, nv_first[h.server] + k, nvlink, nvlat)
                  for k in range(nvswitches_per_server)]
        peers: dict[int, float] = {}          # by NIC port order; parallel cables summed
        for _, peer, _, cable in sorted(fabric.neighbors(h.name), key=lambda x: x[0]):
            peers[node(peer)] = peers.get(node(peer), 0.0) + cable.gbps
        links += [line(g, peer, gbps, lat) for peer, gbps in peers.items()]
    pairs: dict[tuple[int, int], float] = {}
    for cable in fabric.switch_links():
        key = (node(cable.a), node(cable.b))
        if key[::-1] in pairs:
            key = key[::-1]
        pairs[key] = pairs.get(key, 0.0) + cable.gbps
    links += [line(a, b, gbps, lat) for (a, b), gbps in pairs.items()]
    switches = [str(i) for i in range(n, n + n_nv + len(fabric.switches))]
    header = (f"{n + n_nv + len(fabric.switches)} {gps} {n_nv} {len(fabric.switches)} "
              f"{len(links)} {gpu_type}")
    return [header, " ".join(switches)] + links


def to_simai(fabric: Fabric, **options) -> str:
    """``fabric`` as SimAI's topology file, in the format SimAI's own generator writes::

        <nodes> <gpus per server> <NVSwitches> <other switches> <links> <GPU type>
        <ids of all switches, NVSwitches first>
        <src> <dst> <rate> <latency> <error rate>        one line per link

    GPU ``g`` is node ``g`` (one node however many NIC ports: each port's cable is a link of
    its own); then ``nvswitches_per_server`` NVSwitches per server, each linked to its
    server's GPUs at ``nvlink_gbps`` (default: the fabric's NVLink rate, or SimAI's
    generator default, 2,880 Gb/s, for a fabric without one); then the Fabric's switches in
    order.  Links: each GPU's NVLink links, then its NIC port links, then the switch cables,
    parallel cables merged into one line with their summed rate.  All servers must hold as
    many GPUs."""
    return "\n".join(simai_lines(fabric, **options)) + "\n"
