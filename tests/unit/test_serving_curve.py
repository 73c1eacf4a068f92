"""Serving curves: the sweep run lowest rate first on several draws and continued to
saturation, the knee, and the SLO-throughput table with its paired ratio (no root)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from testbed.analysis import serving_curve
from testbed.experiment import sweep


def _sc(rates, draws=1, until_miss=None, slo=100.0):
    return SimpleNamespace(seed=5, sweep=SimpleNamespace(
        rates=rates, draws=draws, until_miss=until_miss, slo_ttft_ms=slo, every_rate=False,
        count=10))


def _point(capacity):
    """A fake fabric: P99 TTFT 50 ms below ``capacity`` (per seed), then tenfold per rate."""
    def point(seed, rate):
        cap = capacity + (seed - 5)
        ttft = 50.0 if rate <= cap else 50.0 * 10 * rate / cap
        return {"rate_per_s": rate, "ttft_p99_ms": ttft, "verified": 4, "total": 4,
                "repetition": None}
    return point


def test_a_curve_runs_past_the_listed_rates_until_every_draw_misses():
    logs = []
    out = sweep._curve(_sc([1, 2], draws=3, until_miss=2), _point(4), logs.append)
    assert [p["rate_per_s"] for p in out["points"]] == [1, 2, 4, 8]
    assert out["saturated"] and out["seeds"] == [5, 6, 7]
    assert out["slo_throughput_draws"] == [4, 4, 4]     # seed 7's capacity 6: 4 meets, 8 not
    assert out["slo_throughput_per_s"] == 4 and out["knee_per_s"] == 4
    assert out["points"][0]["ttft_p99_draws"] == [50.0, 50.0, 50.0]
    assert any("SLO throughput" in line for line in logs)


def test_a_curve_stops_after_eight_rates_more_without_saturating():
    out = sweep._curve(_sc([1], draws=2, until_miss=1.5), _point(10_000), lambda m: None)
    assert len(out["points"]) == 1 + sweep.MAX_EXTRA_RATES and not out["saturated"]


def test_one_draw_without_until_miss_keeps_the_sweep_from_the_highest_rate_down():
    out = sweep._down(_sc([1, 2, 4, 8]), _point(4), lambda m: None)
    assert [p["rate_per_s"] for p in out["points"]] == [4, 8]
    assert out["not_run"] == [1, 2] and out["slo_throughput_per_s"] == 4


def test_the_knee_is_the_last_rate_before_ttft_doubles():
    pts = [{"rate_per_s": r, "ttft_p99_ms": t} for r, t in ((1, 10), (2, 15), (3, 25), (4, 9))]
    assert sweep.knee(pts) == 2
    assert sweep.knee([]) is None


def _run(name, draws):
    return {"run": name, "slo_throughput_per_s": sum(draws) / len(draws),
            "sweep": {"draws": len(draws), "seeds": list(range(len(draws))),
                      "slo_ttft_ms": 100.0, "placement": "aligned",
                      "slo_throughput_draws": draws, "slo_throughput_ci95": 0.1,
                      "knee_per_s": 2.0, "saturated": True,
                      "points": [{"rate_per_s": 1.0, "ttft_p99_ms": 50.0,
                                  "ttft_p99_ci95": 1.0, "ttft_p99_draws": [50.0] * len(draws)}]}}


def test_the_table_pairs_slo_throughput_by_draw_and_higher_is_better(tmp_path):
    runs = [_run("zcube", [4.0, 4.0, 6.0]), _run("roft", [2.0, 2.1, 3.0]), {"run": "plain"}]
    rows = serving_curve.record(runs, str(tmp_path))
    assert [r["fabric"] for r in rows] == ["zcube", "roft"]
    assert rows[1]["ratio"] == pytest.approx(0.5, abs=0.03)
    assert rows[1]["verdict"] == "zcube higher"
    text = serving_curve.to_text(rows)
    assert "roft: 2.36667 ±0.1 req/s" in text and "zcube higher" in text
    csv = (tmp_path / "serving_curve.csv").read_text().splitlines()
    assert csv[0].startswith("fabric,placement,rate_per_s,draw,seed") and len(csv) == 7
    assert serving_curve.record([{"run": "plain"}], str(tmp_path / "none")) == []


def test_zcube_run_draws_each_fabrics_curve_to_saturation(tmp_path, capsys):
    """End to end on the model: the shipped scenario cut to two draws of 12 requests."""
    import csv
    import json
    from pathlib import Path

    from testbed.cli.main import main
    text = (Path(__file__).parents[2] / "scenarios" / "serving-curve.yaml").read_text()
    text = text.replace("draws: 5", "draws: 2").replace("count: 40", "count: 12")
    path = tmp_path / "curve.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(path), "-o", str(out), "--fabrics", "zcube,roft"]) == 0
    assert "serving curve: SLO throughput" in capsys.readouterr().out
    doc = json.loads((out / "serving_curve.json").read_text())
    assert [r["fabric"] for r in doc["fabrics"]] == ["zcube", "roft"]
    rates = {float(p["rate_per_s"]) for p in doc["points"]}
    assert {2.0, 4.0, 6.0} <= rates               # on past the listed rates
    with open(out / "serving_curve.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["draw"] for r in rows} == {"0", "1"} and {r["seed"] for r in rows} == {"1", "2"}
    assert (out / "plots" / "serving-curve.png").is_file()
    assert "Serving curve" in (out / "report.html").read_text()


def test_the_throughput_claim_reads_the_curves_paired_ratio():
    from testbed.analysis.claims import _curve_claim
    ref = dict(_run("zcube", [4.0, 4.2, 6.0]), scenario="s")
    clos = dict(_run("roft", [2.0, 2.1, 3.0]), policy="ecmp")
    said = _curve_claim("inference throughput +15%", 1.15, "cross-rail", ref, clos)
    assert "2.000x the Clos's" in said and "ZCube higher, by more than claimed" in said
    level = dict(_run("roft", [4.0, 4.2, 6.0]), policy="ecmp")
    assert "not reproduced: level" in _curve_claim("c", 1.15, "p", ref, level)
    one = dict(_run("roft", [0.0, 0.0, 3.0]), policy="ecmp")
    assert "no verdict" in _curve_claim("c", 1.15, "p", ref, one)


def test_api_run_gives_the_serving_curve_rows(tmp_path):
    from pathlib import Path

    from testbed import api
    text = (Path(__file__).parents[2] / "scenarios" / "serving-curve.yaml").read_text()
    path = tmp_path / "curve.yaml"
    path.write_text(text.replace("draws: 5", "draws: 2").replace("count: 40", "count: 12"))
    res = api.run(str(path), backend="model", output=str(tmp_path / "out"),
                  fabrics=["zcube", "roft-spray"])
    assert [r["fabric"] for r in res.serving_curve] == ["zcube", "roft-spray"]
    assert res.serving_curve[1]["verdict"] in ("level", "zcube higher", "roft-spray higher",
                                               "not separated")
