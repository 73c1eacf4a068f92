"""The machine's timers beside the datapath probe (its wake-ups' lateness): the probe's
output, the record, transfers.csv and the report (no root).  Carrying again stopped once late
again is tested with the other carrying rules (test_fidelity.py, test_order.py)."""
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from testbed.core import fidelity
from testbed.emulation.stall_monitor import DatapathProbe

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"datapath": {"p50": 0.2, "p99": 0.5, "max": 0.6}, "machine_idle": {"mean": 0.5,
                                                                           "min": 0.3},
        "window_s": 0.1, "isolated": {"p50": 1.02, "p99": 1.1, "n": 10, "kinds": []}}


def rows(late_ms):
    return [{"ready_s": 1.0, "start_s": 1.0 + x / 1000} for x in late_ms]


def test_the_probe_writes_each_timed_wake_up_and_how_late_it_came():
    """On loopback (``--loopback``), stopped by SIGTERM as the testbed stops it."""
    probe = subprocess.Popen([sys.executable, "-u", "-m", "traffic.delay_probe", "--loopback"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    first = probe.stdout.readline()      # written from the loop: SIGTERM is handled by then
    time.sleep(0.3)
    probe.terminate()
    out = SimpleNamespace(stdout=first + probe.stdout.read())    # its buffer, then the pipe
    assert probe.wait(timeout=30) == 0, probe.stderr.read()
    lines = [line.split() for line in out.stdout.splitlines()]
    sent = {int(q) for k, q, _ in lines if k == "t"}
    wakes = [(float(t), float(late)) for k, t, late in lines if k == "w"]
    assert sent == {int(q) for k, q, _ in lines if k == "r"} and len(sent) >= 10
    assert 10 <= len(wakes) < len(sent) + 1            # one per sleep, none after the last
    assert all(late >= 0 for _, late in wakes)         # never before its planned time
    assert [t for t, _ in wakes] == sorted(t for t, _ in wakes)


def test_the_probes_output_is_read_back_by_kind():
    probe = DatapathProbe(None)
    probe.out.write("t 0 10.000000\nw 10.005100 0.1000\nr 0 10.000300\nt 1 10.005200\n"
                    "w 10.010900 0.9000\n")
    assert probe.records() == [(10.0, 10.0003), (10.0052, None)]
    assert probe.wakes() == [(10.0051, 0.1), (10.0109, 0.9)]


def test_the_record_pools_the_wake_ups_and_says_them_without_judging():
    one, _ = fidelity.probe_figures([(1.0, 1.0003)], 1.0, 0.01, [(1.0, 0.05), (1.1, 0.07)])
    two, _ = fidelity.probe_figures([(2.0, 2.0004)], 1.0, 0.01, [(2.0, 3.5)])
    assert one["wakes_ms"] == [0.05, 0.07]
    assert "wakes_ms" not in fidelity.probe_figures([(1.0, 1.0003)], 1.0)[0]   # none given
    rec = fidelity.record(rows([0.1]), [dict(GOOD, probe=one), dict(GOOD, probe=two)])
    assert rec["faithful"]                                   # recorded, not judged
    pr = rec["probe"]
    assert (pr["wakes"], pr["wake_p50_ms"], pr["wake_max_ms"]) == (3, 0.07, 3.5)
    assert "its timer's wake-ups p99 3.431 ms late" in fidelity.one_line(rec)
    older = fidelity.record(rows([0.1]), [dict(GOOD, probe=dict(one, wakes_ms=[]))])
    assert "wakes" not in older["probe"] and "wake-ups" not in fidelity.one_line(older)


def test_a_repetition_held_back_for_late_starts_says_how_late_the_machines_timers_woke():
    probe, _ = fidelity.probe_figures([(1.0, 1.0003)], 1.0, 0.01, [(1.0, 0.04)] * 9)
    why = fidelity.held_back(rows([0.1, 9.0]), dict(GOOD, probe=probe))
    assert why["cause"] == "late" and why["wake_p99_ms"] == 0.04
    assert "the probe's timer woke p99 0.04 ms late" in fidelity.held_back_text(why)
    bare = fidelity.held_back(rows([0.1, 9.0]), GOOD)
    assert "wake_p99_ms" not in bare and "probe's timer" not in fidelity.held_back_text(bare)


def test_the_reports_fidelity_table_gives_the_wake_ups_and_the_repetitions_kept():
    from testbed.analysis.report import _fidelity_rows
    probe, _ = fidelity.probe_figures([(1.0, 1.0003)], 1.0, 0.01, [(1.0, 0.25)])
    rec = dict(fidelity.record(rows([0.1]), [dict(GOOD, probe=probe)]), set_aside=[{"rep": 0}],
               not_run_again=[{"rep": 0}, {"rep": 1}])
    [row] = _fidelity_rows({"zc": {"fidelity": rec}})
    assert row[-3:-1] == ["0.250", "1 (2 late again, kept)"]
    [row] = _fidelity_rows({"zc": {"fidelity": fidelity.record(rows([0.1]), [GOOD])}})
    assert row[-3:-1] == ["-", 0]                       # records from before the keys


def test_each_transfer_carries_how_late_the_probes_timer_woke_while_it_waited_to_start():
    from testbed.emulation.load_monitor import mark_waits
    wakes = [(10.005, 0.05), (10.0151, 4.0), (10.020, 0.1)]   # overdue 10.0111-10.0151
    rows = [{"ready_s": 0.0, "start_s": 0.0001},           # on time, no wake-up overdue then
            {"ready_s": 0.010, "start_s": 0.0152},         # waited through the late wake-up
            {"ready_s": 0.0199, "start_s": 0.0201},        # through the on-time one
            {"ready_s": 0.016, "start_s": None}]           # never started
    mark_waits(rows, wakes, 10.0)
    assert [r["wake_ms"] for r in rows] == [0.0, 4.0, 0.1, None]


def test_each_isolated_transfer_carries_the_probes_worst_delay_and_wake_up_in_flight():
    from testbed.emulation.isolated import mark_isolated
    iso = {"p50": 1.0, "p99": 1.3, "kinds": [
        {"fct_over_ideal": [1.0, 1.3], "at": [[100.0, 100.02], [101.0, 101.03]]},
        {"fct_over_ideal": [1.01], "at": [[102.0, 102.02]]}]}
    records = [(100.005, 100.0053),                   # during the first: 0.3 ms
               (101.010, 101.0145),                   # during the second: a 4.5 ms stall
               (101.015, None),                       # lost: no delay to give
               (101.5, 101.6),                        # a stall between transfers
               (102.025, 102.0252)]                   # sent after the third ended
    wakes = [(100.01, 0.05), (101.02, 1.5), (102.0005, 0.6), (103.0, 9.0)]
    got = mark_isolated(iso, records, wakes)
    assert got is iso
    assert [k["probe_ms"] for k in iso["kinds"]] == [[0.3, 4.5], [0.0]]
    assert [k["wake_ms"] for k in iso["kinds"]] == [[0.05, 1.5], [0.6]]   # overdue into it
    assert (iso["stalled"], iso["probe_max_ms"], iso["wake_max_ms"]) == (1, 4.5, 1.5)
    assert iso["p99"] == 1.3                                       # measured, not changed
    said = fidelity.one_line(fidelity.record(rows([0.1]), [dict(GOOD, isolated=iso)]))
    assert "p99 1.3 (1 through a datapath stall)" in said
    assert "through a datapath stall" not in fidelity.one_line(fidelity.record(
        rows([0.1]), [GOOD]))                                      # none, or not measured
    bare = mark_isolated({"kinds": [{"fct_over_ideal": [], "at": []}], "p50": None}, [], [])
    assert (bare["stalled"], bare["probe_max_ms"]) == (0, 0.0)      # nothing carried


def test_the_probes_command_line_takes_namespaces_or_loopback_alone():
    for argv in (["a", "b"], ["--loopback", "a", "b", "10.0.0.1"], [],
                 ["--loopback", "--every-ms", "0"]):
        out = subprocess.run([sys.executable, "-m", "traffic.delay_probe", *argv], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        last = out.stderr.strip().splitlines()[-1]
        assert last.startswith("python -m traffic.delay_probe: error")


class _Ovs:
    def __init__(self):
        self.calls = []

    def vsctl(self, *args, check=True):
        self.calls.append(("vsctl",) + args)
        return "1\n"

    def ofctl(self, *args):
        self.calls.append(("ofctl",) + args)


def _probe_emu():
    record = type("R", (), {"add_bridges": lambda *a: None, "add_netns": lambda *a: None,
                            "add_links": lambda *a: None})()
    return type("E", (), {"ovs": _Ovs(), "record": record, "datapath": "user"})()


def test_a_kept_probe_path_is_built_once_and_removed_when_closed(monkeypatch):
    from testbed.emulation import stall_monitor
    monkeypatch.setattr(stall_monitor, "_ip", lambda *a: None)
    monkeypatch.setattr(stall_monitor.subprocess, "run", lambda *a, **k: None)
    emu = _probe_emu()
    path = stall_monitor.ProbePath(emu)

    def built():
        return sum(1 for c in emu.ovs.calls if c[:2] == ("vsctl", "--may-exist"))

    def removed():
        return sum(1 for c in emu.ovs.calls if c[:2] == ("vsctl", "--if-exists"))
    for _ in range(3):                      # three repetitions' probes on the session's path
        path.ensure()
        DatapathProbe(emu, path=path)._teardown()
    assert (built(), removed(), path.built) == (1, 1, True)   # a leftover's removal first
    path.close()
    path.close()
    assert (removed(), path.built) == (2, False)
    own = DatapathProbe(emu)                 # a probe without a kept path removes its own
    own.path.ensure()
    own._teardown()
    assert (built(), removed(), own.path.built) == (2, 4, False)
