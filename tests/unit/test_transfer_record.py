"""One transfer record and one fault record for every backend (no root): the model's, ns-3's
and the emulation's rows are all :class:`TransferRecord` rows made by one factory, whose FCT
is the one :func:`fct_ms`; transfers.csv's columns are the record's fields on every backend;
both backends that carry faults record them as :class:`FaultRecord` rows."""
import csv
import threading
from collections import Counter
from types import SimpleNamespace

import pytest

from controller.routing import RouteTable
from testbed.core import records as records_module
from testbed.core.fault_records import AT_THE_END, FAULT_FIELDS, FaultRecord
from testbed.core.records import ROW_FIELDS, TransferRecord, fct_ms, lateness_ms
from topologies import zcube
from traffic.types import Transfer

T0 = 1_700_000_000.0          # the emulation's workload time 0, as Unix time


def _work(transfers):
    return SimpleNamespace(transfers=transfers, bytes_total=sum(t.bytes for t in transfers),
                           schedule=[], seed=1)


def _transfers():
    return [Transfer(0, "g0", "g3", 168_000, 0.1), Transfer(1, "g1", "g2", 168_000, 0.1),
            Transfer(2, "g2", "g0", 90_000, 0.3, 1)]


def model_rows():
    from testbed.model.simulate import simulate
    return simulate(RouteTable(zcube(2, 2), "zcube"), _work(_transfers()), 100).rows


@pytest.fixture(scope="module")
def ns():
    pytest.importorskip("ns", reason="the ns3 package (make setup installs it)")
    from testbed.ns3.simulate import ns3
    return ns3()


def ns3_rows(transport="pool", faults=None):
    from testbed.ns3.simulate import simulate
    return simulate(RouteTable(zcube(2, 2), "zcube"), _work(_transfers()), 100, None, faults,
                    transport)


def emulation_rows():
    """:func:`testbed.emulation.transfers._rows` of what the agents would record: one
    transfer verified, one started again over another pairing, one never finished and one
    whose receiver found its digest wrong."""
    from testbed.emulation.transfers import _rows
    ts = _transfers() + [Transfer(3, "g3", "g1", 50_000, 0.4)]
    meta = {f"t{i}": (t, 2) for i, t in enumerate(ts)}
    sent, received = [], []
    for i, t in enumerate(ts):
        for k in range(2 if i != 2 else 1):                 # t2: its second flow never sent
            start = T0 + t.ready_s + 0.002
            again = i == 1 and k == 0
            sent.append({"id": f"t{i}", "flow": k, "start": start, "end": start + 0.05,
                         "ok": i != 3, "attempts": 2 if again else 1, "avoided": False,
                         "moves": int(again), "cwnd": 10, "cwnd_end": 20, "pacing_mbps": 50.0})
            for a in (1, 2) if again else (1,):
                received.append({"id": f"t{i}", "flow": k, "attempt": a, "bytes": t.bytes // 2,
                                 "verified": i != 3 and a == (2 if again else 1),
                                 "first_byte": start + 0.001 * a, "end": start + 0.04,
                                 "gap_s": 0.01, "gap_end": start + 0.03,
                                 **({"status": "digest mismatch"} if i == 3 else {})})
    return _rows(meta, sent, received, T0)


def _is_the_record(rows):
    for r in rows:
        assert tuple(r) == ROW_FIELDS, sorted(set(r) ^ set(ROW_FIELDS))
        assert TransferRecord(**r).row() == r


def test_the_fct_is_end_minus_start_and_lateness_start_minus_ready():
    assert fct_ms(1.0, 1.25, True) == 250.0
    assert fct_ms(1.0, 1.25, False) is None and fct_ms(None, 1.25, True) is None
    assert fct_ms(1.0, None, True) is None
    assert lateness_ms(0.5, 0.5025) == 2.5 and lateness_ms(0.5, None) is None


def test_the_models_rows_are_the_record():
    rows = model_rows()
    _is_the_record(rows)
    assert all(r["lateness_ms"] == 0.0 and r["moves"] is None for r in rows)


def test_ns3s_rows_are_the_record(ns):
    for transport in ("pool", "tcp-per-transfer"):
        rows = ns3_rows(transport).rows
        _is_the_record(rows)
        assert all(r["verified"] and r["start_s"] == r["ready_s"] for r in rows)
        assert all(r["fct_ms"] == fct_ms(r["start_s"], r["end_s"], True) for r in rows)


def test_the_emulations_rows_are_the_record_also_once_marked():
    from testbed.emulation.load_monitor import mark_waits, mark_worst
    rows = emulation_rows()
    _is_the_record(rows)
    assert [r["status"] for r in rows] == ["ok", "ok", "unfinished", "digest mismatch"]
    assert [r["attempts"] for r in rows] == [1, 2, 1, 1] and rows[1]["moves"] == 1
    assert rows[0]["lateness_ms"] == pytest.approx(2.0, abs=1e-3)
    assert rows[0]["fct_ms"] == 50.0 and rows[2]["fct_ms"] is rows[3]["fct_ms"] is None
    assert rows[3]["end_s"] is not None         # the emulation keeps when its verdict came
    mark_worst(rows, [(0.0, 1.0, 0.2)], "steal")
    mark_worst(rows, [], "stall_ms")
    mark_waits(rows, [], T0)
    _is_the_record(rows)
    assert rows[0]["steal"] == 0.2


def _completed_spy(monkeypatch):
    """Make every FCT the factory computes -1 (completed) or None, by replacing the one
    function."""
    def spy(start, end, completed):
        return -1.0 if completed else None
    monkeypatch.setattr(records_module, "fct_ms", spy)


