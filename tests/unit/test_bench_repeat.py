"""benchmarks/bench_repeat.py: ``--repetitions`` and ``--order`` reach every run, and
``--resume`` keeps the runs an earlier call finished and runs only the others (on the model
backend: no root)."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_repeat.py"


def _call(out, *extra, check=True):
    return subprocess.run([sys.executable, str(SCRIPT), "demo", "--backend", "model", "--runs",
                           "2", "--repetitions", "2", "-o", str(out), *extra], cwd=ROOT,
                          capture_output=True, text=True, check=check)


def _report(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith("run ")]


def test_resume_keeps_finished_runs_and_runs_again_one_cut_short(tmp_path):
    first = _call(tmp_path, "--order", "mirrored").stdout
    assert "kept from an earlier call" not in first
    for k in (0, 1):
        with open(tmp_path / f"run{k}" / "run.json") as f:
            assert json.load(f)["seeds"] == [1, 2]                   # --repetitions 2
        said = (tmp_path / f"run{k}" / "zcube" / "scenario.yaml").read_text()
        assert "\norder: mirrored\n" in said                         # --order mirrored
    kept = (tmp_path / "run0" / "run.json").stat().st_mtime_ns
    os.remove(tmp_path / "run1" / "run.json")                       # as if cut short
    again = _call(tmp_path, "--order", "mirrored", "--resume").stdout
    assert f"run 1/2 -> {tmp_path / 'run0'} (kept from an earlier call)" in again
    assert f"run 2/2 -> {tmp_path / 'run1'}\n" in again
    assert (tmp_path / "run0" / "run.json").stat().st_mtime_ns == kept
    assert (tmp_path / "run1" / "run.json").is_file()
    assert _report(again) == _report(first)                         # the model is seeded


def test_resume_without_an_output_folder_is_a_usage_error(tmp_path):
    got = subprocess.run([sys.executable, str(SCRIPT), "demo", "--backend", "model",
                          "--resume"], cwd=ROOT, capture_output=True, text=True)
    assert got.returncode == 2 and "--resume needs -o DIR" in got.stderr
    assert "Traceback" not in got.stderr
    got = _call(tmp_path, "--repetitions", "0", check=False)
    assert got.returncode == 2 and "--repetitions must be 1 or more" in got.stderr
    assert not any(tmp_path.iterdir())                               # nothing ran


def test_resume_runs_again_a_run_made_by_other_code(tmp_path):
    first = _call(tmp_path).stdout
    from testbed.experiment.provenance import code_digest
    here = code_digest()
    assert first.rstrip().endswith(f"code: {here} in every run")
    meta_path = tmp_path / "run0" / "run.json"
    meta = json.loads(meta_path.read_text())
    assert meta["versions"]["code"] == here
    meta["versions"]["code"] = "0123456789ab"                       # as if made before an edit
    meta_path.write_text(json.dumps(meta))
    again = _call(tmp_path, "--resume").stdout
    assert "was made by other code (0123456789ab" in again
    assert f"run 1/2 -> {tmp_path / 'run0'}\n" in again              # run again, not kept
    assert f"run 2/2 -> {tmp_path / 'run1'} (kept from an earlier call)" in again
    assert (tmp_path / "run0-code0123456789ab" / "run.json").is_file()
    assert again.rstrip().endswith(f"code: {here} in every run")


def test_faithful_reps_runs_no_run_again_unless_asked():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_repeat
    finally:
        sys.path.remove(str(SCRIPT.parent))
    assert bench_repeat.parse(["demo"]).host_retries == 2
    assert bench_repeat.parse(["demo", "--faithful-reps"]).host_retries == 0
    assert bench_repeat.parse(["demo", "--faithful-reps", "--host-retries", "1"]).host_retries == 1


def test_an_interrupt_while_waiting_for_a_quiet_host_is_one_line(tmp_path):
    import signal
    import time
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "demo", "--runs", "1", "--quiet-s",
                             "60", "-o", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("run 1/1 -> ")  # then the quiet wait (60 s)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1
    assert "interrupted while waiting for a quiet host" in err and "nothing was running" in err
    assert "Traceback" not in err
    assert not (tmp_path / "run0").exists()              # no run was started


def test_each_runs_stalled_tail_is_listed_under_the_verdicts():
    """Under the verdicts: of each run's slowest 1%, how many went through a datapath stall
    (the fidelity record's ``stalled``); runs without one are left out, as is a whole call
    made before the record had it."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_repeat", SCRIPT)
    br = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(br)

    def doc(run, tail, placement="aligned"):
        fid = {"stalled": {"tail": tail, "tail_of": 7}} if tail is not None else {}
        return {"run": run, "placement": placement, "fidelity": fid}
    head = "slowest 1% of transfers through a datapath stall: "
    assert br.stall_tails([[doc("zcube", 6), doc("roft", 1)],
                           [doc("zcube", 3), doc("roft", None)]]) \
        == head + "run0 zcube 6/7, roft 1/7; run1 zcube 3/7"
    assert br.stall_tails([[doc("zcube", 2), doc("zcube", 5, "cross-rail")]]) \
        == head + "run0 zcube/aligned 2/7, zcube/cross-rail 5/7"
    assert br.stall_tails([[doc("zcube", None)]]) is None


