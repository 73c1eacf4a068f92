"""Model specs and KV bytes per token (ZCUBE.md section 5), and every refusal of a bad model."""
from __future__ import annotations

import dataclasses
import re

import pytest

from traffic.models import PRESETS, ModelSpec, get_model, kv_bytes, kv_bytes_per_token
from traffic.types import Scale

KIB = 1024


@pytest.mark.parametrize("name, per_token", [
    ("llama3-70b", 327_680),          # 2 x 80 x 8 x 128 x 2 = 320 KiB
    ("glm-4.5", 368 * KIB),           # 2 x 92 x 8 x 128 x 2 = 368 KiB
    ("glm-5", 44_928),                # 78 x (512 + 64) x 1
])
def test_preset_kv_bytes_per_token(name, per_token):
    assert kv_bytes_per_token(name) == per_token
    assert kv_bytes_per_token(PRESETS[name]) == per_token
    assert isinstance(kv_bytes_per_token(name), int)


def test_llama_is_320_kib_and_glm5_32k_prompt_is_1_47_gb():
    assert kv_bytes_per_token("llama3-70b") == 320 * KIB
    assert kv_bytes("glm-5", 32 * KIB) == 1_472_200_704        # "about 1.47 GB", section 5


def test_preset_attention_kinds():
    assert PRESETS["glm-5"].attention == "mla"
    assert PRESETS["llama3-70b"].attention == PRESETS["glm-4.5"].attention == "gqa"


USER_GQA = {"name": "mha-7b", "layers": 32, "attention": "gqa", "kv_heads": 32,
            "head_dim": 128, "dtype_bytes": 2, "prefill_tokens_per_s": 50_000,
            "decode_step_ms": 10}
USER_MLA = {"name": "dsv3", "layers": 61, "attention": "mla", "kv_lora_rank": 512,
            "rope_dim": 64, "dtype_bytes": 2, "prefill_tokens_per_s": 10_000,
            "decode_step_ms": 50}


def test_user_defined_models():
    gqa, mla = get_model(USER_GQA), get_model(USER_MLA)
    assert isinstance(gqa, ModelSpec) and gqa.name == "mha-7b"
    assert kv_bytes_per_token(gqa) == 2 * 32 * 32 * 128 * 2 == 524_288
    assert kv_bytes_per_token(USER_MLA) == 61 * 576 * 2 == 70_272
    assert (mla.kv_heads, mla.head_dim, gqa.kv_lora_rank, gqa.rope_dim) == (0, 0, 0, 0)


def test_fp4_kv_and_preset_override():
    assert kv_bytes_per_token({**USER_GQA, "dtype_bytes": 0.5}) == 524_288 // 4
    fast = get_model({"preset": "glm-5", "prefill_tokens_per_s": 30_000})
    assert fast.prefill_tokens_per_s == 30_000 and fast.kv_lora_rank == 512
    assert fast == dataclasses.replace(PRESETS["glm-5"], prefill_tokens_per_s=30_000)
    assert PRESETS["glm-5"].prefill_tokens_per_s != 30_000     # the preset is untouched


def test_get_model_passes_a_spec_through_and_specs_are_frozen():
    spec = PRESETS["glm-4.5"]
    assert get_model(spec) is spec and get_model("glm-4.5") is spec
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.layers = 1


def test_unknown_preset_names_the_name_and_the_presets():
    with pytest.raises(ValueError, match="llama-9000") as err:
        get_model("llama-9000")
    assert all(name in str(err.value) for name in PRESETS)


@pytest.mark.parametrize("spec", [None, 42, ["glm-5"]])
def test_get_model_refuses_other_types(spec):
    with pytest.raises(ValueError, match="preset name or a dict"):
        get_model(spec)


@pytest.mark.parametrize("base, field", [(USER_GQA, f) for f in
                                         ("name", "layers", "attention", "kv_heads", "head_dim",
                                          "dtype_bytes", "prefill_tokens_per_s",
                                          "decode_step_ms")]
                         + [(USER_MLA, "kv_lora_rank")])
