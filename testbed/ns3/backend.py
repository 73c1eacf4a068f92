"""ns-3 as a backend of the experiment pipeline (:mod:`testbed.core.backend`): routes planned
once per fabric, each workload simulated packet by packet with the scenario's fault
schedule; nothing to calibrate or refuse."""
from __future__ import annotations

from controller.routing import RouteTable
from testbed.core.backend import RunError, SessionOptions, SimulatedSession, WorkloadResult
from testbed.core.fault_records import affected

TRANSPORT = {"pool": "a kept-open TCP connection per pairing and lane, opened at the start, "
                     "transfers posted on it one after another",
             "tcp-per-transfer": "a TCP connection per piece of a transfer"}


class Ns3Session(SimulatedSession):
    def __init__(self, fabric, policy: str | None, options: SessionOptions):
        from testbed.ns3.routes import NotRoutable, plan
        self.table = RouteTable(fabric, policy)
        try:
            self.routes = plan(self.table)   # once per fabric; a table it cannot follow
            # fails here, before anything is simulated
        except NotRoutable as err:
            raise RunError(f"{fabric.label}: the ns3 backend cannot route this: {err}") from None
        self.link_mbps, self.transport = options.link_mbps, options.transport
        self.buffer_ms = options.buffer_ms
        self.info: dict = {"ns3": {"transport": TRANSPORT[options.transport],
                                   "note": "links: bytes each device queued, per 0.5 s",
                                   "switch_queue_drops": 0}}

    def run(self, work, faults: list | None = None) -> WorkloadResult:
        from testbed.ns3.simulate import simulate
        try:
            got = simulate(self.table, work, self.link_mbps, self.routes, faults,
                           self.transport, self.buffer_ms)
        except (RuntimeError, ValueError) as err:
            raise RunError(str(err)) from None
        self.info["ns3"]["switch_queue_drops"] += got.switch_drops    # over repetitions
        hit = affected(self.table, got.faults, got.rows) if faults else None
        return WorkloadResult(rows=got.rows, links=got.links, link_util=got.link_util, faults=hit)


class Ns3Backend:
    """ns-3, packet by packet (a :class:`testbed.core.backend.Backend`)."""

    name = "ns3"

    def __init__(self, log=None):
        self.log = log

    def forwarding_ceiling(self, fabric, policy, options: SessionOptions) -> None:
        """No forwarding thread to measure (``link_mbps: auto`` needs the emulation)."""
        return None

    def session(self, fabric, policy: str | None, options: SessionOptions) -> Ns3Session:
        return Ns3Session(fabric, policy, options)