def test_verdicts_follow_issue_12s_rule_with_the_earlier_band_rule_beside_them(bench_module,
                                                                                capsys):
    br = bench_module("bench_repeat")
    names = ["zcube", "roft"]

    def row(lo, ratio, hi, metric="FCT p50 ms"):
        p = {"n": 8, "ratio": ratio, "lo": lo, "hi": hi}
        return {"metric": metric, "values": [10.0, 10.0 * ratio], "ci95": [0.1, 0.1],
                "ratios": [1.0, ratio], "paired": [None, p]}
    inside = row(0.928, 0.936, 0.944)          # separated from 1, wholly inside 1 +/- 7.5%
    assert br.verdict(names, inside, 1) == "roft" and br.verdict(names, inside, 1, band=True) \
        == "level"
    edge = row(0.924, 0.931, 0.938)            # separated, reaching past the band's edge
    assert br.verdict(names, edge, 1) == br.verdict(names, edge, 1, band=True) == "roft"
    holds = row(0.97, 1.0, 1.03)
    assert br.verdict(names, holds, 1) == br.verdict(names, holds, 1, band=True) == "level"
    # a try whose median sat on the band's edge: one verdict by issue 12's rule, not the other
    runs = [[{"placement": "aligned", "runs": names, "faithful": [True, True],
              "rows": [dict(r, metric=m) for m in br.METRICS]}] for r in (inside, edge, inside)]
    br.report(runs)
    p50 = next(line for line in capsys.readouterr().out.splitlines() if "FCT p50 ms" in line)
    assert p50.endswith("verdicts roft, roft, roft; same in every run: yes (by the rule "
                        "before: level, roft, level; no)"), p50


def test_control_gives_each_runs_tails_with_the_model_on_the_same_draws():
    got = subprocess.run([sys.executable, str(SCRIPT), "cross-rail-draws", "--backend", "model",
                          "--runs", "2", "--repetitions", "4", "--control", "20"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    tail = got.stdout.split("with the model as a control (16 other draws")[1].splitlines()
    fct = next(line for line in tail if "FCT p99 ms" in line)
    # runs of the model itself: exact, so each run's estimate is the mean of the model's
    # other draws, the same in both
    assert "correlation 1.00, 1.00" in fct and "same in every run: yes" in fct
    first, second = fct.split(": ")[1].split(";")[0].split(", ")
    assert first == second
    bad = subprocess.run([sys.executable, str(SCRIPT), "demo", "--control", "-1"], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--control must be 0 or more" in bad.stderr
