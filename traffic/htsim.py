"""A workload's KV transfers as an htsim connection matrix (pure).

htsim's datacenter experiments (``htsim_roce``, ``htsim_eqds``, ...) read, with ``-tm FILE``::

    Nodes <N>
    Connections <M>
    <src>-><dst> start <T> size <S>        one line per connection

* ``src``/``dst`` are host indices: the position of the GPU in the Fabric's host list, which
  is the GPU number (``g13`` is 13) for every built fabric.  ``N`` is the Fabric's GPU count.
  One line per transfer: a GPU is one htsim host, however many NIC ports it has; how its
  ports are used is the htsim topology's business.
* ``T`` is the transfer's ``ready_s`` (when the prefill has produced it), from the
  workload's time zero, as a whole number in ``unit``: picoseconds (``ps``, the default) or
  microseconds (``us``).  csg-htsim's parser (``sim/datacenter/connection_matrix.cpp``,
  ``ConnectionMatrix::load``, since its commit "tm file starttime is in picoseconds, not
  microsecs") reads the number with ``stof`` and keeps it as picoseconds, and
  ``htsim_eqds``, ``htsim_ndp``, ``htsim_roce`` and ``htsim_hpcc`` start the connection at
  it unchanged; ``htsim_swift`` alone casts it to a 32-bit unsigned integer and converts it
  from microseconds (``timeFromUs((uint32_t)crt->start)``), so it needs ``us``.  ``stof``
  makes a float of it: a start of ``t`` seconds is exact to about ``t`` x 0.06 us.
* ``S`` is the transfer's size in bytes (htsim reads it as a 32-bit int: at most 2^31 - 1;
  ``size 0`` would mean an endless flow, and a workload never has one).

Lines are ordered by start time; transfers that start together keep the workload's order.
Scale factors (``workload.scale``) are already in the sizes; unscale them before export if
the simulated links run at real rates.
"""
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
    """The connection matrix's lines for ``workload.transfers`` on ``fabric``, start times
    in ``unit`` (``ps`` or ``us``: module docstring)."""
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
