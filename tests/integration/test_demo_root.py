"""``zcube demo``, what ``make demo`` runs, on the emulation (root, OVS): the teaching demo's
story end to end, its files, and a console short enough to read."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_teaching_demo_on_the_emulation(ovs, tmp_path):
    got = subprocess.run([sys.executable, "-m", "testbed.cli", "demo", "-o", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    out = got.stdout
    assert got.returncode == 0, (out + got.stderr)[-3000:]
    assert len(out.splitlines()) <= 60, out
    assert "[zcube]" not in out + got.stderr           # progress goes to demo.log
    at = [out.index(f"\n{k}. ") for k in range(1, 6)]
    assert at == sorted(at), out
    crossed = out[at[1]:at[2]]
    # both emulated cases say whether their runs were faithful; the crossed ECMP rows are
    # read with the model's draws as a control
    assert out.count("transfers verified, ") == 2, out
    for figure in ("FCT p50 ", "FCT P99 ", "TTFT P99"):
        assert f"  {figure} ROFT-ECMP / ZCube " in crossed, out
    assert "model as control" in crossed, out
    for case in ("cross-rail", "demo"):
        for run in ("zcube", "roft"):
            s = json.loads((tmp_path / case / run / "summary.json").read_text())
            assert s["backend"] == "emulation" and s["repetitions"] == 3
            assert s["transfers_verified"] == s["transfers_total"]
            assert "faithful" in s["fidelity"]
        assert (tmp_path / case / "report.html").is_file()
    log = (tmp_path / "demo.log").read_text()
    assert "fidelity:" in log and "tearing down" in log
