"""Run records, process identity by start time, the machine lock (no root needed)."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from testbed.emulation import machine_state
from testbed.emulation.machine_state import (
    Lock,
    RunRecord,
    alive,
    end_process,
    proc_start_time,
    runs,
)


@pytest.fixture(autouse=True)
def state_root(tmp_path, monkeypatch):
    monkeypatch.setenv("ZCUBE_STATE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def sleeper():
    procs = []

    def start():
        p = subprocess.Popen(["sleep", "30"])
        procs.append(p)
        deadline = time.time() + 5
        while proc_start_time(p.pid) is None and time.time() < deadline:
            time.sleep(0.01)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


# -- records ------------------------------------------------------------------------------------

def test_state_dir_follows_the_environment(state_root):
    assert machine_state.state_dir() == str(state_root)


def test_run_record_lives_under_the_state_dir(state_root):
    rec = RunRecord("r1")
    assert rec.dir == os.path.join(str(state_root), "runs", "r1")
    assert os.path.isdir(rec.dir)


def test_run_record_appends_and_reads_pids_bridges_links():
    rec = RunRecord("r1")
    rec.add_pid(os.getpid(), "test runner")
    rec.add_bridges(["zca0", "zcb0"])
    rec.add_bridges(["zca1"])
    rec.add_links(["zca0-p5"])
    rec.add_netns(["zcg0"])
    assert rec.read("pids") == [{"pid": os.getpid(), "start": proc_start_time(os.getpid()),
                                 "what": "test runner"}]
    assert rec.read("bridges") == ["zca0", "zcb0", "zca1"]
    assert rec.read("links") == ["zca0-p5"]
    assert rec.read("netns") == ["zcg0"]
    assert rec.read("nothing-recorded") == []
    again = RunRecord("r1")                    # a later process reads the same files
    assert again.read("bridges") == ["zca0", "zcb0", "zca1"]


def test_run_record_json_round_trip_and_default():
    rec = RunRecord("r1")
    rec.write_json("ovs.json", {"OVS_RUNDIR": "/tmp/x", "n": [1, 2]})
    assert rec.read_json("ovs.json") == {"OVS_RUNDIR": "/tmp/x", "n": [1, 2]}
    rec.write_json("ovs.json", {"replaced": True})
    assert rec.read_json("ovs.json") == {"replaced": True}
    assert rec.read_json("missing.json", default={"d": 1}) == {"d": 1}
    with open(rec.path("broken.json"), "w") as f:
        f.write("{not json")
    assert rec.read_json("broken.json", default="fallback") == "fallback"


def test_runs_lists_every_record_in_order(state_root):
    assert runs() == []
    for rid in ("20240102-000000-2", "20240101-000000-1"):
        RunRecord(rid).add_bridges([f"zc{rid[-1]}"])
    found = runs()
    assert [r.id for r in found] == ["20240101-000000-1", "20240102-000000-2"]
    assert found[0].read("bridges") == ["zc1"]
    assert [r.id for r in runs(str(state_root))] == [r.id for r in found]


# -- process identity ---------------------------------------------------------------------------

def test_proc_start_time_of_this_process_is_a_number_string():
    t = proc_start_time(os.getpid())
    assert isinstance(t, str) and t.isdigit()
    assert proc_start_time(os.getpid()) == t
    assert alive(os.getpid(), t)


def test_proc_start_time_of_a_missing_process_is_none():
    p = subprocess.Popen(["true"])
    p.wait()
    assert proc_start_time(p.pid) is None                    # exited and reaped
    assert proc_start_time(2 ** 22 + 12345) is None          # above pid_max's ceiling
    assert not alive(2 ** 22 + 12345, "1")


def test_alive_is_false_for_a_wrong_or_missing_start_time():
    t = proc_start_time(os.getpid())
    assert not alive(os.getpid(), str(int(t) + 1))
    assert not alive(os.getpid(), None)


def test_a_zombie_has_no_start_time(sleeper):
    p = sleeper()
    os.kill(p.pid, 9)
    deadline = time.time() + 5
    while proc_start_time(p.pid) is not None and time.time() < deadline:
        time.sleep(0.01)
    assert proc_start_time(p.pid) is None                    # dead but not reaped yet
    assert p.poll() is not None


# -- lock ---------------------------------------------------------------------------------------

def test_lock_is_exclusive_until_released(state_root):
    first, second = Lock(), Lock()
    assert first.path == os.path.join(str(state_root), "lock")
    assert first.acquire()
    try:
        assert not second.acquire()        # a separate open file description: refused
        assert second.fd is None
        assert first.holder() == str(os.getpid())
        assert second.holder() == str(os.getpid())
    finally:
        first.release()
    assert first.fd is None
    assert second.acquire()
    second.release()


def test_lock_holder_is_unknown_without_a_lock_file(tmp_path):
    assert Lock(str(tmp_path / "fresh")).holder() == "?"


# -- ending processes ---------------------------------------------------------------------------

def test_end_process_ends_the_recorded_process(sleeper):
    p = sleeper()
    start = proc_start_time(p.pid)
    assert start is not None
    t0 = time.time()
    assert end_process(p.pid, start, grace=3.0) is True
    assert p.wait(timeout=5) is not None
    assert time.time() - t0 < 3.0          # SIGTERM sufficed; no wait for the grace period


def test_end_process_of_a_dead_process_is_false(sleeper):
    p = sleeper()
    start = proc_start_time(p.pid)
    p.kill()
    p.wait()
    assert end_process(p.pid, start) is False


def test_end_process_refuses_a_process_with_another_start_time(sleeper):
    p = sleeper()
    start = proc_start_time(p.pid)
    assert end_process(p.pid, str(int(start) + 1), grace=0.2) is False
    assert end_process(p.pid, None, grace=0.2) is False
    time.sleep(0.1)
    assert p.poll() is None                # untouched
    assert alive(p.pid, start)


def test_run_record_pid_entry_ends_only_its_own_process(sleeper):
    """What clean_run does with the pids file: the recorded start time identifies it."""
    rec = RunRecord("r1")
    p = sleeper()
    rec.add_pid(p.pid, "sleeper")
    (entry,) = rec.read("pids")
    assert entry["start"] == proc_start_time(p.pid)
    assert end_process(entry["pid"], entry["start"]) is True
    p.wait(timeout=5)
    assert end_process(entry["pid"], entry["start"]) is False
