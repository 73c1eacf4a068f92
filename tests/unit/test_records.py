"""Summary figures of a run, from hand-made transfer rows (pure)."""
import pytest

from testbed.experiment.summaries import pool, summarize
from traffic.models import ModelSpec
from traffic.placement import Deployment, Instance
from traffic.types import Request
from traffic.workload import build_workload

MODEL = ModelSpec(name="tiny", layers=1, attention="gqa", kv_heads=1, head_dim=1,
                  kv_lora_rank=0, rope_dim=0, dtype_bytes=1, prefill_tokens_per_s=1000.0,
                  decode_step_ms=10.0)


def row(request, fct_ms, end_s, verified=True, size=1250):
    return {"request": request, "src": "g0", "dst": "g1", "bytes": size, "fct_ms": fct_ms,
            "end_s": end_s, "verified": verified, "status": "ok" if verified else "corrupt"}


def test_summary_counts_fct_slowdown_and_ttft():
    pd = Deployment([Instance("prefill", 0, ("g0",))], [Instance("decode", 0, ("g1",))], "packed")
    w = build_workload([Request(0, 0.0, 100, 1), Request(1, 0.0, 100, 1)], pd, MODEL)
    # prefill ends at 0.1 s and 0.2 s; transfers end at 0.15 s and 0.3 s
    rows = [row(0, 2.0, 0.15), row(1, 4.0, 0.30)]
    s = summarize(w, rows, nic_mbps=10.0)
    assert (s["transfers_total"], s["transfers_verified"], s["bytes_total"]) == (2, 2, 2500)
    assert s["fct_ms"]["p50"] == pytest.approx(3.0)
    # 1250 bytes at 10 Mb/s take 1 ms: slowdowns 2 and 4
    assert s["slowdown"]["p50"] == pytest.approx(3.0)
    assert s["ttft_ms"]["p50"] == pytest.approx((160 + 310) / 2)   # TTFTs 160 and 310 ms
    assert s["requests_completed"] == 2 and s["requests_per_s"] == round(2 / 0.3, 3)


def test_a_failed_transfer_removes_its_request_from_ttft_and_is_listed():
    pd = Deployment([Instance("prefill", 0, ("g0",))], [Instance("decode", 0, ("g1",))], "packed")
    w = build_workload([Request(0, 0.0, 100, 1), Request(1, 0.0, 100, 1)], pd, MODEL)
    s = summarize(w, [row(0, 2.0, 0.15), row(1, None, 0.30, verified=False)], nic_mbps=10.0)
    assert s["transfers_verified"] == 1 and s["requests_completed"] == 1
    assert s["failed"] == [{"request": 1, "src": "g0", "dst": "g1", "status": "corrupt"}]


def test_summary_shares_and_hops_are_of_the_rows():
    pd = Deployment([Instance("prefill", 0, ("g0",))], [Instance("decode", 0, ("g1",))],
                    "packed")
    w = build_workload([Request(0, 0.0, 100, 1), Request(1, 0.0, 100, 1)], pd, MODEL)
    rows = [dict(row(0, 2.0, 0.15), hops=1.0, start_s=0.1, first_byte_s=0.102),
            dict(row(1, 4.0, 0.30), hops=2.0, start_s=0.2, first_byte_s=0.201)]
    s = summarize(w, rows, nic_mbps=10.0)
    assert s["hops_mean"] == 1.5 and s["ttfb_ms"]["p50"] == pytest.approx(1.5)
    # queue + prefill: 100 and 200 ms of TTFTs 160 and 310 ms
    assert s["prefill_share_of_ttft"] == round(300 / 470, 4)
    assert summarize(w, [row(0, 2.0, 0.15), row(1, 4.0, 0.30)], 10.0)["hops_mean"] is None
    pooled = pool([(s, w, rows), (s, w, rows)], 10.0)
    assert pooled["hops_mean"] == 1.5 and pooled["spread"]["fct_p99_ms"]["ci95"] == 0.0
