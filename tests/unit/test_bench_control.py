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
    # correlation is exact and the controlled estimate is the model's 40-draw mean, exactly
    assert "correlation 1.000" in p99
    ctl, model40 = p99.split("with the control ")[1], p99.split(" over 40")[0].split()[-1]
    assert ctl.startswith(model40.rstrip(",") + " (" + model40.rstrip(","))
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
        ["FCT p99 ms roft/zcube", "TTFT p99 ms roft/zcube"]
    big = {r["run"]: r for r in load_runs([str(many)])}
    from testbed.analysis.compare import log_ratios
    for line in lines:
        assert "over 6 draws (correlation 1.00) and its 30" in line
        metric = line.split(": ")[1].split(" roft")[0]
        logs = list(log_ratios(big["zcube"], big["roft"], metric).values())
        mean = math.exp(sum(logs) / len(logs))
        # the run is the model's own first six draws: corrected, it is the 30-draw mean
        assert f"roft/zcube {mean:.3f} (95% {mean:.3f}-{mean:.3f})" in line
    other = [dict(r, run="x" + r["run"]) for r in load_runs([str(few)])]
    assert controlled_lines(other, load_runs([str(many)])) == []
