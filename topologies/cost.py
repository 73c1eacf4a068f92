"""Cost model (ZCUBE.md section 4): what a fabric costs in switches, ports and optics,
counted from its cables, so a hand-edited fabric is costed as a built one."""
from __future__ import annotations

import networkx as nx

from topologies.fabric import Fabric

COST_KEYS = ("gpus", "nic_gbps", "switches", "switch_ports", "switch_port_gbps",
             "ports_per_gpu_bw", "fabric_links", "host_links", "optics_switch_side",
             "optics_switch_side_gbps", "optics_both_ends", "optics_both_ends_gbps",
             "bisection_gbps", "diameter")

LABELS = {
    "gpus": "GPUs",
    "nic_gbps": "NIC Gb/s per GPU",
    "switches": "switches",
    "switch_ports": "switch ports",
    "switch_port_gbps": "switch-port Gb/s (sum)",
    "ports_per_gpu_bw": "switch-port bw / GPU bw",
    "fabric_links": "switch-switch cables",
    "host_links": "host cables",
    "optics_switch_side": "optics, switch side",
    "optics_switch_side_gbps": "optics Gb/s, switch side",
    "optics_both_ends": "optics, both cable ends",
    "optics_both_ends_gbps": "optics Gb/s, both ends",
    "bisection_gbps": "bisection Gb/s",
    "diameter": "diameter (switches)",
}


def switch_diameter(fabric: Fabric) -> int:
    """Largest, over host pairs, of the fewest switches a packet must cross.  Exact; meant
    for fabrics without a closed form (its cost grows with distinct host attachments^2)."""
    dist = dict(nx.all_pairs_shortest_path_length(fabric.switch_graph()))
    attach = {tuple(sorted(sw for sw, _ in fabric.attachments(h.name))) for h in fabric.hosts}
    worst = 0
    for a in attach:
        for b in attach:
            best = min((dist[x].get(y, 10 ** 9) for x in a for y in b), default=10 ** 9)
            worst = max(worst, best + 1)
    return worst


def cost(fabric: Fabric) -> dict:
    switch_ports = switch_port_gbps = fabric_links = host_links = 0
    both_ends_gbps = 0.0
    for link in fabric.links:
        sw_ends = fabric.is_switch(link.a) + fabric.is_switch(link.b)
        switch_ports += sw_ends
        switch_port_gbps += sw_ends * link.gbps
        both_ends_gbps += 2 * link.gbps
        if sw_ends == 2:
            fabric_links += 1
        else:
            host_links += 1
    gpus = len(fabric.hosts)
    nic = fabric.nic_gbps
    diameter = fabric.meta.get("diameter")
    if diameter is None:
        diameter = switch_diameter(fabric)
    return {
        "fabric": fabric.label,
        "spec": fabric.name,
        "gpus": gpus,
        "nic_gbps": nic,
        "switches": len(fabric.switches),
        "switch_ports": switch_ports,
        "switch_port_gbps": switch_port_gbps,
        "ports_per_gpu_bw": switch_port_gbps / (gpus * nic) if gpus and nic else None,
        "fabric_links": fabric_links,
        "host_links": host_links,
        "optics_switch_side": switch_ports,
        "optics_switch_side_gbps": switch_port_gbps,
        "optics_both_ends": 2 * len(fabric.links),
        "optics_both_ends_gbps": both_ends_gbps,
        "bisection_gbps": fabric.meta.get("bisection_gbps"),
        "diameter": diameter,
    }


def ratios(a: dict, b: dict) -> dict:
    """``a / b`` for every numeric cost key both have (None where b is 0 or missing)."""
    out = {}
    for k in COST_KEYS:
        x, y = a.get(k), b.get(k)
        numbers = isinstance(x, (int, float)) and isinstance(y, (int, float))
        out[k] = (x / y) if numbers and y else None
    return out


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v):,}"
    return f"{v:,}"


def cost_table(costs: list[dict], keys: tuple = COST_KEYS, ratio: str = "ratio") -> str:
    """Plain-text table of ``keys``; with two fabrics a column headed ``ratio`` (first /
    second)."""
    head = ["metric"] + [c["fabric"] for c in costs]
    rows = [[LABELS[k]] + [_fmt(c.get(k)) for c in costs] for k in keys]
    if len(costs) == 2:
        r = ratios(costs[0], costs[1])
        head.append(ratio)
        for row, k in zip(rows, keys):
            row.append("-" if r[k] is None else f"{r[k]:.3f}")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    def line(r):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths)))
    out = [line(head), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]
    return "\n".join(out)
