"""The value types of a scenario's keys (:mod:`.scenario`) and the validators that read them:
every number finite and 0 or more (checks across keys ask for more), a single value where a
list goes read as a list of one, ``link_mbps`` a number or ``auto``, the model a preset's name
or all its fields."""
from __future__ import annotations

import dataclasses
import re
from typing import Annotated

from pydantic import Field, PlainSerializer, PlainValidator, StringConstraints

from traffic.models import PRESETS, ModelSpec, get_model

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")

# a Positive number is more than 0
Count = Annotated[int, Field(ge=0)]
Number = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Text = Annotated[str, StringConstraints(min_length=1)]
Name = Annotated[str, StringConstraints(min_length=1, pattern=NAME_RE.pattern)]


def listed(value):
    """A single value where a list of values goes is a list of one."""
    return value if isinstance(value, (list, dict)) else [value]


def empty_if_null(value):
    return {} if value is None else value


def none_if_null(value):
    return [] if value is None else value


def rate(value):
    """``link_mbps``: auto, or a finite number (checks across keys ask for more than 0)."""
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value in (float("inf"), float("-inf")) or value < 0:
        raise ValueError("must be 0 or more, or auto")
    return float(value)


def model_in(value) -> ModelSpec:
    try:
        return get_model(value)
    except TypeError as err:                # e.g. a field given as a list
        raise ValueError(str(err)) from None


def model_out(spec: ModelSpec):
    """A preset by its name, anything else as every field."""
    return spec.name if PRESETS.get(spec.name) == spec else dataclasses.asdict(spec)


Model = Annotated[ModelSpec, PlainValidator(model_in), PlainSerializer(model_out)]
