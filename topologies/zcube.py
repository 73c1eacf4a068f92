"""ZCube: two switch groups joined as a complete bipartite graph (ZCUBE.md section 2).

GPU ``g`` sits at ``seg = g // n``, ``rail = g % n``; NIC port 0 plugs into ``A[seg]`` and
NIC port 1 into ``B[rail]``.  Every ``A[i]`` has ``parallel`` cables to every ``B[j]``.

Switch port numbers (OpenFlow):
  A[i]: port ``rail + 1`` to GPU (i, rail); port ``n + 1 + j * parallel + k`` to B[j], cable k.
  B[j]: port ``seg + 1``  to GPU (seg, j);  port ``n + 1 + i * parallel + k`` to A[i], cable k.
"""
from __future__ import annotations

from topologies.fabric import MAX_HOSTS, Fabric, FabricError, Link, Switch, make_host, switch_dpid
from topologies.nvlink import with_nvlink
from topologies.param_checks import need_int, need_positive


def zcube(n: int = 4, gpus_per_server: int | None = None, parallel: int = 1,
          nic_gbps: float = 400.0, nvlink_gbps: float = 0) -> Fabric:
    """ZCube with ``n`` switches per group and ``n * n`` GPUs.

    ``gpus_per_server`` must divide ``n`` (default ``n``: one server per A switch);
    each NIC port runs at ``nic_gbps / 2`` and so does every switch-to-switch cable.
    ``nvlink_gbps`` joins each server's GPUs by NVLink at that rate per GPU each way (True:
    :data:`topologies.nvlink.NVLINK_GBPS`; 0: none).
    """
    n = need_int("n", n, 2)
    gps = n if gpus_per_server is None else need_int("gpus_per_server", gpus_per_server, 1)
    if n % gps:
        raise FabricError(f"gpus_per_server={gps} must divide n={n} so that A[seg] serves "
                          f"whole servers")
    m = need_int("parallel", parallel, 1)
    nic = need_positive("nic_gbps", nic_gbps)
    if n * n > MAX_HOSTS:
        raise FabricError(f"n={n} gives {n * n} GPUs, more than the address plan holds "
                          f"({MAX_HOSTS:,})")
    port_gbps = nic / 2
    hosts, links = [], []
    for g in range(n * n):
        seg, rail = divmod(g, n)
        hosts.append(make_host(g, g // gps, g % gps, (port_gbps, port_gbps)))
        links.append(Link(f"g{g}", 0, f"a{seg}", rail + 1, port_gbps))
        links.append(Link(f"g{g}", 1, f"b{rail}", seg + 1, port_gbps))
    for i in range(n):
        for j in range(n):
            for k in range(m):
                links.append(Link(f"a{i}", n + 1 + j * m + k, f"b{j}", n + 1 + i * m + k,
                                  port_gbps))
    switches = ([Switch(f"a{i}", "A", i, switch_dpid("A", i)) for i in range(n)]
                + [Switch(f"b{j}", "B", j, switch_dpid("B", j)) for j in range(n)])
    params = {"n": n, "gpus_per_server": gps, "parallel": m, "nic_gbps": nic}
    nvlinks = with_nvlink(params, hosts, nvlink_gbps)
    fab = Fabric("zcube", params, hosts, switches, links,
                 meta={"diameter": 2, "bisection_gbps": n * n * nic / 2}, nvlinks=nvlinks)
    check(fab)
    return fab


def check(fab: Fabric) -> None:
    """ZCube invariants (ZCUBE.md section 2).  Raises FabricError naming what is wrong."""
    fab.check_wiring()
    groups = fab.groups()
    a_sw = {s.name for s in groups.get("A", [])}
    b_sw = {s.name for s in groups.get("B", [])}
    if set(groups) - {"A", "B"}:
        raise FabricError(f"zcube has switch groups {sorted(groups)}; only A and B allowed")
    n = len(a_sw)
    if len(b_sw) != n or n == 0:
        raise FabricError(f"group A has {len(a_sw)} switches and group B {len(b_sw)}; "
                          f"they must be equal and non-zero")
    shared: dict[tuple[str, str], str] = {}
    for h in fab.hosts:
        peers = [sw for sw, _ in fab.attachments(h.name)]
        in_a = [p for p in peers if p in a_sw]
        in_b = [p for p in peers if p in b_sw]
        if len(in_a) != 1 or len(in_b) != 1 or len(peers) != 2:
            raise FabricError(f"{h.name} must have exactly one neighbour in A and one in B, "
                              f"has {peers}")
        key = (in_a[0], in_b[0])
        if key in shared:
            raise FabricError(f"{key[0]} and {key[1]} share two GPUs ({shared[key]}, {h.name}); "
                              f"every (A, B) pair must share exactly one")
        shared[key] = h.name
    if len(shared) != n * n:
        missing = next((a, b) for a in sorted(a_sw) for b in sorted(b_sw) if (a, b) not in shared)
        raise FabricError(f"{missing[0]} and {missing[1]} share no GPU; every (A, B) pair "
                          f"must share exactly one")
    counts: dict[tuple[str, str], int] = {}
    for link in fab.switch_links():
        if link.a in a_sw and link.b in b_sw:
            key = (link.a, link.b)
        elif link.b in a_sw and link.a in b_sw:
            key = (link.b, link.a)
        else:
            raise FabricError(f"link {link.a}-{link.b} joins two switches of the same group")
        counts[key] = counts.get(key, 0) + 1
    m = fab.params.get("parallel", 1)
    for a in sorted(a_sw):
        for b in sorted(b_sw):
            if counts.get((a, b), 0) != m:
                raise FabricError(f"{a}-{b} has {counts.get((a, b), 0)} cables; A and B must be "
                                  f"a complete bipartite graph with {m} per pair")
