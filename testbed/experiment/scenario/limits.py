"""Upper limits on a scenario's values, checked before anything starts: what one machine of this
kind (2 cores, 24 GiB) can run or a real deployment has, whichever is lower, and an estimate of
the memory a run holds (:func:`estimate_bytes`), which :mod:`.checks` holds to what is available.
"""
from __future__ import annotations

from traffic.arrivals import MAX_TOKENS

REQUESTS = 1_000_000           # workload.count, sweep.count: a day of arrivals at 10/s
UNTIL_MISS = 10                # a serving curve's step from rate to rate, at most
RATE = 100_000.0               # requests/s (workload.rate, each sweep rate)
SECONDS = 86_400.0             # any duration or time in a schedule: one day
TRACE_START_S = 1e9            # workload.start_s, in the trace's own time
TIME_SCALE = 1e6               # workload.time_scale
TOKENS = MAX_TOKENS             # input/output tokens per request (traffic.arrivals)
REPETITIONS = 1_000             # a Clos's ECMP tail narrows slowly: about 150 draws to 7.5%
SEED = 2 ** 32 - 1             # numpy's legacy seeds stop here
LINK_MBPS = (1.0, 1_600_000.0)  # from 1 Mb/s (slower is not measurable) to a 1.6 Tb/s port
TIME_DILATION = (1.0, 100.0)   # time_dilation: as the real pace to a hundred times slower
VERIFY_SAMPLE = 1_000_000
BUFFER_MS = 10_000.0
CALIBRATION_S = 60.0
FAULTS = 1_000
EXPECTATIONS = 1_000           # expect: checks on the results
FABRICS = 16
TP = 1_024                     # tensor-parallel degree, MLA senders
INSTANCES = 65_536             # prefill or decode instances
CHUNKS = 1_024                 # layer-wise chunks per transfer (models have at most ~200 layers)
SWEEP_RATES = 100
SLO_MS = 3_600_000.0
TRACE_BYTES = 1 << 30          # a trace file: 1 GiB (the Mooncake trace is 2.4 MB)

# peak RSS of `zcube run` on the model backend per transfer: about 2 KB rail-aligned and 10 KB
# crossed (split over port pairings and paths); the larger, so no run outgrows its estimate
BYTES_PER_TRANSFER = 10_240
MEMORY_SHARE = 0.8             # of the memory available when the scenario is checked


def available_bytes() -> int:
    """Memory available now (``MemAvailable``), or 0 where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def estimate_bytes(requests: int, repetitions: int, placements: int,
                   transfers_per_request: int) -> int:
    """What one fabric's runs hold at once: every placement's and repetition's transfers."""
    return requests * repetitions * placements * transfers_per_request * BYTES_PER_TRANSFER


def gib(n: float) -> str:
    return f"{n / 2 ** 30:.1f} GiB"


def number(x: float) -> str:
    """``1,600,000`` for a whole number, ``0.5`` for another."""
    return f"{x:,.0f}" if x == int(x) else f"{x:,}"


def shown(field) -> str:
    """``at most N`` (``N items`` for a list) from a pydantic field's upper bound, or ""."""
    for m in field.metadata:
        for attr, unit in (("le", ""), ("max_length", " items")):
            value = getattr(m, attr, None)
            if value is not None:
                return f"at most {number(value)}{unit}"
    return ""
