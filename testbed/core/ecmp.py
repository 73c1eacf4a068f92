"""Which of several equal paths a connection takes, the same on every backend that draws
it (the model and ns-3; the emulation's OVS hashes real 5-tuples): a seeded, well-mixed
hash of the connection's name."""
from __future__ import annotations

import hashlib

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
