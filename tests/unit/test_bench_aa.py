"""benchmarks/bench_aa.py: copies of one fabric compared as two fabrics are (an A/A test)."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks import bench_aa

ROOT = Path(__file__).resolve().parents[2]


def test_the_scenario_carries_copies_of_the_named_fabric_only():
    doc = {"name": "x", "repetitions": 4,
           "fabrics": [{"name": "zcube", "builder": "zcube", "policy": "zcube"},
                       {"name": "roft", "builder": "roft", "repetitions": 2}]}
    aa = bench_aa.aa_doc(doc, "roft", 3)
    assert aa["name"] == "x-aa" and aa["repetitions"] == 4
    assert [f["name"] for f in aa["fabrics"]] == ["roft", "roft-2", "roft-3"]
    assert all(f["builder"] == "roft" and f["repetitions"] == 2 for f in aa["fabrics"])
    assert [f["name"] for f in doc["fabrics"]] == ["zcube", "roft"]      # left as it was
    with pytest.raises(SystemExit, match="no fabric 'spine'.*zcube, roft"):
        bench_aa.aa_doc(doc, "spine", 2)


def _groups(*paired):
    """comparison() groups of one placement: copies a, a-2, ... with these paired FCT p50
    ratios to the first (the other figures without pairs)."""
    rows = [{"metric": m, "paired": [None, *paired] if m == "FCT p50 ms" else []}
            for m in bench_aa.PAIRED]
    return [{"placement": "p", "runs": ["a"] + [f"a-{k + 2}" for k in range(len(paired))],
             "rows": rows}]


def test_the_summary_counts_the_winners_named_between_copies_and_the_largest_difference():
    lines = bench_aa.resolution([
        _groups({"n": 10, "ratio": 0.996, "lo": 0.992, "hi": 0.9995, "margin": 0.01},  # level
                {"n": 10, "ratio": 1.009, "lo": 1.004, "hi": 1.014, "margin": 0.01}),  # crosses
        _groups({"n": 10, "ratio": 1.02, "lo": 1.015, "hi": 1.025, "margin": 0.01})])  # a winner
    said = "\n".join(lines)
    assert "  run 1 a-2/a 0.996 (0.992-1.000) level" in said
    assert "  run 1 a-3/a 1.009 (1.004-1.014) not separated" in said
    assert "  run 2 a-2/a 1.020 (1.015-1.025) a lower" in said
    assert ("a winner named between copies of one fabric in 1 of 3; the largest difference "
            "between copies 2.0%") in said
    assert "FCT p99 ms: no copies paired by seed" in said
    assert said.count("within the margin 1.0%: MISSED") == 1            # FCT p50's winner
    within = "\n".join(bench_aa.resolution([_groups(
        {"n": 10, "ratio": 1.009, "lo": 1.004, "hi": 1.014, "margin": 0.01})]))
    assert "in 0 of 1; the largest difference between copies 0.9%" in within
    assert "within the margin 1.0%: met" in within


def test_copies_on_the_model_are_the_same_fabric_and_name_no_winner(tmp_path):
    """On the model a copy is the same computation: every ratio is 1 and no verdict names a
    winner, so what the emulation shows between copies is the emulation's."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_aa", "--quick", "-o",
                          str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    aa = yaml.safe_load((tmp_path / "aa.yaml").read_text())
    assert [f["name"] for f in aa["fabrics"]] == ["roft", "roft-2"]
    assert "  run 1 roft-2/roft 1.000 (1.000-1.000) level" in out
    assert out.count("a winner named between copies of one fabric in 0 of 1;") == 3
    assert out.count(", the largest difference within the margin 1.0%: met\n") == 3


def test_the_runs_of_a_folder_are_its_run_folders_in_order_without_those_set_aside(tmp_path):
    for name in ("run0", "run2", "run10", "run1-aside1", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
    assert [Path(p).name for p in bench_aa.run_dirs(str(tmp_path))] == ["run0", "run2", "run10"]
    assert bench_aa.run_dirs(str(tmp_path / "run2")) == [str(tmp_path / "run2")]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no run here"):
        bench_aa.run_dirs(str(tmp_path / "empty"))
    got = subprocess.run([sys.executable, "-m", "benchmarks.bench_aa", "--from",
                          str(tmp_path / "none")], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert got.returncode == 2 and "no such folder" in got.stderr
    assert "Traceback" not in got.stderr
