"""The examples that need no root run as the examples' README says, each in a subprocess
under a time limit, and print what they promise (examples/README.md)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(argv: list, cwd: Path, timeout: float = 120) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def test_every_example_is_in_the_readme():
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    files = [p.name for p in EXAMPLES.iterdir() if p.suffix in (".py", ".yaml")]
    assert len(files) >= 5 and all(f"({f})" in readme for f in files), files


def test_my_policy_is_checked_and_compared(tmp_path):
    out = run([sys.executable, str(EXAMPLES / "my_policy.py")], tmp_path)
    assert "OK: every pair routed" in out
    assert "roft-mine/zcube" in out and "roft/zcube" in out


def test_my_scenario_runs_on_the_model(tmp_path):
    out = run([sys.executable, "-m", "testbed.cli", "run", str(EXAMPLES / "my-scenario.yaml"),
               "--no-report", "-o", str(tmp_path / "out")], tmp_path)
    assert "placement: aligned" in out and "placement: cross-rail" in out
    assert (tmp_path / "out" / "roft-spray-cross-rail" / "summary.json").is_file()


def test_compare_1024_runs_in_under_a_minute(tmp_path):
    out = run([sys.executable, str(EXAMPLES / "compare_1024.py")], tmp_path, timeout=60)
    assert "zcube:" in out and "roft:" in out and "roft/zcube" in out


def test_reroute_on_model(tmp_path):
    out = run([sys.executable, str(EXAMPLES / "reroute_on_model.py")], tmp_path)
    assert out.count("every pair routed on live links") == 2 and "cut off" in out


def test_export_fabric(tmp_path):
    import yaml
    out = run([sys.executable, str(EXAMPLES / "export_fabric.py"), str(tmp_path / "x")],
              tmp_path)
    assert "containerlab deploy" in out
    lab = yaml.safe_load((tmp_path / "x" / "zcube.clab.yml").read_text())
    from testbed import api
    assert len(lab["topology"]["links"]) == len(api.fabric("zcube", n=4, gpus_per_server=4).links)
    assert (tmp_path / "x" / "zcube.simai.txt").read_text().strip()


@pytest.mark.parametrize("name", ["bring_up.py", "fail_switch.py", "test_my_fabric.py"])
def test_root_examples_compile(name):
    compile((EXAMPLES / name).read_text(), name, "exec")