def test_every_backends_fct_comes_from_the_one_function(monkeypatch, ns):
    _completed_spy(monkeypatch)
    for rows in (model_rows(), ns3_rows().rows, ns3_rows("tcp-per-transfer").rows,
                 emulation_rows()):
        assert {r["fct_ms"] for r in rows if r["verified"]} == {-1.0}
        assert all(r["fct_ms"] is None for r in rows if not r["verified"])


def test_the_undilation_scales_every_time_of_the_record():
    from testbed.experiment.repetitions import ROW_SPANS_MS, ROW_TIMES
    assert set(ROW_TIMES) == {f for f in ROW_FIELDS if f.endswith("_s")}
    assert set(ROW_SPANS_MS) == {"fct_ms", "lateness_ms"}       # stall/wake: machine's ms


TINY = """\
name: tiny
link_mbps: 100
repetitions: 1
fabrics:
  - {name: zc, builder: zcube, params: {n: 2}, policy: zcube}
deployment: {prefill_tp: 2, decode_tp: 2, placements: [cross-rail]}
workload: {arrivals: poisson, rate: 8, count: 4, input_tokens: 4096}
"""


@pytest.mark.parametrize("backend", ["model", "ns3"])
def test_transfers_csv_has_a_column_per_field_of_the_record(backend, tmp_path):
    if backend == "ns3":
        pytest.importorskip("ns", reason="the ns3 package (make setup installs it)")
    from testbed.cli.main import main
    scen = tmp_path / "s.yaml"
    scen.write_text(TINY)
    assert main(["run", str(scen), "--backend", backend, "-o", str(tmp_path / "o")]) == 0
    with open(tmp_path / "o" / "zc" / "transfers.csv", newline="") as f:
        got = list(csv.DictReader(f))
    assert got and tuple(got[0]) == ROW_FIELDS
    assert all(r["rep"] == "0" and r["hops"] and r["lateness_ms"] for r in got)


def test_the_runs_rows_stay_the_record_with_rep_seed_and_hops():
    from testbed.core.backend import WorkloadResult
    from testbed.experiment.runner import _records, workload_for
    from testbed.experiment.scenario import loads
    from testbed.experiment.scenario.requests import requests_for
    sc = loads(TINY)
    fab = zcube(2, 2)
    work = workload_for(sc, fab, "cross-rail", 7, requests_for(sc, 7)[0])
    result = WorkloadResult(emulation_rows(), [], None)
    rows = _records(RouteTable(fab, "zcube"), [(7, work, result)], 100, None)[0]
    _is_the_record(rows)
    assert {(r["rep"], r["seed"]) for r in rows} == {(0, 7)} and all(r["hops"] for r in rows)


# --- the fault record ---------------------------------------------------------------------
def _fault_keys(rec):
    FaultRecord(**rec)                          # every key a field
    return tuple(rec)


class FakeEmu:
    """fail/restore as the emulation's, ``bad`` raising; something down at the end."""

    def __init__(self, bad):
        from controller.failures import Failures
        self.bad, self.failed = bad, Failures(frozenset({"x"}), frozenset())

    def _out(self):
        import time
        return {"injected_at": time.time(), "since_injection_s": 0.012345, "reroute_s": 0.005,
                "reroutes": 1, "disconnected_pairs": 0, "agents_told_s": 0.003,
                "connections_moved": 2}

    def fail(self, elem):
        from testbed.emulation.faults import FaultError
        if elem == self.bad:
            raise FaultError("no reroute")
        return self._out()

    def restore(self, elem=None):
        return self._out()


def test_both_backends_record_faults_as_the_one_fault_record(ns):
    import time

    from testbed.emulation.faults import FaultRun
    schedule = [{"at_s": 0.02, "element": "b0", "duration_s": 0.03},
                {"at_s": 0.04, "element": "zz9", "duration_s": None},
                {"at_s": 0.05, "element": "g1:0", "duration_s": None}]
    with FaultRun(FakeEmu("zz9"), schedule, time.time()) as run:
        time.sleep(0.2)
    emu = {(r["action"], r["element"]): r for r in run.records}
    sim = {(r["action"], r["element"]): r for r in ns3_rows(faults=schedule).faults}
    assert set(emu) == set(sim) == {("down", "b0"), ("up", "b0"), ("down", "zz9"),
                                     ("down", "g1:0"), ("up", AT_THE_END)}
    for key in emu:
        assert _fault_keys(emu[key]) == _fault_keys(sim[key]), key
    assert _fault_keys(emu[("down", "zz9")]) == FAULT_FIELDS
    assert _fault_keys(emu[("down", "b0")]) == FAULT_FIELDS[:-1]        # no error: no key
    down = emu[("down", "b0")]
    assert down["since_injection_s"] == 0.0123 and down["at_s"] == 0.02
    assert "zz9" in sim[("down", "zz9")]["error"] and emu[("down", "zz9")]["error"]


def test_the_fault_state_is_declared_on_the_emulation():
    """What the fault code keeps on the emulation is the class's own, with its defaults."""
    from testbed.emulation.emulation import Emulation
    from testbed.emulation.faults import tell_agents
    emu = Emulation(zcube(2, 2), policy="zcube")
    assert emu.holds == Counter() and emu.pairings_told == {} and emu.agents == {}
    assert isinstance(emu.fault_lock, type(threading.RLock()))
    assert tell_agents(emu)["moved"] == 0
