"""Flow-level model backend: what the emulation would measure, computed instead of carried.

``simulate(table, workload, link_mbps)`` replays a workload's KV transfers over a fabric as
fluid flows, with no root, no processes and no packets, so fabrics of thousands of GPUs and
hour-long traces fit in minutes on one core.  It returns the same rows as the emulation
(``transfers.csv``: :data:`testbed.core.rows.ROW_FIELDS`; ``links.csv``:
:data:`testbed.core.rows.LINK_FIELDS`), so one summary covers both backends.

What is modelled, and how it maps onto the emulation:

* **Capacity.**  Every cable of the Fabric runs at ``gbps * 1000 * link_mbps / (nic_gbps *
  1000)`` Mb/s, as ``testbed.emulation.network`` shapes it.  Cables are full duplex: each direction
  (directed hop ``(a, b)``) is its own resource, and parallel cables between the same two
  nodes add up (as ``LinkSampler.capacity`` counts them).
* **Sub-flows.**  A transfer is split evenly over the NIC port pairings its routes use,
  exactly as :func:`controller.pairings.flows_for` splits it (one TCP connection each in the
  emulation; ``spray``: one per pairing and lane): ZCube stripes half over P1 and half over
  P2; ROFT has one pairing.  When a pairing has several paths (ECMP), the sub-flow is hashed
  onto one of them, as an OpenFlow select group pins a connection to one bucket; the hash
  is BLAKE2b of the connection's name salted with the workload's key
  (:func:`testbed.model.flows.connection_key`: ``"salt:src>dst>flow"`` for ``pool``,
  ``"salt:src>dst>request>chunk>flow"`` for ``tcp-per-transfer``; :func:`ecmp_choice`), so
  runs are deterministic and each repetition draws its own paths.
  (CRC32 modulo a small path count is not: its low bits barely move when one digit of the
  key does, and consecutive requests all landed on one spine.)
* **Sharing.**  Active sub-flows get max-min fair rates over the directed hops they cross
  (progressive filling), recomputed at every arrival and completion, but only for the
  connected component of flows that share hops with those that came or went: the max-min
  allocation of the rest of the network cannot change.
* **Kept-open connections (FIFO).**  With ``transport="pool"`` the emulation keeps one TCP
  connection per (source address, destination address) pairing and sends the transfers
  posted on it strictly one after another (``traffic.kvpool``, as a queue pair processes
  its work requests in order).  The model does the same: the sub-flows of one connection
  are served in the order they were posted (ready time; ties by transfer order in the
  workload, then pairing), and one that comes while the one before it is still sending
  waits, joining the sharing only when that one completes.  With ``tcp-per-transfer`` every
  sub-flow has a connection of its own and they all share from the start.
* **TCP.**  A flow's goodput is ``efficiency`` times its fair share of the shaped rate
  (default :data:`DEFAULT_EFFICIENCY`), and it starts ``latency_s`` plus, per switch on
  its path, ``hop_bytes`` serialised on the hop that switch sends it on, after its transfer
  is ready (store and forward; defaults fitted to the emulation, see below).  An isolated
  transfer therefore takes that delay plus
  ``bytes_per_subflow * 8 / (subflow_port_mbps * 1e6 * efficiency)``.  On a kept-open
  connection that delay is paid by a sub-flow that finds its connection idle; one queued
  behind another starts the instant that one completes, with no delay of its own (the pipe
  is full: its bytes follow the last ones of its predecessor on the wire).  In general its
  bytes begin to arrive at ``max(ready + delay, end of its predecessor)``.
* **Not modelled:** queueing delay in switch buffers, packet loss, slow-start dynamics
  beyond the fixed latency, unfairness between TCP flows, headers (link bytes are payload
  bytes, so a link saturated by the model shows ``util`` = ``efficiency``, not 1).

Time 0 is the workload's time origin: ``start_s`` equals ``ready_s``, when the transfer
was posted, so ``fct_ms`` includes any wait behind earlier transfers on its connection, as
the emulation measures it; ``first_byte_s`` is when its first sub-flow's bytes began to
arrive and ``end_s`` when its last sub-flow completed.

The phases, one module each: :mod:`testbed.model.capacity` (capacities and resources),
:mod:`testbed.model.flows` (sub-flows and their ECMP pinning), :mod:`testbed.model.sharing`
(progressive filling), :mod:`testbed.model.events` (the event loop) and
:mod:`testbed.model.records` (transfer rows, link bins and records).  This module ties them
together; :mod:`testbed.model.backend` is the backend the experiment runner drives.
"""
from __future__ import annotations

