"""The flow-level model as a backend of the experiment pipeline (:mod:`testbed.core.backend`):
each workload simulated at the session's NIC rate, with the scenario's fault schedule;
nothing to calibrate or refuse."""
from __future__ import annotations

from controller.routing import RouteTable
from testbed.core.backend import SessionOptions, SimulatedSession, WorkloadResult
from testbed.core.fault_records import affected
from testbed.model.simulate import simulate


class ModelSession(SimulatedSession):
    """One fabric under the model (a :class:`testbed.core.backend.Session`)."""

    LINK_ROWS_MAX = 2_000_000        # beyond this links.csv would be gigabytes: leave it out

    def __init__(self, fabric, policy: str | None, options: SessionOptions):
        self.table = RouteTable(fabric, policy)
        self.link_mbps = options.link_mbps
        self.options = dict(options.extra or {})      # extra simulate() arguments
        self.info: dict = {"model_options": self.options} if self.options else {}
        self.transport = options.transport

    def run(self, work, faults: list | None = None) -> WorkloadResult:
        """Simulate ``work``; ``links`` is left empty (with a note in ``info``) when it
        would exceed :attr:`LINK_ROWS_MAX` rows."""
        res = simulate(self.table, work, self.link_mbps, transport=self.transport,
                       faults=faults or None, **self.options)
        n_rows = res.intervals * len(res.capacity)
        if n_rows > self.LINK_ROWS_MAX:
            self.info["links_note"] = (f"links.csv left out: {n_rows:,} rows "
                                       f"({res.intervals:,} intervals x "
                                       f"{len(res.capacity):,} links)")
            links: list = []
        else:
            links = list(res.iter_links())
        hit = affected(self.table, res.faults, res.rows) if faults else None
        return WorkloadResult(rows=res.rows, links=links, link_util=res.link_summary(), faults=hit)


class ModelBackend:
    """The flow-level model (a :class:`testbed.core.backend.Backend`)."""

    name = "model"

    def __init__(self, log=None):
        self.log = log                # unused: the model has nothing to report as it goes

    def forwarding_ceiling(self, fabric, policy, options: SessionOptions) -> None:
        """The model has no forwarding thread to measure (``link_mbps: auto`` needs the
        emulation backend)."""
        return None

    def session(self, fabric, policy: str | None, options: SessionOptions) -> ModelSession:
        return ModelSession(fabric, policy, options)
