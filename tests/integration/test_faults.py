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
    emu = emulate(fabric, shared=True)
    original = compile_switch_flows(emu.table)
    bundles = emu.status()["bundles"]
    assert bundles >= len(emu.fabric.switches)    # each switch's install was one bundle
    out = emu.fail(*items)
    assert emu.status()["bundles"] > bundles       # and so is each reroute's, per switch
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
    emu = emulate(zcube(4, 4), shared=True)
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


def _run_with_fault(emu, work, element, at_s, retry_s=30.0):
    import time

    from testbed.core.fault_records import affected
    from testbed.emulation.faults import FaultRun
    from testbed.emulation.transfers import run_transfers
    t0 = time.time() + 0.5
    with FaultRun(emu, [{"at_s": at_s, "element": element, "duration_s": None}], t0) as run:
        rows = run_transfers(emu, work, t0=t0, retry_s=retry_s)
    return rows, affected(emu.table, run.records, rows), run.records


def test_a_transfer_moves_off_a_dead_nic_port_at_once_and_completes_verified(emulate):
    emu = emulate(zcube(4, 4), shared=True)
    work = _one_transfer(emu.fabric, "g0", "g5", 8_000_000)    # about 0.7 s at 100 Mb/s
    rows, faults, records = _run_with_fault(emu, work, "g5:0", 0.2)
    assert rows[0]["verified"] and rows[0]["status"] == "ok", rows[0]
    assert rows[0]["attempts"] >= 2                  # the flow into g5's port 0 started again
    assert rows[0]["moves"] >= 1                     # because g0's agent was told, not TCP
    assert [r["action"] for r in records] == ["down", "up"]       # restored at the end
    assert records[0]["connections_moved"] >= 1
    (f,) = [x for x in faults if x["action"] == "down"]
    assert f["transfers_affected"] == 1 and f["transfers_retried"] == 1
    assert f["transfers_moved_at_once"] == 1
    assert f["transfers_lost"] == 0 and f["transfers_cut_off"] == 0
    # on the other pairing (on a connection of its own, not behind the other half queued
    # there) within a few round trips of the reroute, not after TCP's one-second stall
    assert 0 < f["first_byte_after_ms"]["max"] < 400, f
    assert not emu.failed


def test_a_stalled_connection_nobody_reported_moves_within_its_rto_and_two_rtts(
        emulate, monkeypatch):
    """With the agents not told (a path that dies silently), TCP's user timeout, which the
    pool keeps at the connection's RTO + 2 RTT (about 500 ms here, where its own queue
    stretches the RTT), moves the transfer, before the one second it used to wait."""
    import time

    from testbed.emulation import faults as fault_module
    monkeypatch.setattr(fault_module, "tell_agents",
                        lambda emu: {"moved": 0, "at": time.time()})
    emu = emulate(zcube(4, 4), shared=True)
    work = _one_transfer(emu.fabric, "g0", "g5", 8_000_000)    # about 0.7 s at 100 Mb/s
    rows, faults, _ = _run_with_fault(emu, work, "g5:0", 0.2)
    assert rows[0]["verified"] and rows[0]["attempts"] >= 2 and rows[0]["moves"] == 0, str(rows[0])
    (f,) = [x for x in faults if x["action"] == "down"]
    assert f["transfers_retried"] == 1 and f["transfers_moved_at_once"] == 0
    assert 0 < f["first_byte_after_ms"]["max"] < 900, f


def test_a_transfer_started_while_its_pairing_is_down_uses_another_from_its_first_byte(
        emulate):
    import dataclasses
    emu = emulate(zcube(4, 4), shared=True)
    work = _one_transfer(emu.fabric, "g0", "g5", 2_000_000)
    # planned over both pairings before the fault, ready 0.5 s after it
    work.transfers[0] = dataclasses.replace(work.transfers[0], ready_s=0.6)
    rows, faults, _ = _run_with_fault(emu, work, "g5:0", 0.1)
    (row,) = rows
    assert row["verified"] and row["attempts"] == 1 and row["avoided"], row
    assert row["moves"] == 0
    (f,) = [x for x in faults if x["action"] == "down"]
    assert f["started_during"] == {"transfers": 1, "avoided": 1, "retried": 0, "lost": 0,
                                   "cut_off": 0}