import time

from testbed.core.ecmp import ecmp_choice, ecmp_salt
from testbed.model.capacity import check_params, directed_capacity, resources
from testbed.model.events import EventLoop
from testbed.model.flows import subflows
from testbed.model.records import ModelResult, integer_bins, transfer_rows
from testbed.model.sharing import max_min_share

__all__ = ["DEFAULT_EFFICIENCY", "DEFAULT_HOP_BYTES", "DEFAULT_LATENCY_S", "ModelResult",
           "directed_capacity", "ecmp_choice", "ecmp_salt", "max_min_share", "simulate"]

# Goodput over the htb-shaped rate: single TCP flows on a link shaped to 100 Mb/s reached
# 95.4-95.5% in five runs of benchmarks/bench_emulation.py (README "Speed").
DEFAULT_EFFICIENCY = 0.954
# Delay before a sub-flow's bytes flow: ``latency_s`` plus, for every switch it crosses, the
# time to serialise ``hop_bytes`` on the hop that switch sends it on (store and forward of
# the segment a switch receives whole; with userspace TSO these are TCP segments of up to
# 64 KB).  Fitting FCT = delay + size / (rate * efficiency) to the isolated 1 MB and 5 MB
# transfers of benchmarks/bench_agents.py (README "Speed": ROFT g0->g5 crosses 3 switches at
# 100 Mb/s, 3.1 ms; ZCube 2 switches at 50 Mb/s per port, 3.6 ms) gives about 12 KB per switch
# and no fixed part.  At real scale (4 KB frames at 400 Gb/s) the same rule gives nanoseconds;
# pass hop_bytes and latency_s for the system you model.
DEFAULT_LATENCY_S = 0.0
DEFAULT_HOP_BYTES = 12_000


def simulate(table, workload, link_mbps: float, *, sample_s: float = 0.5,
             efficiency: float = DEFAULT_EFFICIENCY,
             latency_s: float = DEFAULT_LATENCY_S,
             hop_bytes: float = DEFAULT_HOP_BYTES,
             datapath_mbps: float | None = None, transport: str = "pool") -> ModelResult:
    """Carry ``workload.transfers`` over ``table.fabric`` as fluid flows (module docstring).

    ``link_mbps`` is the emulated NIC rate, as for ``Emulation``; ``sample_s`` the interval of
    the ``links`` rows; ``efficiency`` (0 < e <= 1) the goodput fraction of a flow's fair
    share; ``latency_s`` (>= 0) the fixed delay between a transfer being ready and its
    sub-flows starting to send, and ``hop_bytes`` (>= 0) what each switch on a path stores
    before forwarding, serialised at the rate of the hop it forwards on (module docstring).

    ``datapath_mbps`` models the emulator itself, for comparing with it: one forwarding
    thread that every packet crosses once per switch, shared by all flows, with this much
    goodput in Mb/s times switches crossed (from the emulation's iperf3 calibration).  A
    flow crossing k switches uses k units of it per byte.  It joins every flow into one
    max-min problem, so it is for small fabrics.  None (default): a real fabric, no such
    limit.  ``transport`` decides what ECMP pins (:func:`testbed.model.flows.connection_key`)
    and, for ``pool``, that each connection sends its sub-flows in order (module docstring).
    """
    check_params(sample_s, efficiency, latency_s, hop_bytes)
    wall0 = time.perf_counter()
    res = resources(table.fabric, link_mbps, efficiency, hop_bytes, datapath_mbps)
    transfers = workload.transfers
    subs = subflows(table, transfers, res, latency_s, transport, ecmp_salt(workload))
    loop = EventLoop(subs, res.cap_bps, res.dp, sample_s).run()
    rows = transfer_rows(transfers, loop.t_first, loop.t_end, subs.n_sub)
    bins, intervals = integer_bins(loop.bins[:res.n_hops], res.hops)
    return ModelResult(rows=rows, events=loop.events, recomputations=loop.recomputations,
                       runtime_s=time.perf_counter() - wall0, sample_s=sample_s,
                       intervals=intervals, capacity=res.capacity,
                       params={"backend": "model", "policy": table.policy_name,
                               "link_mbps": link_mbps, "efficiency": efficiency,
                               "latency_s": latency_s, "hop_bytes": hop_bytes,
                               "datapath_mbps": datapath_mbps,
                               "sample_s": sample_s},
                       _bins=bins)
