"""benchmarks/bench_wakeups.py: the probe's wake-ups read on loopback, and its options
checked (no root needed: without it the probe stays at normal priority)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_wakeups",
                                              ROOT / "benchmarks" / "bench_wakeups.py")
bw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bw)


def test_the_probe_on_loopback_gives_each_wake_ups_lateness():
    late = bw.wakes(0.8, 5.0, realtime=False)
    assert len(late) >= 20 and all(x >= 0 for x in late)    # about 0.6 s after its start


def test_options_below_zero_are_refused_in_one_line():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_wakeups.py"),
                          "--seconds", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "must be above 0" in out.stderr.strip().splitlines()[-1]
