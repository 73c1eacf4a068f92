"""The contract between the experiment pipeline and a backend (the emulation, the flow-level
model, ns-3): per fabric a :class:`Session` that may ``calibrate``, ``admit`` the workloads
(refusing a load it cannot run faithfully), then ``run`` each into a :class:`WorkloadResult`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, Sequence, runtime_checkable

from testbed.core.settings import EmulationSettings

# how KV transfers travel: kept-open connections per port pairing (as RDMA queue pairs), or
# a new TCP connection per transfer and pairing
TRANSPORTS = ("pool", "tcp-per-transfer")


class RunError(RuntimeError):
    """A run that could not be done (the message says why)."""


@dataclass(frozen=True)
class SessionOptions:
    """What every backend is told besides the fabric and policy."""
    link_mbps: float                        # emulated NIC rate of one GPU (sets the scale)
    verify_sample: int = 200                # emulation: paths traced at bring-up (0 = all)
    background: Optional[dict] = None       # emulation: {"pattern", "mbps"} iperf3 beside KV
    transport: str = "pool"                 # one of TRANSPORTS
    buffer_ms: Optional[float] = None       # emulation: queue per shaped port (None: 64 pkts)
    large_segments: bool = False            # emulation: 64 KB segments at any emulated RTT
    calibration_s: float = 2.0              # emulation: seconds of each iperf3 calibration
    window_s: float = 0.5                   # emulation: links.csv's window, wall-clock s
    emulation: EmulationSettings = field(default_factory=EmulationSettings)  # the scenario's
    extra: dict = field(default_factory=dict)   # backend-specific (model: simulate() options)
    log: Callable[[str], None] = print


@dataclass
class WorkloadResult:
    """What one workload on one fabric gave: the records a run folder holds."""
    rows: list                              # one dict per transfer (records.ROW_FIELDS)
    links: list                             # link samples (records.LINK_FIELDS)
    link_util: Optional[dict]               # metrics.link_summary of the samples
    faults: Optional[list] = None           # one record per fault injected, if any
    fidelity: Optional[dict] = None         # what the emulator did (core.fidelity), if known
    clock: Optional[float] = None           # the rows' time 0 as Unix time (emulation)


@runtime_checkable
class Session(Protocol):
    table: object                           # the RouteTable the backend forwards by
    info: dict                              # its own records, copied into summary.json

    def __enter__(self) -> "Session": ...

    def __exit__(self, *exc) -> bool: ...

    def calibrate(self) -> Optional[dict]:
        """Measure what this backend forwards (None when there is nothing to measure)."""

    def admit(self, workloads: Sequence, force: bool) -> None:
        """Raise RunError for a load it cannot run faithfully (unless ``force``)."""

    def run(self, work, faults: Optional[list] = None) -> WorkloadResult:
        """Run one workload; ``faults`` are resolved fault events (emulation only)."""

    def remeasure(self) -> None:
        """Forget what was measured of the idle fabric, so the next run measures it again."""


class SimulatedSession:
    """What a simulator's session shares (the model, ns-3): nothing to start or stop, to
    measure or to refuse."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def calibrate(self) -> None:
        """Nothing to measure: a simulator runs what it is told."""

    def admit(self, workloads, force: bool) -> None:
        """A simulator runs any load (slowly when it is large)."""

    def remeasure(self) -> None:
        """Nothing measured of the idle fabric to forget."""


@runtime_checkable
class Backend(Protocol):
    name: str

    def session(self, fabric, policy: Optional[str], options: SessionOptions) -> Session: ...

    def forwarding_ceiling(self, fabric, policy: Optional[str],
                           options: SessionOptions) -> Optional[float]:
        """What the backend forwards on ``fabric`` with every host sending at once, in
        Mb/s x switches crossed, measured at ``options.link_mbps`` (None when it has no
        such limit); ``link_mbps: auto`` picks the rate from it."""
