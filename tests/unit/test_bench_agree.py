"""benchmarks/bench_agree.py: runs' paired ratios pooled, how far they disagree beyond their
intervals, and the chance that a try's runs give one verdict (no root: the model backend)."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_agree.py"


@pytest.fixture(scope="module")
def bench(bench_module):
    return bench_module("bench_agree")


def test_runs_that_agree_within_their_intervals_show_no_heterogeneity(bench):
    h = bench.heterogeneity([0.1, 0.1, 0.1], [0.02, 0.01, 0.05])
    assert h["pooled"] == pytest.approx(0.1) and h["q"] == pytest.approx(0)
    assert h["tau"] == 0 and h["i2"] == 0 and h["df"] == 2 and h["p"] == pytest.approx(1)


def test_runs_apart_by_far_more_than_their_intervals(bench):
    # two runs at log ratios -0.1 and +0.1, each +/- 0.01: Q = 2 * 0.1^2 / 0.01^2 = 200
    h = bench.heterogeneity([-0.1, 0.1], [0.01, 0.01])
    assert h["pooled"] == pytest.approx(0) and h["q"] == pytest.approx(200)
    assert h["i2"] == pytest.approx(199 / 200) and h["p"] < 1e-40
    assert h["tau"] == pytest.approx(math.sqrt(199 / 10000))    # (Q - df) / (sum w - ...)
    # inverse-variance weights: the narrower run pulls the pooled ratio to itself
    assert bench.heterogeneity([0.0, 0.3], [0.01, 0.1])["pooled"] == pytest.approx(0.3 / 101)


@pytest.mark.parametrize("ratio, tau, se, expect", [
    (0.5, 0.0, 0.01, 1.0),         # far below 1, narrow: always the same winner
    (0.95, 0.0, 0.001, 1.0),       # 5% below 1, narrow: always the same winner
    (1.0, 0.0, 0.2, 0.0),          # at 1 and wide: always unclear
])
def test_chance_of_one_verdict_at_the_extremes(bench, ratio, tau, se, expect):
    assert bench.chance_same(math.log(ratio), tau, [se], [8], 3, 2000) == expect


def test_chance_of_one_verdict_falls_near_a_boundary_and_with_run_to_run_spread(bench):
    from testbed.core.metrics import t95
    edge = math.log(0.925)                                        # the level band's edge
    # a run is level where its whole interval clears the edge: centred a half-width above
    # it, each run lands level or a winner about as often (all three alike: about 1 in 4)
    near = bench.chance_same(edge + t95(8) * 0.004, 0.0, [0.004], [8], 3, 20000, rule="band")
    assert 0.15 < near < 0.35
    # issue 12's rule has its boundary at 1: a half-width off it, the same coin toss
    one = bench.chance_same(t95(8) * 0.004, 0.0, [0.004], [8], 3, 20000)
    assert 0.15 < one < 0.35
    calm = bench.chance_same(math.log(0.95), 0.0, [0.01], [8], 3, 20000)
    spread = bench.chance_same(math.log(0.95), 0.05, [0.01], [8], 3, 20000)
    assert calm > 0.99 and spread < calm - 0.2
    assert bench.chance_same(edge, 0.01, [0.004], [8], 3, 5000, seed=7) == \
        bench.chance_same(edge, 0.01, [0.004], [8], 3, 5000, seed=7)   # seeded


def test_runs_of_a_folder_in_order_without_those_set_aside(bench, tmp_path):
    for name in ("run0", "run2", "run10", "run1-aside1", "run2-code0123456789ab", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
    assert [Path(p).name for p in bench.run_dirs(str(tmp_path))] == ["run0", "run2", "run10"]
    assert bench.run_dirs(str(tmp_path / "run2")) == [str(tmp_path / "run2")]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no run here"):
        bench.run_dirs(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="no such folder"):
        bench.run_dirs(str(tmp_path / "none"))


def test_two_runs_of_the_seeded_model_agree_exactly(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_repeat.py"), "demo",
                    "--backend", "model", "--runs", "2", "--repetitions", "3", "-o",
                    str(tmp_path)], cwd=ROOT, capture_output=True, text=True, check=True)
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--tries", "2",
                          "--draws", "500"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    code = json.loads((tmp_path / "run0" / "run.json").read_text())["versions"]["code"]
    assert out.splitlines()[0] == f"runs' code: {code} (2)"
    p50 = next(line for line in out.splitlines() if "FCT p50 ms" in line)
    assert "roft/zcube: 2 runs" in p50 and "intervals holding it 2 of 2" in p50
    assert "tau 0.0000" in p50 and "I^2 0.00" in p50
    verdicts = p50.split("; verdicts ")[1].split(";")[0]
    assert verdicts.endswith(" 2")                       # both runs gave one verdict
    assert p50.endswith(" 1 of 1 tries") == ("unclear" not in verdicts)


def test_a_folder_without_runs_is_one_usage_line(tmp_path):
    got = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True)
    assert got.returncode == 2 and "no run here" in got.stderr
    assert "Traceback" not in got.stderr


def test_issue_12s_separation_rule_names_a_winner_first(bench):
    separation, band = bench.RULES["separation"], bench.RULES["band"]
    narrow_below = {"ratio": 0.93, "lo": 0.928, "hi": 0.932}       # separated, inside the band
    assert separation(narrow_below) == "other" and band(narrow_below) == "level"
    assert separation({"ratio": 1.05, "lo": 1.01, "hi": 1.09}) == "ref"
    straddle = {"ratio": 0.97, "lo": 0.92, "hi": 1.02}   # holds 1, half-width 5%, past the band
    assert separation(straddle) == "level" and band(straddle) == "unclear"
    assert separation({"ratio": 0.94, "lo": 0.86, "hi": 1.03}) == "unclear"
    # a median ratio on the band's edge, separated from 1 in every run: the band rule calls
    # runs level or a winner by turns, the separation rule a winner every time
    edge = (math.log(0.925), 0.007, [0.004], [8], 3, 20000)
    assert bench.chance_same(*edge, rule="separation") > 0.99
    assert bench.chance_same(*edge, rule="band") < 0.8
    # a ratio within a hair of 1, narrow: the other way round
    hair = (math.log(0.9995), 0.0002, [0.0002], [8], 3, 20000)
    assert bench.chance_same(*hair, rule="band") == 1.0
    assert bench.chance_same(*hair, rule="separation") < 0.8


def test_as_if_longer_runs_narrow_each_run_but_not_the_spread_between_runs(bench):
    def drawn(ratio_by_run, se, as_if, rule="separation"):
        rows = [{"try": "t", "m": math.log(r), "se": se, "n": 8, "verdict": "other"}
                for r in ratio_by_run]
        said = bench.line(("aligned", "FCT p99 ms", "roft", "zcube"), rows, 3, 4000,
                          rule=rule, as_if=as_if)
        return [int(c.rstrip("%")) for c in said.split("repetitions a run: ")[1].split(", ")]
    # runs that agree, each wide: more repetitions a run settle the verdict
    wide = drawn([0.90, 0.90, 0.90, 0.90], 0.04, (8, 32))
    assert wide[0] < 60 and wide[1] > 95
    # runs scattered about the level band's edge: more repetitions a run do not settle it
    edge = drawn([0.915, 0.935, 0.912, 0.938, 0.925, 0.931], 0.004, (8, 32), rule="band")
    assert edge[1] <= edge[0] < 80
    assert drawn([0.915, 0.935, 0.912, 0.938, 0.925, 0.931], 0.004, (8, 32)) == [100, 100]
    # ... and about 1, by issue 12's rule
    one = drawn([0.99, 1.01, 0.988, 1.012, 1.0, 1.006], 0.004, (8, 32))
    assert one[1] <= one[0] < 80


def test_the_probe_set_against_each_runs_median(bench):
    pts = [(0.30, 15.5), (0.32, 15.6), (0.35, 15.8), (0.28, 15.4)]
    f = bench.fit(pts)
    assert f["n"] == 4 and f["pearson"] > 0.95 and f["spearman"] == pytest.approx(1.0)
    assert 3 < f["slope"] < 6
    said = bench.probe_lines({("aligned", "zcube"): pts,
                              ("aligned", "roft", "zcube"): [(-0.15, 0.92), (-0.2, 0.91),
                                                             (-0.1, 0.93)],
                              ("aligned", "few"): pts[:2]})        # under three runs: left out
    assert said[0].startswith("  zcube: 4 runs, median FCT 15.40-15.80 ms, probe median "
                              "0.280-0.350 ms: Pearson r ")
    assert "FCT p50 roft/zcube (0.910-0.930) against roft's probe median minus zcube's: " \
           "Pearson r 1.00" in said[1]
    assert len(said) == 2


def test_runs_without_a_probe_say_so(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_repeat.py"), "demo",
                    "--backend", "model", "--runs", "1", "--repetitions", "2", "-o",
                    str(tmp_path)], cwd=ROOT, capture_output=True, text=True, check=True)
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--probe", "--draws",
                          "100"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.rstrip().endswith("no three runs with a datapath probe (fidelity.probe.p50_ms)")
