"""The contract between the experiment pipeline and a backend.

A backend carries workloads on one fabric at a time.  The runner asks it for a
:class:`Session` per fabric, with the fabric, its routing policy and the
:class:`SessionOptions`; inside the session it may first ``calibrate`` (before any workload
is built: a later step can pick the emulated rate from it), then ``admit`` the workloads it
will carry (refusing a load it cannot carry faithfully), then ``carry`` each one and hand
back a :class:`Carried`.  What the session learnt about itself (verification, calibration,
notes, and later fidelity) is in ``info``, which the runner copies into summary.json.

The emulation (:mod:`testbed.emulation.backend`) and the flow-level model
(:mod:`testbed.model.backend`) implement it; nothing else in a backend is reached from
outside.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, Sequence, runtime_checkable

from testbed.core.settings import EmulationSettings

# how KV transfers travel: kept-open connections per port pairing (as RDMA queue pairs), or
# a new TCP connection per transfer and pairing (the testbed's first transport)
TRANSPORTS = ("pool", "tcp-per-transfer")


class RunError(RuntimeError):
    """A run that could not be carried out (the message says why)."""


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
class Carried:
    """What one workload on one fabric gave: the records a run folder holds."""
    rows: list                              # one dict per transfer (rows.ROW_FIELDS)
    links: list                             # link samples (rows.LINK_FIELDS)
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
        """Measure what this backend carries (None when there is nothing to measure)."""

    def admit(self, workloads: Sequence, force: bool) -> None:
        """Raise RunError for a load it cannot carry (unless ``force``)."""

    def carry(self, work, faults: Optional[list] = None) -> Carried:
        """Carry one workload; ``faults`` are resolved fault events (emulation only)."""

    def remeasure(self) -> None:
        """Forget what was measured of the idle fabric, so the next carry measures it again."""


class SimulatedSession:
    """What a simulator's session shares (the model, ns-3): nothing to start or stop, to
    measure or to refuse."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def calibrate(self) -> None:
        """Nothing to measure: a simulator carries what it is told."""

    def admit(self, workloads, force: bool) -> None:
        """A simulator carries any load (slowly when it is large)."""

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
