"""A scenario's fault schedule made concrete for one fabric and seed (pure)."""
from __future__ import annotations

import random


def resolve(fabric, faults: list, seed: int) -> list[dict]:
    """The scenario's faults (:class:`~testbed.experiment.scenario.Fault`) for one fabric and
    seed, with ``random:<kind>`` replaced by a seeded choice of that kind of element."""
    rng = random.Random(f"faults-{seed}")
    out = []
    for f in faults:
        elem = f.element
        if elem == "random:switch":
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
