"""Bring-up and teardown timed phase by phase, for ``zcube up --json`` and
``benchmarks/bench_emulation.py``."""
from __future__ import annotations

import time
from contextlib import contextmanager


class Phases:
    """``with phases("flows"): ...`` adds the block's seconds to phase ``flows``."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.started = time.monotonic()

    @contextmanager
    def __call__(self, name: str):
        t = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - t

    def total(self) -> float:
        return time.monotonic() - self.started

    def to_dict(self) -> dict:
        return {k: round(v, 3) for k, v in self.seconds.items()}

    def line(self) -> str:
        """``controller 0.9 s, network 2.1 s, ...`` (the phases over 0.05 s)."""
        return ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items() if v >= 0.05)
