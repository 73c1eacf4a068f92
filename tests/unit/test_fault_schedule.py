"""A fault schedule runs as written (issue 14), without root: an event that cannot be carried
out is recorded and said and holds up nothing after it; a fault on cables already down
waits for no reroute; a run whose schedule missed an event says so in its exit status."""
import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest

import testbed.emulation.faults as faults
from controller.failures import Failures
from controller.routing import RouteTable
from testbed.core.fault_records import affected
from topologies import zcube


def fault_state() -> dict:
    """What the fault code keeps on an :class:`~testbed.emulation.emulation.Emulation`, as it
    starts (no agents, nothing failed)."""
    return {"holds": Counter(), "pairings_told": {}, "agents": {},
            "fault_lock": threading.RLock()}


class FakeEmu:
    """fail/restore as the emulation's, one element raising; the times each event ran."""

    def __init__(self, bad="g7:1"):
        self.failed = Failures()
        self.ran, self.bad = [], bad

    def _out(self):
        now = time.time()
        return {"injected_at": now, "since_injection_s": 0.01, "reroute_s": 0.005,
                "reroutes": 1, "disconnected_pairs": 0}

    def fail(self, elem):
        self.ran.append(("down", elem, time.time()))
        if elem == self.bad:
            raise faults.FaultError("the controller did not reroute within 15 s")
        return self._out()

    def restore(self, elem=None):
        self.ran.append(("up", elem, time.time()))
        return self._out()


def test_an_event_that_fails_is_recorded_and_said_and_the_later_ones_run_on_time():
    emu, said = FakeEmu(), []
    schedule = [{"at_s": 0.05, "element": "b3", "duration_s": 0.2},
                {"at_s": 0.10, "element": "g7:1", "duration_s": None},
                {"at_s": 0.15, "element": "a2:5-b0:7", "duration_s": 0.05}]
    t0 = time.time()
    with faults.FaultRun(emu, schedule, t0, said.append) as run:
        time.sleep(0.4)
    done = [(a, e) for a, e, _ in emu.ran]
    assert done[:5] == [("down", "b3"), ("down", "g7:1"), ("down", "a2:5-b0:7"),
                        ("up", "a2:5-b0:7"), ("up", "b3")]
    for (_, _, at), due in zip(emu.ran, (0.05, 0.10, 0.15, 0.20, 0.25)):
        assert at - t0 == pytest.approx(due, abs=0.04)
    bad = [r for r in run.records if r.get("error")]
    assert len(bad) == 1 and bad[0]["element"] == "g7:1" and bad[0]["at_s"] == 0.10
    assert any("g7:1 down due at 0.10 s FAILED" in s for s in said)
    assert all(r["late_s"] < 0.04 for r in run.records if "late_s" in r)


def test_failed_events_stay_in_the_per_fault_rows_with_nothing_counted():
    table = RouteTable(zcube(4, 4), "zcube")
    records = [{"t_s": 1.0, "action": "down", "element": "g7:1", "at_s": 1.0, "late_s": 0.0,
                "error": "FaultError: no reroute"},
               {"t_s": 2.0, "action": "up", "element": "b3", "at_s": 2.0, "late_s": 0.0,
                "error": "FaultError: no reroute"}]
    rows = affected(table, records, [])
    assert [r["element"] for r in rows] == ["g7:1", "b3"]
    assert all(r["transfers_affected"] is None and r["transfers_lost"] == 0 for r in rows)


def test_a_fault_on_cables_already_down_waits_for_no_reroute(monkeypatch):
    """A NIC port on a failed switch: its cable is down already, so no port moves, the
    controller has nothing to reroute, and the event returns at once, recorded."""
    fab = zcube(4, 4)
    port = next(f"{lk.b}:{lk.b_port}" if fab.is_host(lk.b) else f"{lk.a}:{lk.a_port}"
                for lk in fab.links if "b3" in (lk.a, lk.b)
                and (fab.is_host(lk.a) or fab.is_host(lk.b)))
    calls = {"status": 0, "links": 0}
    emu = SimpleNamespace(fabric=fab, failed=Failures.parse(fab, ["b3"]), table=None,
                          **fault_state())

    def status():
        calls["status"] += 1
        return {"reroutes": 0, "pending_events": 0}
    emu.status = status
    emu.use_failures = lambda failed: setattr(emu, "failed", failed)
    monkeypatch.setattr(faults, "_set_links",
                        lambda *a: calls.__setitem__("links", calls["links"] + 1) or {})
    monkeypatch.setattr(faults, "_apply_hosts", lambda *a: 0)
    t0 = time.time()
    out = faults.fail(emu, [port], timeout_s=5.0)
    assert time.time() - t0 < 1.0
    assert out["unchanged"] and out["reroutes"] == 0 and out["cables"] == 0
    assert calls == {"status": 0, "links": 0}
    assert emu.failed == Failures.parse(fab, ["b3", port])


def test_a_run_whose_schedule_missed_an_event_exits_failed(monkeypatch, tmp_path):
    from testbed.experiment import pipeline
    summary = {"transfers_verified": 4, "transfers_total": 4,
               "faults": [{"error": "FaultError: x"}], "faults_not_run": 1}
    monkeypatch.setattr("testbed.experiment.runner.run_scenario",
                        lambda *a, **k: {"zcube": summary})
    said = []
    monkeypatch.setattr(pipeline, "log", said.append)
    sc = SimpleNamespace(backend="model", fabrics=[])
    code, got = pipeline.run_and_check(sc, str(tmp_path / "out"))
    assert code == pipeline.EXIT_FAILED and got == {"zcube": summary}
    assert any("did not run as written" in s and "zcube: 1 event(s)" in s for s in said)


def test_an_element_failed_twice_stays_down_until_both_faults_are_restored(monkeypatch):
    """The same cable twice, and a switch with one of its own cables: a restore brings back
    only the cables no other fault still holds, and the last restore brings back the rest."""
    fab = zcube(4, 4)
    moved = []
    emu = SimpleNamespace(fabric=fab, failed=Failures(), table=None, **fault_state())
    reroutes = iter(range(1, 1000))
    emu.status = lambda: {"reroutes": next(reroutes), "pending_events": 0,
                          "last_reroute": {"installed": time.time()}}
    emu.use_failures = lambda failed: setattr(emu, "failed", failed)
    monkeypatch.setattr(faults, "_set_links",
                        lambda _e, cables, up: moved.append((len(cables), up)) or {})
    monkeypatch.setattr(faults, "_apply_hosts", lambda *a: 0)
    cable = Failures.parse(fab, ["a1-b3"])
    faults.fail(emu, ["a1-b3"])
    assert faults.fail(emu, ["b3-a1"])["unchanged"]           # the same cable, named the other way
    assert faults.restore(emu, ["a1-b3"])["unchanged"] and emu.failed == cable
    faults.restore(emu, ["a1-b3"])
    assert not emu.failed and moved == [(1, False), (1, True)]
    moved.clear()
    faults.fail(emu, ["b3"])
    faults.fail(emu, ["a1-b3"])
    faults.restore(emu, ["b3"])
    assert emu.failed == cable and moved == [(8, False), (7, True)]
    faults.restore(emu, ["a1-b3"])
    assert not emu.failed and moved[-1] == (1, True)
