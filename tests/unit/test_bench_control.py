"""benchmarks/bench_control.py: the model carried on a finished run's own draws as a control
variate for it (no root: the finished run is the model's own here, the one case whose answer
is known exactly)."""
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_control.py"


def run(*args):
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_a_run_of_the_model_is_its_own_control_draw_by_draw(tmp_path):
    out = tmp_path / "measured"
    got = run("-m", "testbed.cli", "run", "cross-rail-draws", "--backend", "model",
              "--repetitions", "10", "--no-report", "-o", out)
    assert got.returncode == 0, got.stderr
    got = run(SCRIPT, "cross-rail-draws", out, "--model-draws", "40", "--blocks", "5")
    assert got.returncode == 0, got.stderr
    p99 = next(line for line in got.stdout.splitlines() if "FCT p99 ms: correlation" in line)
    # the same requests over the same paths: the model's ratios are the run's, so the
    # correlation is exact and the controlled estimate is the model's mean over its 40 other
    # draws, within that mean's own spread
    assert "correlation 1.000" in p99
    ctl, model40 = p99.split("with the control ")[1], p99.split(" over 40")[0].split()[-1]
    assert ctl.startswith(model40.rstrip(",") + " (")
    lo, hi = map(float, ctl.split(" (")[1].split(")")[0].split("-"))
    assert lo < float(model40.rstrip(",")) < hi
    assert "blocks of  5 (2)" in got.stdout


def test_a_run_of_another_scenario_is_refused_in_one_line(tmp_path):
    out = tmp_path / "measured"
    got = run("-m", "testbed.cli", "run", "cross-rail-draws", "--backend", "model",
              "--repetitions", "3", "--no-report", "-o", out)
    assert got.returncode == 0, got.stderr
    got = run(SCRIPT, "demo", out, "--model-draws", "5")
    assert got.returncode != 0 and "is a run of cross-rail-draws, not of demo" in got.stderr
    assert "Traceback" not in got.stderr


def test_the_demos_controlled_lines_put_a_model_run_at_the_models_many_draw_mean(tmp_path):
    from testbed.analysis.compare import controlled_lines, load_runs
    few, many = tmp_path / "few", tmp_path / "many"
    for out, reps in ((few, 6), (many, 30)):
        got = run("-m", "testbed.cli", "run", "cross-rail-draws", "--backend", "model",
                  "--repetitions", reps, "--no-report", "-o", out)
        assert got.returncode == 0, got.stderr
    lines = controlled_lines(load_runs([str(few)]), load_runs([str(many)]))
    assert [line.split(": ")[1].split(" (")[0].rsplit(" ", 1)[0] for line in lines] == \
        ["FCT p50 ms roft/zcube", "FCT p99 ms roft/zcube", "TTFT p99 ms roft/zcube"]
    big = {r["run"]: r for r in load_runs([str(many)])}
    from testbed.analysis.compare import log_ratios
    for line in lines[1:]:
        assert "over 6 draws (correlation 1.00) and its 24" in line
    for line in lines:
        metric = line.split(": ")[1].split(" roft")[0]
        logs = list(log_ratios(big["zcube"], big["roft"], metric).values())[6:]
        mean = math.exp(sum(logs) / len(logs))
        # the run is the model's own first six draws: corrected, it is the mean of the 24
        # others, its interval that mean's own
        assert f"roft/zcube {mean:.3f} (95% " in line
        lo, hi = map(float, line.split("(95% ")[1].split(")")[0].split("-"))
        assert lo < mean < hi and hi / lo < 1.5
    other = [dict(r, run="x" + r["run"]) for r in load_runs([str(few)])]
    assert controlled_lines(other, load_runs([str(many)])) == []


def test_random_sets_held_against_another_run_on_other_seeds(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    scenario = tmp_path / "cross-rail-draws.yaml"
    scenario.write_text((ROOT / "scenarios" / "cross-rail-draws.yaml").read_text()
                        .replace("\nseed: 1\n", "\nseed: 31\n"))
    for out, which in ((one, "cross-rail-draws"), (two, scenario)):
        got = run("-m", "testbed.cli", "run", which, "--backend", "model", "--repetitions", 8,
                  "--no-report", "-o", out)
        assert got.returncode == 0, got.stderr
    got = run(SCRIPT, "cross-rail-draws", one, "--model-draws", 30, "--blocks", "4",
              "--samples", 12, "--against", two)
    assert got.returncode == 0, got.stderr
    p99 = got.stdout.split("FCT p99 ms: correlation")[1].split("  roft/")[0]
    # both runs are the model's own: each set's estimate with the control is the mean of
    # the same 30 other draws as the other run's, so every one holds it; plain ones need not
    assert "the other run, 8 draws: with the control" in p99
    line = next(x for x in p99.splitlines() if "12 random sets of  4" in x)
    assert line.endswith("with the control 100%"), line
    bad = run(SCRIPT, "cross-rail-draws", one, "--against", tmp_path / "none")
    assert bad.returncode != 0 and "is not a finished run" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_model_carries_every_fabric_over_every_draw_whatever_its_own_count():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_control import on_model
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    got = on_model("cross-rail", None, 8)       # its spraying Clos carries six of its own
    assert {name: s["repetitions"] for name, s in got.items()} == {
        "zcube": 8, "roft": 8, "roft-spray": 8}
