"""Which of several equal paths a connection takes, the same on every backend that draws
it (the model and ns-3; the emulation's OVS hashes real 5-tuples): a seeded, well-mixed
hash of the connection's name."""
from __future__ import annotations

import hashlib

from controller.pairings import flow_paths
from traffic.workload import workload_key


def ecmp_choice(key: str, n: int) -> int:
    """Which of ``n`` equal paths the connection named ``key`` takes (fixed, well mixed)."""
    if n <= 1:
        return 0
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") % n


def ecmp_salt(workload) -> str:
    """What the ECMP hash of ``workload``'s connections is salted with: its key."""
    return workload_key(workload)[:16] + ":"


def connection_key(t, k: int, transport: str, salt: str = "") -> str:
    """What ECMP hashes for sub-flow ``k`` of transfer ``t`` (module docstring), drawn
    afresh for each ``salt`` (the workload's key) as the emulation draws source ports."""
    if transport == "pool":
        return f"{salt}{t.src}>{t.dst}>{k}"
    return f"{salt}{t.src}>{t.dst}>{t.request}>{t.chunk}>{k}"


def pool_paths(table, workload) -> dict[tuple[str, str, int], tuple]:
    """``(source address, destination address, lane) -> path`` for every kept-open connection
    (``transport: pool``) of ``workload`` that has several paths to draw from: the one every
    backend that draws pins it to (the model, ns-3), which the emulation's controller pins
    it to too."""
    salt, out, first = ecmp_salt(workload), {}, {}
    for t in workload.transfers:
        first.setdefault((t.src, t.dst), t)
    for (src, dst), t in sorted(first.items()):
        for k, addrs, paths in flow_paths(table, src, dst):
            if len(paths) > 1:
                out[addrs] = paths[ecmp_choice(connection_key(t, k, "pool", salt), len(paths))]
    return out
