"""benchmarks/: every benchmark says its target, imports as a package (no path edits), has a
quick size that ``make bench`` runs, and bounds each step that could hang; the stock-Mininet
baseline waits for its switches by their flow tables (no root needed for any of this)."""
import importlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import __main__ as runner
from benchmarks.common import StepTimeout, limit, target

ROOT = Path(__file__).resolve().parents[2]


def test_make_bench_runs_every_benchmark_in_the_folder():
    assert sorted(runner.NAMES) == sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))
    assert "python -m benchmarks" in (ROOT / "Makefile").read_text()


@pytest.mark.parametrize("name", runner.NAMES)
def test_each_benchmark_says_its_target_and_has_a_quick_size(name, capsys):
    assert "sys.path" not in (ROOT / "benchmarks" / f"{name}.py").read_text()
    mod = importlib.import_module(f"benchmarks.{name}")
    assert "target" in mod.__doc__.lower() and "--quick" in mod.__doc__, name
    with pytest.raises(SystemExit) as end:
        mod.main(["--help"])
    assert end.value.code == 0 and "--quick" in capsys.readouterr().out


def _timer_left() -> float:
    return signal.getitimer(signal.ITIMER_REAL)[0]


def test_a_step_past_its_limit_stops_in_one_line_and_gives_back_the_timer_it_found():
    before, t0 = _timer_left(), time.monotonic()      # pytest-timeout's, where it runs
    with pytest.raises(StepTimeout, match=r"^\S+: waiting for nothing: not done within 0.2 s$"):
        with limit(0.2, "waiting for nothing"):
            time.sleep(5)
    assert time.monotonic() - t0 < 2
    with limit(5, "quick"):
        pass
    left = before - (time.monotonic() - t0) if before else 0.0
    assert _timer_left() == pytest.approx(left, abs=0.5)


def test_an_enclosing_limit_that_ends_sooner_holds_and_keeps_what_is_left_of_its_time():
    with pytest.raises(StepTimeout, match="outer"):
        with limit(0.3, "outer"):
            with limit(10, "inner"):
                time.sleep(5)
    with limit(10, "outer"):
        with pytest.raises(StepTimeout, match="inner"):
            with limit(0.2, "inner"):
                time.sleep(5)
        assert 8 < _timer_left() <= 10


def test_targets_are_said_in_the_words_the_runner_counts():
    assert target(True, "under 2 s") == "target under 2 s: met"
    assert target(False, "under 2 s") == "target under 2 s: MISSED"
    assert target(None, "under 2 s") == "target under 2 s: -"


def test_the_runner_passes_a_benchmark_through_and_counts_its_targets(capsys):
    assert runner.main(["bench_fabric"]) == 0
    out = capsys.readouterr().out
    assert "zcube n=128 (16,384 GPUs, 256 switches)" in out
    assert next(line for line in out.splitlines() if line.startswith("bench_fabric ")) \
        .split()[2:] == ["2", "of", "2", "ok"]


def test_the_runner_skips_what_cannot_run_here_with_a_line_saying_why(monkeypatch, capsys):
    monkeypatch.setattr(runner.os, "geteuid", lambda: 1000)
    assert runner.main(["bench_web"]) == 0
    assert "skipped: needs root" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        runner.main(["bench_nothing"])


def test_an_emulation_benchmark_without_root_is_refused_in_one_line():
    got = subprocess.run([sys.executable, "-c", "import os; os.geteuid = lambda: 1000\n"
                          "from benchmarks import bench_agents; bench_agents.main([])"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert got.returncode == 2 and "needs root" in got.stderr
    assert "Traceback" not in got.stderr and len(got.stderr.strip().splitlines()) == 1


class _Ovs:
    """ovs-ofctl dump-flows as simple_switch_13 leaves a switch: its table-miss flow once
    the switch has connected (here after ``after`` reads)."""

    def __init__(self, after: int):
        self.reads, self.after = 0, after

    def ofctl(self, *args, check=True):
        self.reads += 1
        return (" cookie=0x0, table=0, priority=0 actions=CONTROLLER:65535\n"
                if self.reads > self.after else "")


class _Controller:
    def __init__(self, status=None):
        self.returncode = status

    def poll(self):
        return self.returncode


def test_stock_mininet_switches_count_as_connected_once_they_hold_the_table_miss_flow(capsys):
    from benchmarks.bench_emulation import wait_table_miss
    ovs = _Ovs(after=4)
    wait_table_miss(ovs, ["s1", "s2"], _Controller())
    assert ovs.reads >= 5
    with pytest.raises(StepTimeout, match="table-miss"), limit(0.5, "table-miss"):
        wait_table_miss(_Ovs(after=10**9), ["s1"], _Controller())
    with pytest.raises(SystemExit):
        wait_table_miss(_Ovs(after=10**9), ["s1"], _Controller(status=1))
    assert "simple_switch_13 exited (status 1)" in capsys.readouterr().err


def test_a_benchmark_past_its_limit_is_stopped_and_said_to_have_run_out_of_time(capsys):
    slow = [sys.executable, "-c", "import time\nprint('x 1.0 s; target under 2 s: met')\n"
            "time.sleep(60)"]
    t0 = time.monotonic()
    got = runner.run_one("slow", slow, 1.5)
    assert time.monotonic() - t0 < 20
    assert got["outcome"] == "TIMED OUT after 1.5 s" and (got["met"], got["missed"]) == (1, 0)
    assert "target under 2 s: met" in capsys.readouterr().out
