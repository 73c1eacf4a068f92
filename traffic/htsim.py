"""A workload's KV transfers as an htsim connection matrix (pure), the ``-tm`` file htsim's
datacenter experiments read."""
from __future__ import annotations

from dataclasses import dataclass

from topologies.fabric import Fabric

MAX_SIZE = 2 ** 31 - 1        # htsim parses size with stoi
UNITS = {"ps": 1e12, "us": 1e6}
# htsim_swift casts start to uint32_t microseconds; the others keep picoseconds in a uint64
MAX_START = {"ps": 2 ** 64 - 1, "us": 2 ** 32 - 1}
READERS = {"ps": "htsim_eqds, htsim_ndp, htsim_roce, htsim_hpcc", "us": "htsim_swift"}


@dataclass(frozen=True)
class Target:
    """Where ``zcube run --export`` writes the matrices, and the start-time unit."""
    folder: str
    unit: str = "ps"


def htsim_lines(workload, fabric: Fabric, unit: str = "ps") -> list[str]:
    """The connection matrix's lines for ``workload.transfers`` on ``fabric``: ``Nodes <N>``,
    ``Connections <M>``, then ``<src>-><dst> start <T> size <S>`` per transfer in start
    order, by host index (the GPU number), ``T`` the ready time in ``unit`` (``ps``, or
    ``us`` for ``htsim_swift``, :data:`READERS`) and ``S`` its bytes."""
    if unit not in UNITS:
        raise ValueError(f"htsim time unit {unit!r}: ps or us")
    index = {h.name: i for i, h in enumerate(sorted(fabric.hosts, key=lambda h: h.index))}
    rows = []
    for pos, t in enumerate(workload.transfers):
        for end in (t.src, t.dst):
            if end not in index:
                raise ValueError(f"transfer of request {t.request} names {end!r}, which is not "
                                 f"a GPU of {fabric.label}")
        if t.src == t.dst:
            raise ValueError(f"transfer of request {t.request} goes from {t.src} to itself")
        if not 0 < t.bytes <= MAX_SIZE:
            raise ValueError(f"transfer of request {t.request} has {t.bytes} bytes; htsim takes "
                             f"1 .. {MAX_SIZE}")
        start = int(round(t.ready_s * UNITS[unit]))
        if not 0 <= start <= MAX_START[unit]:
            raise ValueError(f"transfer of request {t.request} starts at {t.ready_s} s; htsim "
                             f"takes 0 .. {MAX_START[unit]} {unit}")
        rows.append((start, pos, index[t.src], index[t.dst], t.bytes))
    rows.sort()
    return ([f"Nodes {len(index)}", f"Connections {len(rows)}"]
            + [f"{s}->{d} start {start} size {size}" for start, _, s, d, size in rows])


def write_htsim(workload, fabric: Fabric, path: str, unit: str = "ps") -> int:
    """Write the connection matrix to ``path``; returns the number of connections."""
    lines = htsim_lines(workload, fabric, unit)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(lines) - 2
