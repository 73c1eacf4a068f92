"""The flow-level model: what the emulation would measure, computed from fluid flows with
max-min fair sharing, so fabrics of thousands of GPUs and hour-long traces take minutes on
one core and give the emulation's rows."""
from __future__ import annotations

import time

from testbed.core.ecmp import ecmp_choice, ecmp_salt
from testbed.model.capacity import check_params, directed_capacity, resources
from testbed.model.event_loop import EventLoop
from testbed.model.faults import ModelFaults
from testbed.model.flows import subflows
from testbed.model.output_rows import ModelResult, integer_bins, transfer_rows
from testbed.model.sharing import max_min_share

__all__ = ["DEFAULT_EFFICIENCY", "DEFAULT_HOP_BYTES", "DEFAULT_LATENCY_S", "ModelResult",
           "directed_capacity", "ecmp_choice", "ecmp_salt", "max_min_share", "simulate"]

# Goodput over the htb-shaped rate one TCP flow reaches (95.4-95.5%, bench_emulation.py).
DEFAULT_EFFICIENCY = 0.954
# Store and forward: each switch crossed delays a sub-flow by ``hop_bytes`` serialised on its
# next hop; 12 KB and no fixed latency fit the emulation's isolated transfers.
DEFAULT_LATENCY_S = 0.0
DEFAULT_HOP_BYTES = 12_000


def simulate(table, workload, link_mbps: float, *, sample_s: float = 0.5,
             efficiency: float = DEFAULT_EFFICIENCY,
             latency_s: float = DEFAULT_LATENCY_S,
             hop_bytes: float = DEFAULT_HOP_BYTES,
             datapath_mbps: float | None = None, transport: str = "pool",
             faults: list | None = None) -> ModelResult:
    """Run ``workload.transfers`` over ``table.fabric`` as fluid flows; the rows the
    emulation would give (``start_s`` is ``ready_s``, so ``fct_ms`` includes any wait behind
    earlier transfers on the connection).

    Every cable runs at its emulated rate in each direction.  A transfer is split over its
    pairings as :func:`controller.pairings.flows_for` splits it, each sub-flow hashed onto one
    ECMP path by its connection's seeded key.  Active sub-flows get max-min fair rates over
    the directed hops they cross, recomputed at every arrival and completion for the flows
    sharing hops with those that came or went.  With ``transport="pool"`` a connection sends
    its sub-flows in the order posted, one after another (a queued one starts the instant
    the one before completes); with ``tcp-per-transfer`` all share from the start.  Not
    modelled: switch queueing, loss, slow start beyond the fixed delay, TCP unfairness,
    headers (a saturated link shows ``util`` = ``efficiency``).

    ``link_mbps`` is the emulated NIC rate, as for ``Emulation``; ``sample_s`` the interval of
    the ``links`` rows; ``efficiency`` (0 < e <= 1) the goodput fraction of a flow's fair
    share; ``latency_s`` (>= 0) the fixed delay between a transfer being ready and its
    sub-flows starting to send, and ``hop_bytes`` (>= 0) what each switch on a path stores
    before forwarding, serialised at the rate of the hop it forwards on.

    ``datapath_mbps`` models the emulator itself, for comparing with it: one forwarding
    thread that every packet crosses once per switch, shared by all flows, with this much
    goodput in Mb/s times switches crossed (from the emulation's iperf3 calibration).  A
    flow crossing k switches uses k units of it per byte.  It joins every flow into one
    max-min problem, so it is for small fabrics.  None (default): a real fabric, no such
    limit.  ``transport`` decides what ECMP pins (:func:`testbed.model.flows.connection_key`).
    ``faults`` is a fault schedule (:func:`testbed.experiment.fault_schedule.resolve`'s),
    run as :mod:`testbed.model.faults` says; its records are the result's ``faults``.
    """
    check_params(sample_s, efficiency, latency_s, hop_bytes)
    wall0 = time.perf_counter()
    res = resources(table.fabric, link_mbps, efficiency, hop_bytes, datapath_mbps)
    transfers = workload.transfers
    subs = subflows(table, transfers, res, latency_s, transport, ecmp_salt(workload))
    mf = ModelFaults(table, faults, res, efficiency, link_mbps, transfers, subs) \
        if faults else None
    loop = EventLoop(subs, res.cap_bps, res.dp, sample_s, mf).run()
    rows = transfer_rows(transfers, loop.t_first, loop.t_end, subs.n_sub, loop.missing(),
                         mf.moved_at if mf else None, loop.gap if mf else None)
    bins, intervals = integer_bins(loop.bins[:res.n_hops], res.hops)
    return ModelResult(rows=rows, events=loop.events, recomputations=loop.recomputations,
                       runtime_s=time.perf_counter() - wall0, sample_s=sample_s,
                       intervals=intervals, capacity=res.capacity,
                       params={"backend": "model", "policy": table.policy_name,
                               "link_mbps": link_mbps, "efficiency": efficiency,
                               "latency_s": latency_s, "hop_bytes": hop_bytes,
                               "datapath_mbps": datapath_mbps,
                               "sample_s": sample_s},
                       faults=mf.finish(max(loop.t_end, default=0.0)) if mf else None,
                       _bins=bins)
