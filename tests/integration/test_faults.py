"""Failures in a running emulation: the controller reroutes, the switches then forward as
the table with failures says, and a restore brings the original back (root, OVS)."""
import pytest

from controller.flows import compile_switch_flows
from topologies import roft, zcube


@pytest.mark.parametrize("fabric, items, moved_hosts", [
    (zcube(4, 4), ["a0-b1"], True),       # a fabric cable: pairs take the other plane
    (zcube(4, 4), ["g5:0"], True),        # a NIC port: g5's pairs use its other port
    (zcube(4, 4), ["a1"], True),          # a whole switch
    (roft(4, 4), ["l0-s1"], False),       # a leaf-spine cable: dropped from select groups
])
def test_fail_reroutes_verifies_and_restore_returns_the_original(emulate, fabric, items,
                                                                 moved_hosts):
    emu = emulate(fabric)
    original = compile_switch_flows(emu.table)
    out = emu.fail(*items)
    assert out["reroute_s"] is not None and 0 <= out["reroute_s"] < 2
    assert 0 < out["since_injection_s"] < 5
    assert out["reroutes"] >= 1 and out["disconnected_pairs"] == 0
    assert (out["hosts_reconfigured"] > 0) == moved_hosts
    assert emu.table.failed and emu.switch_flows != original
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]          # flows read back = the table with failures,
    assert rep["pairs_ok"] == rep["pairs_tested"] == 240      # every pair still answers
    back = emu.restore()
    assert back["reroute_s"] is not None and not emu.failed
    assert emu.switch_flows == original
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]


def test_a_host_cut_off_is_reported_disconnected(emulate):
    emu = emulate(zcube(4, 4))
    out = emu.fail("g3:0", "g3:1")
    assert out["disconnected_pairs"] == 2 * 15          # g3 to and from every other GPU
    assert len(emu.table.disconnected()) == 30


def _one_transfer(fabric, src, dst, size):
    from traffic.models import get_model
    from traffic.placement import Deployment, Instance
    from traffic.types import Request, Transfer
    from traffic.workload import Workload
    req = Request(0, 0.0, 1, 1)
    pd = Deployment([Instance("prefill", 0, (src,))], [Instance("decode", 0, (dst,))], "packed")
    return Workload([req], [], [Transfer(0, src, dst, size, 0.0)], get_model("llama3-70b"), pd,
                    __import__("traffic.types", fromlist=["Scale"]).Scale())


def _carry_with_fault(emu, work, element, at_s, retry_s=30.0):
    import time

    from testbed.emulation.faults import FaultRun, affected
    from testbed.emulation.transfers import run_transfers
    t0 = time.time() + 0.5
    with FaultRun(emu, [{"at_s": at_s, "element": element, "duration_s": None}], t0) as run:
        rows = run_transfers(emu, work, t0=t0, retry_s=retry_s)
    return rows, affected(emu.table, run.records, rows), run.records


def test_a_transfer_moves_off_a_dead_nic_port_and_completes_verified(emulate):
    emu = emulate(zcube(4, 4))
    work = _one_transfer(emu.fabric, "g0", "g5", 8_000_000)    # about 0.7 s at 100 Mb/s
    rows, faults, records = _carry_with_fault(emu, work, "g5:0", 0.2)
    assert rows[0]["verified"] and rows[0]["status"] == "ok", rows[0]
    assert rows[0]["attempts"] >= 2                  # the flow into g5's port 0 started again
    assert [r["action"] for r in records] == ["down", "up"]       # restored at the end
    (f,) = faults
    assert f["transfers_affected"] == 1 and f["transfers_retried"] == 1
    assert f["transfers_lost"] == 0 and f["transfers_cut_off"] == 0
    assert 0 < f["first_byte_after_ms"]["max"] < 5000
    assert not emu.failed


def test_a_transfer_whose_host_is_cut_off_is_failed_never_complete(emulate):
    emu = emulate(roft(4, 4))                         # one NIC port per GPU: nowhere to go
    work = _one_transfer(emu.fabric, "g5", "g1", 8_000_000)
    rows, faults, _ = _carry_with_fault(emu, work, "g5:0", 0.2, retry_s=3.0)
    assert not rows[0]["verified"] and rows[0]["fct_ms"] is None
    assert rows[0]["status"] not in ("ok", "unfinished") and rows[0]["bytes_received"] == 0
    (f,) = faults
    assert f["transfers_cut_off"] == 1 and f["transfers_lost"] == 0
    assert f["disconnected_pairs"] == 30


def test_overlapping_faults_run_as_scheduled_and_everything_comes_back(emulate):
    """A switch, then a NIC port on it (its cable already down), each restored on time:
    every event runs at its time without error, the port's fault waits for no reroute, and
    when the schedule ends the switches forward as before any fault."""
    import time

    from testbed.emulation.faults import FaultRun
    emu = emulate(zcube(4, 4))
    original = compile_switch_flows(emu.table)
    link = next(lk for lk in emu.fabric.links if "b3" in (lk.a, lk.b)
                and (emu.fabric.is_host(lk.a) or emu.fabric.is_host(lk.b)))
    port = f"{link.a}:{link.a_port}" if emu.fabric.is_host(link.a) else f"{link.b}:{link.b_port}"
    # a switch's restore brings eight cables up and may take a second to confirm: the
    # port's restore is due well after it
    schedule = [{"at_s": 0.2, "element": "b3", "duration_s": 1.0},
                {"at_s": 0.5, "element": port, "duration_s": 2.5}]
    t0 = time.time()
    with FaultRun(emu, schedule, t0) as run:
        while len(run.records) < 4 and time.time() < t0 + 20:
            time.sleep(0.1)
        assert not emu.failed, run.records          # both restored by the schedule itself
    records = run.records
    assert [(r["action"], r["element"]) for r in records] == [
        ("down", "b3"), ("down", port), ("up", "b3"), ("up", port)], records
    assert not any(r.get("error") for r in records)
    assert all(r["late_s"] < 0.5 for r in records), records
    assert records[1]["unchanged"] and records[1]["reroutes"] == 0
    assert emu.switch_flows == original
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]
