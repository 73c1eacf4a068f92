"""The examples that need root run as examples/README.md says and print what they promise
(root, Open vSwitch); each brings a fabric up, so they run one at a time."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(name: str, tmp_path) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def test_bring_up_sends_one_verified_transfer(ovs, tmp_path):
    out = run("bring_up.py", tmp_path)
    assert "up and verified" in out and "verified True, over 2 pairings" in out
    assert out.rstrip().endswith("torn down")


def test_fail_switch_reroutes_the_transfer_and_verifies_the_reroute(ovs, tmp_path):
    out = run("fail_switch.py", tmp_path)
    assert "transfer during the failure: verified True" in out
    assert "reroute verified on the switches: True" in out
    assert "restored:" in out
