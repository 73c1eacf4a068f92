"""Text views of a fabric and of a route table, for ``zcube topo`` and run logs."""
from __future__ import annotations

from collections import Counter

from .cost import cost
from .fabric import Fabric


def summary(fab: Fabric) -> str:
    c = cost(fab)
    groups = fab.groups()
    servers = fab.servers()
    out = [f"{fab.label}: {fab.name}",
           f"  {len(fab.hosts)} GPU hosts on {len(servers)} servers, "
           f"{len(fab.hosts[0].ports) if fab.hosts else 0} NIC port(s) each "
           f"({' + '.join(f'{p.gbps:g}' for p in fab.hosts[0].ports)} Gb/s)",
           "  switches: " + ", ".join(f"{len(v)} {k} ({v[0].name}..{v[-1].name})"
                                      for k, v in groups.items()),
           f"  cables: {c['host_links']} host, {c['fabric_links']} switch-switch; "
           f"diameter {c['diameter']} switches; bisection {c['bisection_gbps'] or 0:,.0f} Gb/s",
           "  switch ports in use: " + ports_in_use(fab),
           *([f"  NVLink inside each server: {fab.nvlink_gbps:,.0f} Gb/s per GPU each way "
              f"(no switch ports, no optics)"] if fab.nvlinks else []),
           "  first hosts (port: ip, mac -> switch:port):"]
    for h in fab.hosts[:min(4, len(fab.hosts))]:
        ports = "; ".join(f"p{p.index} {p.ip} {p.mac} -> "
                          f"{':'.join(map(str, fab.attachment(h.name, p.index)))}"
                          for p in h.ports)
        out.append(f"    {h.name} (server {h.server}, rank {h.rank}): {ports}")
    if len(fab.hosts) > 4:
        out.append(f"    ... {len(fab.hosts) - 4} more")
    out.append("  switch DPIDs: " + ", ".join(f"{s.name}={s.dpid_hex}" for s in fab.switches[:4])
               + (" ..." if len(fab.switches) > 4 else ""))
    return "\n".join(out) + "\n"


def ports_in_use(fab: Fabric) -> str:
    """How many ports (cables) each switch uses, in words, per group in fabric order:
    ``4 leaf switches with 8 each, 4 spine switches with 4 each``."""
    counts = Counter((s.group, len(fab.neighbors(s.name))) for s in fab.switches)
    order = list(fab.groups())
    return ", ".join(
        f"{n} {group} switch{'es' if n > 1 else ''} with {ports}{' each' if n > 1 else ''}"
        for (group, ports), n in sorted(counts.items(),
                                        key=lambda kv: (order.index(kv[0][0]), kv[0][1])))


def route_summary(table, examples: int = 4) -> str:
    """A few example pairs and the path count distribution (use --format json for all)."""
    fab = table.fabric
    hosts = [h.name for h in fab.hosts]
    picks = []
    if len(hosts) >= 2:
        step = max(1, len(hosts) // examples)
        picks = [(hosts[0], hosts[k]) for k in range(1, len(hosts), step)][:examples]
    out = [f"policy {table.policy_name} on {fab.label}: {len(hosts) * (len(hosts) - 1)} "
           f"ordered pairs"]
    for s, d in picks:
        paths = table.paths(s, d)
        for p in paths:
            sp, dp = table.port_pairing(p)
            out.append(f"  {s} -> {d}  port {sp} -> {dp}: {' - '.join(p)}")
    out.append("(all pairs: --format json; verification and link loads: --check --traffic "
               "all-to-all)")
    return "\n".join(out) + "\n"
