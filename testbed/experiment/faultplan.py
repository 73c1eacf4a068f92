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
            l = rng.choice([l for l in fabric.links if fabric.is_switch(l.a) and fabric.is_switch(l.b)])
            elem = f"{l.a}:{l.a_port}-{l.b}:{l.b_port}"
        elif elem == "random:nic":
            l = rng.choice([l for l in fabric.links if fabric.is_host(l.a)])
            elem = f"{l.a}:{l.a_port}"
        out.append({"at_s": f.at_s, "element": elem, "duration_s": f.duration_s})
    return out
