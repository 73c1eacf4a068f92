"""A workload's KV transfers as an htsim connection matrix (pure).

htsim's datacenter experiments (``htsim_roce``, ``htsim_eqds``, ...) read, with ``-tm FILE``::

    Nodes <N>
    Connections <M>
    <src>-><dst> start <T> size <S>        one line per connection

* ``src``/``dst`` are host indices: the position of the GPU in the Fabric's host list, which
  is the GPU number (``g13`` is 13) for every built fabric.  ``N`` is the Fabric's GPU count.
  One line per transfer: a GPU is one htsim host, however many NIC ports it has; how its
  ports are used is the htsim topology's business.
* ``T`` is in microseconds: htsim's experiments turn the number read into simulation time
  with ``timeFromUs`` after a cast to a 32-bit unsigned integer (so a fraction would be
  dropped), and htsim writes its own matrices in microseconds too.  It is the transfer's
  ``ready_s`` (when the prefill has produced it), from the workload's time zero, rounded to
  the nearest microsecond.
* ``S`` is the transfer's size in bytes (htsim reads it as a 32-bit int: at most 2^31 - 1;
  ``size 0`` would mean an endless flow, and a workload never has one).

Lines are ordered by start time; transfers that start together keep the workload's order.
Scale factors (``workload.scale``) are already in the sizes; unscale them before export if
the simulated links run at real rates.
"""
from __future__ import annotations

from topologies.fabric import Fabric

MAX_SIZE = 2 ** 31 - 1        # htsim parses size with stoi
MAX_START_US = 2 ** 32 - 1    # experiments cast start to uint32_t microseconds


def htsim_lines(workload, fabric: Fabric) -> list[str]:
    """The connection matrix's lines for ``workload.transfers`` on ``fabric``."""
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
        start = int(round(t.ready_s * 1e6))
        if not 0 <= start <= MAX_START_US:
            raise ValueError(f"transfer of request {t.request} starts at {t.ready_s} s; htsim "
                             f"takes 0 .. {MAX_START_US} us")
        rows.append((start, pos, index[t.src], index[t.dst], t.bytes))
    rows.sort()
    return ([f"Nodes {len(index)}", f"Connections {len(rows)}"]
            + [f"{s}->{d} start {start} size {size}" for start, _, s, d, size in rows])


def write_htsim(workload, fabric: Fabric, path: str) -> int:
    """Write the connection matrix to ``path``; returns the number of connections."""
    lines = htsim_lines(workload, fabric)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(lines) - 2
