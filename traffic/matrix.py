"""Traffic matrices for route verification: who sends to whom, and how much (in units).

* ``all-to-all``: every ordered pair, one unit each;
* ``permutation``: every host sends one unit to one other host, a seeded random derangement;
* ``pd``: prefill-to-decode; the first half of the servers prefill, the second half decode,
  and every prefill GPU sends one unit to every decode GPU.
"""
from __future__ import annotations

import random
from typing import Iterator

from topologies.fabric import Fabric, FabricError

MATRICES = ("all-to-all", "permutation", "pd")


def all_to_all(fabric: Fabric) -> Iterator[tuple[str, str, float]]:
    names = [h.name for h in fabric.hosts]
    for s in names:
        for d in names:
            if s != d:
                yield s, d, 1.0


def permutation(fabric: Fabric, seed: int = 0) -> Iterator[tuple[str, str, float]]:
    names = [h.name for h in fabric.hosts]
    rng = random.Random(seed)
    while True:
        perm = names[:]
        rng.shuffle(perm)
        if all(a != b for a, b in zip(names, perm)):
            break
    for s, d in zip(names, perm):
        yield s, d, 1.0


def pd(fabric: Fabric) -> Iterator[tuple[str, str, float]]:
    servers = sorted(fabric.servers().items())
    if len(servers) < 2:
        raise FabricError("the pd traffic matrix needs at least 2 servers")
    half = len(servers) // 2
    prefill = [h.name for _, hs in servers[:half] for h in hs]
    decode = [h.name for _, hs in servers[half:] for h in hs]
    for s in prefill:
        for d in decode:
            yield s, d, 1.0


def matrix(name: str, fabric: Fabric, seed: int = 0):
    if name == "all-to-all":
        return all_to_all(fabric)
    if name == "permutation":
        return permutation(fabric, seed)
    if name == "pd":
        return pd(fabric)
    raise FabricError(f"unknown traffic matrix {name!r}; choose one of {', '.join(MATRICES)}")
