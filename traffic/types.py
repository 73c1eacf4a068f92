"""The small records the workload model passes along (pure data)."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Request:
    """One inference request: when it arrives and how many tokens it has."""
    id: int
    arrival_s: float
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0      # prefix already held by the decode side: its KV is not moved


@dataclass(frozen=True)
class Scale:
    """How the emulation is scaled down (ZCUBE.md section 6).  ``link`` is emulated link rate
    over real link rate; ``size`` multiplies KV bytes.  Equal factors keep transfer time
    relative to prefill time as in the real system."""
    link: float = 1.0
    size: float = 1.0
    time_dilation: float = 1.0      # the emulation runs this many times slower (dilate())

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def equal(cls, factor: float) -> "Scale":
        """Links and KV sizes scaled by the same factor (the testbed's default)."""
        return cls(link=factor, size=factor)


@dataclass(frozen=True)
class Transfer:
    """KV bytes one GPU sends another for one request (one layer chunk of it)."""
    request: int
    src: str
    dst: str
    bytes: int
    ready_s: float              # when the prefill has produced it and it may be sent
    chunk: int = 0