def _port_on(fabric, switch):
    link = next(lk for lk in fabric.links if switch in (lk.a, lk.b)
                and (fabric.is_host(lk.a) or fabric.is_host(lk.b)))
    return f"{link.a}:{link.a_port}" if fabric.is_host(link.a) else f"{link.b}:{link.b_port}"


def _spread_workload(fabric, count=30, size=1_000_000, every_s=0.1):
    """``count`` transfers of ``size`` bytes, one every ``every_s``, between pairs that
    cycle through every host (so each fault below is crossed by some)."""
    from traffic.models import get_model
    from traffic.placement import Deployment, Instance
    from traffic.types import Request, Scale, Transfer
    from traffic.workload import Workload
    hosts = [h.name for h in fabric.hosts]
    pairs = [(hosts[i % len(hosts)], hosts[(5 * i + 3) % len(hosts)]) for i in range(count)]
    pairs = [(s, d) if s != d else (s, hosts[(hosts.index(d) + 1) % len(hosts)])
             for s, d in pairs]
    pd = Deployment([Instance("prefill", 0, (hosts[0],))], [Instance("decode", 0, (hosts[1],))],
                    "packed")
    return Workload([Request(0, 0.0, 1, 1)], [],
                    [Transfer(0, s, d, size, i * every_s) for i, (s, d) in enumerate(pairs)],
                    get_model("llama3-70b"), pd, Scale())


@pytest.mark.parametrize("first, second", [
    ("b3", "port on b3"),                  # a switch, then a NIC port on it (already down)
    ("b3", "a1-b3"),                       # a switch and one of its cables
    ("a1-b3", "a1-b3"),                    # the same cable twice
    ("g5:0", "g5:1"),                      # a NIC port, then the host's other one
])
def test_overlapping_faults_run_as_scheduled_and_everything_comes_back(emulate, first, second):
    """Two overlapping faults while transfers run: every event runs at its time without
    error, a fault on cables already down waits for no reroute, the schedule's own restores
    bring everything back (the switches forward as before any fault), and no transfer is
    lost: one whose host was cut off for a while arrives once it is back."""
    import time

    from testbed.emulation.faults import FaultRun
    from testbed.emulation.transfers import run_transfers
    emu = emulate(zcube(4, 4), shared=True)
    original = compile_switch_flows(emu.table)
    second = _port_on(emu.fabric, "b3") if second == "port on b3" else second
    # a switch's restore brings eight cables up and may take a second to confirm: the
    # second fault's restore is due well after it
    schedule = [{"at_s": 0.2, "element": first, "duration_s": 1.0},
                {"at_s": 0.5, "element": second, "duration_s": 2.5}]
    t0 = time.time() + 0.5
    with FaultRun(emu, schedule, t0) as run:
        rows = run_transfers(emu, _spread_workload(emu.fabric), t0=t0)
        while len(run.records) < 4 and time.time() < t0 + 20:
            time.sleep(0.1)
        assert not emu.failed, run.records          # both restored by the schedule itself
    records = run.records
    assert [(r["action"], r["element"]) for r in records] == [
        ("down", first), ("down", second), ("up", first), ("up", second)], records
    assert not any(r.get("error") for r in records), records
    assert all(r["late_s"] < 0.5 for r in records), records
    if first != "g5:0":                 # the second's cables are down already, or stay down
        assert records[1]["unchanged"] and records[1]["reroutes"] == 0
        assert records[2]["unchanged"] == (first == second)
    assert all(r["verified"] for r in rows), [r for r in rows if not r["verified"]]
    assert emu.switch_flows == original
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]
