"""Checks for builder parameters: each refusal names the parameter and says why."""
from __future__ import annotations

import math

from .fabric import FabricError


def need_int(name: str, value, minimum: int) -> int:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value != int(value)):
        raise FabricError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        raise FabricError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def need_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FabricError(f"{name} must be a number, got {value!r}")
    if value <= 0:
        raise FabricError(f"{name} must be greater than 0, got {value}")
    return float(value)
