"""LLM descriptions and how many KV-cache bytes one token costs (ZCUBE.md section 5), for
GQA/MHA and MLA attention; a user-defined model is a dict of :class:`ModelSpec` fields."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .types import Scale

ATTENTION = ("gqa", "mla")
_COUNTS = ("layers", "kv_heads", "head_dim", "kv_lora_rank", "rope_dim")
_RATES = ("dtype_bytes", "prefill_tokens_per_s", "decode_step_ms")
# upper limits, far above any real model (a larger value would only overflow the arithmetic:
# a dtype_bytes of 1e300 made a KV size no float can hold)
LIMITS = {"layers": 10_000, "kv_heads": 100_000, "head_dim": 100_000,
          "kv_lora_rank": 1_000_000, "rope_dim": 1_000_000, "dtype_bytes": 64,
          "prefill_tokens_per_s": 1e12, "decode_step_ms": 86_400_000}


@dataclass(frozen=True)
class ModelSpec:
    """One model as the network sees it.  Fields the attention kind does not use are 0
    (``kv_heads``/``head_dim`` for MLA, ``kv_lora_rank``/``rope_dim`` for GQA).

    ``prefill_tokens_per_s`` is the prompt throughput of one prefill instance and
    ``decode_step_ms`` the time of one decode step: both are assumptions about the
    hardware, not facts about the model, and a user should override them.
    ``dtype_bytes`` is the KV element size (2 for BF16, 1 for FP8, 0.5 for FP4).
    """
    name: str
    layers: int
    attention: str
    kv_heads: int
    head_dim: int
    kv_lora_rank: int
    rope_dim: int
    dtype_bytes: float
    prefill_tokens_per_s: float
    decode_step_ms: float

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"model field 'name' must be a non-empty string, got {self.name!r}")
        if self.attention not in ATTENTION:
            raise ValueError(f"model field 'attention' must be one of {', '.join(ATTENTION)}, "
                             f"got {self.attention!r}")
        for f in _COUNTS:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"model field {f!r} must be a whole number >= 0, got {v!r}")
        for f in _RATES:
            v = getattr(self, f)
            if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                    or v <= 0):
                raise ValueError(f"model field {f!r} must be a number > 0, got {v!r}")
        for f, most in LIMITS.items():
            if getattr(self, f) > most:
                raise ValueError(f"model field {f!r} must be at most {most:,.0f}, "
                                 f"got {getattr(self, f)!r}")
        needed = ("layers", "kv_heads", "head_dim") if self.attention == "gqa" \
            else ("layers", "kv_lora_rank")
        for f in needed:
            if getattr(self, f) < 1:
                raise ValueError(f"model field {f!r} must be at least 1 for "
                                 f"{self.attention} attention, got {getattr(self, f)}")


# prefill_tokens_per_s and decode_step_ms are rough assumptions for one 8-GPU H100/H200-class
# instance, enough to set a request rate (measure your own); the KV geometry is the models' own.
PRESETS: dict[str, ModelSpec] = {m.name: m for m in (
    ModelSpec("llama3-70b", layers=80, attention="gqa", kv_heads=8, head_dim=128,
              kv_lora_rank=0, rope_dim=0, dtype_bytes=2,
              prefill_tokens_per_s=20_000, decode_step_ms=25),
    ModelSpec("glm-4.5", layers=92, attention="gqa", kv_heads=8, head_dim=128,
              kv_lora_rank=0, rope_dim=0, dtype_bytes=2,
              prefill_tokens_per_s=25_000, decode_step_ms=30),
    ModelSpec("glm-5", layers=78, attention="mla", kv_heads=0, head_dim=0,
              kv_lora_rank=512, rope_dim=64, dtype_bytes=1,
              prefill_tokens_per_s=20_000, decode_step_ms=40),
)}

_FIELDS = tuple(f.name for f in dataclasses.fields(ModelSpec))
_DEFAULT_ZERO = ("kv_heads", "head_dim", "kv_lora_rank", "rope_dim")


def get_model(spec) -> ModelSpec:
    """A :class:`ModelSpec` from a preset name, a ModelSpec, or a dict of ModelSpec fields.

    In a dict, fields the attention kind does not use may be left out (they become 0), and
    ``"preset": name`` starts from that preset so the dict only overrides what it names
    (``{"preset": "glm-5", "prefill_tokens_per_s": 30000}``).
    """
    if isinstance(spec, ModelSpec):
        return spec
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise ValueError(f"unknown model {spec!r}; presets are {', '.join(PRESETS)} "
                             f"(or give a dict of fields)")
        return PRESETS[spec]
    if not isinstance(spec, dict):
        raise ValueError(f"a model is a preset name or a dict of fields, got {spec!r}")
    fields = dict(spec)
    if "preset" in fields:
        fields = {**dataclasses.asdict(get_model(fields.pop("preset"))), **fields}
    unknown = sorted(set(fields) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown model field {unknown[0]!r}; fields are {', '.join(_FIELDS)}")
    for f in _DEFAULT_ZERO:
        fields.setdefault(f, 0)
    missing = [f for f in _FIELDS if f not in fields]
    if missing:
        raise ValueError(f"model field {missing[0]!r} is missing")
    return ModelSpec(**fields)


def kv_bytes_per_token(spec) -> int:
    """KV bytes of one token (one full copy, all layers), rounded to a whole byte."""
    m = get_model(spec)
    if m.attention == "mla":
        return round(m.layers * (m.kv_lora_rank + m.rope_dim) * m.dtype_bytes)
    return round(2 * m.layers * m.kv_heads * m.head_dim * m.dtype_bytes)


def kv_bytes(spec, tokens: int, scale: Scale | None = None) -> int:
    """KV bytes of ``tokens`` tokens, times ``scale.size`` when given (ZCUBE.md section 6)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(f"tokens must be a whole number >= 0, got {tokens!r}")
    size = 1.0 if scale is None else scale.size
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not size > 0 \
            or not math.isfinite(size):
        raise ValueError(f"scale.size must be a number > 0, got {size!r}")
    return round(kv_bytes_per_token(spec) * tokens * size)
