"""benchmarks/bench_drift.py: whether a fabric's pace drifts within one bring-up (blocks of
repetitions against their own spread) and what each carrying order leaves of a shared drift
(no root, no emulator)."""
import json
import math

import pytest


@pytest.fixture(scope="module")
def bench(bench_module):
    return bench_module("bench_drift")


def test_blocks_that_move_together_are_found_and_steady_ones_are_not(bench):
    steady = bench.blocks([0.0, 1.0] * 8, 8)
    assert steady["F"] == pytest.approx(0) and steady["p"] == pytest.approx(1)
    moved = bench.blocks([0.0, 1.0] * 4 + [10.0, 11.0] * 4, 8)
    assert moved["blocks"] == 2 and moved["F"] > 100 and moved["p"] < 1e-6
    # the block means' spread over the standard error of one block's mean
    assert moved["ratio"] == pytest.approx(math.sqrt(moved["F"]))
    assert bench.blocks([1.0] * 16, 8) is None and bench.blocks([1.0] * 10, 8) is None


def test_lag1_autocorrelation(bench):
    assert bench.lag1([0.0, 1.0] * 10) == pytest.approx(-0.95)
    assert bench.lag1([float(t) for t in range(20)]) > 0.8


@pytest.mark.parametrize("n", [4, 8, 5])
def test_each_order_gives_both_fabrics_n_places_and_mirrored_balances_them(bench, n):
    for name, (a, b) in bench.orders(n).items():
        assert len(a) == len(b) == n and sorted(a + b) == list(range(2 * n)), name
    a, b = bench.orders(n)["mirrored"]
    if n % 2 == 0:                               # a linear drift falls on both alike
        assert sum(a) == sum(b)


def test_a_slow_shared_drift_is_what_mirrored_and_alternated_orders_remove(bench):
    drift = [1 + 0.05 * math.sin(2 * math.pi * t / 60) for t in range(120)]
    e = bench.order_error(drift, 8)
    assert e["fabric"] > 2 * e["mirrored"] and e["fabric"] > 2 * e["alternate"]


def test_it_reads_a_run_and_says_so(bench, tmp_path, capsys):
    reps = [{"fct_ms": {"p50": 15 + (t // 8) % 2}, "fidelity": {"probe": {"p50_ms": 0.3}}}
            for t in range(32)]
    reps[0]["fct_ms"]["p50"] = 15.01
    (tmp_path / "summary.json").write_text(json.dumps({"run": "zc", "per_rep": reps}))
    assert bench.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "32 repetitions" in out and "FCT p50: mean 15.500; 4 blocks of 8" in out
    assert "probe p50: mean 0.300; no spread inside its blocks" in out
    assert "ratio error by order fabric" in out
