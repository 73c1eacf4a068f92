"""Which NIC port pairings a transfer between two GPUs uses, from the route table (pure):
every backend splits a transfer evenly over them, one connection each, or ``lanes``
connections each under the ``spray`` policy."""
from __future__ import annotations

from controller.flows import path_addresses
from topologies.nvlink import nvlink_ip


def flows_for(table, src: str, dst: str, size: int) -> list[dict]:
    """Split ``size`` bytes evenly over the (source IP, destination IP) pairings used and,
    within each, over the policy's ``lanes`` (flows ordered by pairing, then lane)."""
    fabric = table.fabric
    pairings = sorted({path_addresses(fabric, p)[:2] for p in table.paths(src, dst)})
    if not pairings:
        raise ValueError(f"no route from {src} to {dst}")
    lanes = getattr(table.policy, "lanes", 1)
    share, extra = divmod(size, len(pairings) * lanes)
    # when a flow's connection dies: the policy's other pairings first, then any other
    # pair of addresses (the table with failures may route one the policy did not use,
    # through a sibling's NIC over NVLink too)
    every = pairings + [(a, b) for a in addresses_of(fabric, src)
                        for b in addresses_of(fabric, dst) if (a, b) not in pairings]
    flows = []
    for s, d in pairings:
        alternates = [list(p) for p in every if p != (s, d)]
        for lane in range(lanes):
            flow = {"src": s, "dst": d, "bytes": share + (1 if len(flows) < extra else 0),
                    "alternates": alternates}
            if lanes > 1:
                flow["lane"] = lane
            flows.append(flow)
    return flows


def addresses_of(fabric, host: str) -> list[str]:
    """The addresses a GPU sends and receives on: its NIC ports' and, with NVLink, its
    NVLink address (a transfer handed over a sibling's NIC)."""
    out = [p.ip for p in fabric.host(host).ports]
    return out + ([nvlink_ip(fabric, host)] if fabric.domain_of(host) is not None else [])


def pairings_down(table) -> dict[str, list[tuple[str, str]]]:
    """Per source host, every (source IP, destination IP) pairing of its NIC ports with
    another host's that ``table`` routes no path over (a cut cable, a dead switch, a port
    left out by the policy), sorted: what its agent must not start a transfer on or keep one
    on, as a NIC driver knows a dead link and a fabric manager a dead route."""
    fabric = table.fabric
    out: dict[str, list] = {}
    for src in fabric.hosts:
        down = []
        mine = addresses_of(fabric, src.name)
        for dst in fabric.hosts:
            if dst.name == src.name:
                continue
            routed = {path_addresses(fabric, p)[:2] for p in table.paths(src.name, dst.name)}
            down += [(a, b) for a in mine for b in addresses_of(fabric, dst.name)
                     if (a, b) not in routed]
        out[src.name] = sorted(down)
    return out


def mean_switches(table, src: str, dst: str) -> float:
    """Switches a ``src`` -> ``dst`` transfer crosses, averaged over the paths it is split
    across."""
    paths = table.paths(src, dst)
    is_switch = table.fabric.is_switch
    return sum(sum(1 for node in p if is_switch(node)) for p in paths) / len(paths)


def flow_paths(table, src: str, dst: str) -> list[tuple[int, tuple[str, str, int], list]]:
    """``[(flow number, (source address, destination address, lane), [path, ...]), ...]``
    from ``src`` to ``dst``, in :func:`flows_for` order, each with the paths its flow may be
    pinned to (``spray:all``, a policy that spreads evenly: one lane per path, each the only
    path of its lane).  What every backend pins a connection over."""
    by_pairing: dict = {}
    for p in table.paths(src, dst):
        by_pairing.setdefault(path_addresses(table.fabric, p)[:2], []).append(tuple(p))
    order = [(f["src"], f["dst"], f.get("lane", 0)) for f in flows_for(table, src, dst, 0)]
    if getattr(table.policy, "even", False):
        flows = [((s, d, j), [path]) for s, d, _ in order
                 for j, path in enumerate(by_pairing[(s, d)])]
    else:
        flows = [(pr, by_pairing[pr[:2]]) for pr in order]
    return [(k, addrs, paths) for k, (addrs, paths) in enumerate(flows)]