def test_missing_field_is_named(base, field):
    spec = {k: v for k, v in base.items() if k != field}
    with pytest.raises(ValueError, match=repr(field)):
        get_model(spec)


@pytest.mark.parametrize("field, value", [
    ("layers", -1), ("kv_heads", -8), ("head_dim", -128), ("rope_dim", -64),
    ("dtype_bytes", -2), ("prefill_tokens_per_s", -1.0), ("decode_step_ms", -5),
    ("dtype_bytes", 0), ("decode_step_ms", float("nan")), ("prefill_tokens_per_s", float("inf")),
    ("layers", 0), ("kv_heads", 0), ("head_dim", 0),         # GQA needs them >= 1
])
def test_negative_or_zero_field_is_named(field, value):
    with pytest.raises(ValueError, match=repr(field)):
        get_model({**USER_GQA, field: value})


@pytest.mark.parametrize("field, value", [
    ("layers", "80"), ("layers", 80.0), ("kv_heads", True), ("head_dim", None),
    ("dtype_bytes", "2"), ("dtype_bytes", False), ("decode_step_ms", [10]),
    ("name", ""), ("name", 7), ("attention", "mha"), ("attention", None),
])
def test_wrong_type_field_is_named(field, value):
    with pytest.raises(ValueError, match=repr(field)):
        get_model({**USER_GQA, field: value})


def test_mla_needs_a_latent_rank():
    with pytest.raises(ValueError, match="'kv_lora_rank'"):
        get_model({**USER_MLA, "kv_lora_rank": 0})
    assert kv_bytes_per_token({**USER_MLA, "rope_dim": 0}) == 61 * 512 * 2   # rope may be 0


def test_unknown_field_is_named():
    with pytest.raises(ValueError, match="'kv_head'"):
        get_model({**USER_GQA, "kv_head": 8})
    with pytest.raises(ValueError, match="nope"):
        get_model({"preset": "nope"})


def test_kv_bytes_scales_with_tokens_and_scale_size():
    per = kv_bytes_per_token("llama3-70b")
    assert kv_bytes("llama3-70b", 0) == 0
    assert kv_bytes("llama3-70b", 1000) == 1000 * per
    assert kv_bytes("llama3-70b", 1000, Scale()) == 1000 * per
    assert kv_bytes("llama3-70b", 1000, Scale(link=0.01, size=0.01)) == 10 * per
    small = kv_bytes("glm-5", 3, Scale(size=1e-3))           # 134.784 -> 135
    assert small == 135 and isinstance(small, int)
    assert kv_bytes(USER_MLA, 2) == 2 * 70_272


@pytest.mark.parametrize("tokens", [-1, 1.5, "10", True, None])
def test_kv_bytes_refuses_bad_token_counts(tokens):
    with pytest.raises(ValueError, match="tokens"):
        kv_bytes("glm-5", tokens)


@pytest.mark.parametrize("size", [0, -1.0, float("nan")])
def test_kv_bytes_refuses_bad_scale(size):
    with pytest.raises(ValueError, match="scale.size"):
        kv_bytes("glm-5", 10, Scale(size=size))


@pytest.mark.parametrize("field, value, says", [
    ("dtype_bytes", 1e300, "'dtype_bytes' must be at most 64, got 1e+300"),
    ("decode_step_ms", 1e300, "'decode_step_ms' must be at most 86,400,000"),
    ("layers", 10 ** 13, "'layers' must be at most 10,000"),
    ("prefill_tokens_per_s", 1e13, "'prefill_tokens_per_s' must be at most 1,000,000,000,000"),
])
def test_model_fields_beyond_any_real_model_are_refused(field, value, says):
    """Within these limits a KV size stays a finite float (a dtype_bytes of 1e300 once
    overflowed while the scenario was checked, found by test_bad_input's fuzzing)."""
    with pytest.raises(ValueError, match=re.escape(says)):
        dataclasses.replace(get_model("llama3-70b"), **{field: value})
    biggest = dataclasses.replace(get_model("llama3-70b"), layers=10_000, kv_heads=100_000,
                                  head_dim=100_000, dtype_bytes=64)
    assert kv_bytes(biggest, 10 ** 7) < 1e300
