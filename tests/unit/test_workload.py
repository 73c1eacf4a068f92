"""Scheduling requests on a PD deployment, the transfers they cause, and TTFT arithmetic."""
import pytest

from traffic.models import ModelSpec, kv_bytes_per_token
from traffic.placement import Deployment, Instance
from traffic.types import Request, Scale
from traffic.workload import build_workload, slo_throughput, ttft_s

# 4 KV heads x 2 layers x head_dim 8 x 2 bytes x 2 (K and V) = 256 bytes per token
MODEL = ModelSpec(name="tiny", layers=2, attention="gqa", kv_heads=4, head_dim=8,
                  kv_lora_rank=0, rope_dim=0, dtype_bytes=2, prefill_tokens_per_s=1000.0,
                  decode_step_ms=20.0)


def deployment(prefill=1, decode=1, tp=2):
    gpus = iter(f"g{i}" for i in range(100))
    p = [Instance("prefill", i, tuple(next(gpus) for _ in range(tp)), tp) for i in range(prefill)]
    d = [Instance("decode", i, tuple(next(gpus) for _ in range(tp)), tp) for i in range(decode)]
    return Deployment(p, d, "packed")


def test_tiny_model_has_256_bytes_per_token():
    assert kv_bytes_per_token(MODEL) == 256


def test_one_prefill_instance_serves_first_come_first_served():
    reqs = [Request(0, 0.0, 1000, 10), Request(1, 0.0, 2000, 10), Request(2, 5.0, 500, 10)]
    w = build_workload(reqs, deployment(), MODEL)
    s = {x.request.id: x for x in w.schedule}
    assert (s[0].prefill_start_s, s[0].prefill_end_s, s[0].queue_s) == (0.0, 1.0, 0.0)
    assert (s[1].prefill_start_s, s[1].prefill_end_s, s[1].queue_s) == (1.0, 3.0, 1.0)
    assert (s[2].prefill_start_s, s[2].prefill_end_s, s[2].queue_s) == (5.0, 5.5, 0.0)


def test_requests_go_to_the_prefill_instance_that_frees_first():
    reqs = [Request(0, 0.0, 3000, 1), Request(1, 0.0, 1000, 1), Request(2, 0.5, 1000, 1)]
    w = build_workload(reqs, deployment(prefill=2), MODEL)
    assert [x.prefill for x in w.schedule] == [0, 1, 1]
    assert w.schedule[2].prefill_start_s == 1.0          # instance 1 frees at 1.0, 0 at 3.0


def test_decode_instances_take_requests_in_turn():
    reqs = [Request(i, float(i), 100, 1) for i in range(5)]
    w = build_workload(reqs, deployment(decode=2), MODEL)
    assert [x.decode for x in w.schedule] == [0, 1, 0, 1, 0]


def test_equal_tp_moves_one_copy_rank_to_rank_when_the_prefill_ends():
    w = build_workload([Request(7, 0.0, 1000, 1)], deployment(tp=2), MODEL)
    assert sorted((t.src, t.dst, t.bytes, t.ready_s) for t in w.transfers) == [
        ("g0", "g2", 128_000, 1.0), ("g1", "g3", 128_000, 1.0)]
    assert w.bytes_total == w.schedule[0].kv_bytes == 1000 * 256


def test_layer_wise_chunks_are_ready_as_the_prefill_progresses():
    w = build_workload([Request(0, 2.0, 1000, 1)], deployment(tp=1), MODEL, chunks=4)
    assert [(t.chunk, t.ready_s, t.bytes) for t in w.transfers] == [
        (0, 2.25, 64_000), (1, 2.5, 64_000), (2, 2.75, 64_000), (3, 3.0, 64_000)]


def test_cached_prefix_is_neither_prefilled_nor_moved():
    w = build_workload([Request(0, 0.0, 1000, 1, cached_tokens=600)], deployment(tp=1), MODEL)
    assert w.schedule[0].prefill_end_s == pytest.approx(0.4)
    assert w.bytes_total == 400 * 256
    fully = build_workload([Request(0, 0.0, 512, 1, cached_tokens=512)], deployment(tp=1), MODEL)
    assert fully.transfers == []


def test_size_scale_multiplies_the_bytes_moved():
    w = build_workload([Request(0, 0.0, 1000, 1)], deployment(tp=1), MODEL,
                       scale=Scale(link=1e-3, size=1e-3))
    assert w.bytes_total == 256
    assert w.scale.to_dict() == {"link": 1e-3, "size": 1e-3, "time_dilation": 1.0}


def test_ttft_adds_queue_prefill_transfer_and_one_decode_step():
    reqs = [Request(0, 0.0, 1000, 1), Request(1, 0.0, 1000, 1)]
    w = build_workload(reqs, deployment(), MODEL)
    second = w.schedule[1]                       # waits 1 s, prefills 1 s
    assert ttft_s(second, 2.5, MODEL) == pytest.approx(2.5 + 0.020)
    assert ttft_s(second, None, MODEL) == pytest.approx(2.0 + 0.020)
    assert ttft_s(second, 1.0, MODEL) == pytest.approx(2.0 + 0.020)   # cannot finish early


def test_bad_workload_parameters_are_refused():
    with pytest.raises(ValueError, match="chunks"):
        build_workload([], deployment(), MODEL, chunks=0)
    with pytest.raises(ValueError, match="prefill and one decode"):
        build_workload([], Deployment([], [], "packed"), MODEL)


def test_slo_throughput_picks_the_largest_rate_within():
    assert slo_throughput([1, 2, 4, 8], [0.1, 0.2, 0.5, 2.0], slo_s=0.5) == 4
    assert slo_throughput([1, 2], [3.0, 4.0], slo_s=0.5) is None
