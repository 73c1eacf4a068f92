"""A scenario's fault schedule made concrete for one fabric and seed (pure)."""
from __future__ import annotations

import random

BUSIEST = "busiest:gpu-switch"


def busiest_gpu_switch(fabric, work) -> str:
    """The switch GPUs plug into whose GPUs send and receive the most of ``work``'s bytes
    (the first in the fabric's order on a tie): a rail leaf on ROFT, an A or B switch on
    ZCube, an edge switch on a fat tree."""
    load: dict = {}
    for t in work.transfers:
        for gpu in (t.src, t.dst):
            for sw, _ in fabric.attachments(gpu):
                load[sw] = load.get(sw, 0) + t.bytes
    order = [s.name for s in fabric.switches if s.name in load]
    return max(order, key=lambda sw: (load[sw], -order.index(sw)))


def resolve(fabric, faults: list, seed: int, work=None) -> list[dict]:
    """The scenario's faults (:class:`~testbed.experiment.scenario.Fault`) for one fabric and
    seed, with ``random:<kind>`` replaced by a seeded choice of that kind of element and
    ``busiest:gpu-switch`` by :func:`busiest_gpu_switch` of ``work``."""
    rng = random.Random(f"faults-{seed}")
    out = []
    for f in faults:
        elem = f.element
        if elem == BUSIEST:
            elem = busiest_gpu_switch(fabric, work)
        elif elem == "random:switch":
            elem = rng.choice(sorted(s.name for s in fabric.switches))
        elif elem == "random:fabric-link":
            link = rng.choice([c for c in fabric.links
                               if fabric.is_switch(c.a) and fabric.is_switch(c.b)])
            elem = f"{link.a}:{link.a_port}-{link.b}:{link.b_port}"
        elif elem == "random:nic":
            link = rng.choice([c for c in fabric.links if fabric.is_host(c.a)])
            elem = f"{link.a}:{link.a_port}"
        out.append({"at_s": f.at_s, "element": elem, "duration_s": f.duration_s})
    return out
