"""A scenario's faults on the flow-level model (no root): the dead cables' sub-flows stall,
and after the control plane's delay every unfinished one is pinned to its path around the
failures; nothing whose endpoints stay connected is lost, and a cut-off GPU's transfers
wait for its restore (or never complete)."""
from types import SimpleNamespace

from controller.failures import Damage, Failures
from controller.routing import RouteTable
from testbed.core.fault_records import affected
from testbed.core.fault_timeline import CONTROL_S
from testbed.model.simulate import simulate
from topologies import roft, zcube
from traffic.types import Transfer

MBPS = 100


def _work(transfers):
    return SimpleNamespace(transfers=transfers, seed=1)


def _through(table, elem, n, at=0.9, size=2_000_000):
    """``n`` transfers of ``size`` bytes at ``at`` between pairs with a path through
    ``elem``."""
    dmg = Damage(table.fabric, Failures.parse(table.fabric, [elem]))
    pairs = [(s, d) for s, d in table.pairs()
             if any(not dmg.path_ok(p) for p in table.paths(s, d))]
    return [Transfer(i, s, d, size, at) for i, (s, d) in enumerate(pairs[:n])]


def test_no_faults_give_the_same_rows_as_before():
    table = RouteTable(zcube(4, 4), "zcube")
    work = _work(_through(table, "b3", 6))
    assert simulate(table, work, MBPS).rows == simulate(table, work, MBPS, faults=[]).rows


def test_a_dead_zcube_switch_moves_transfers_in_flight_to_the_other_plane():
    table = RouteTable(zcube(4, 4), "zcube")
    work = _work(_through(table, "b3", 6))
    got = simulate(table, work, MBPS, faults=[{"at_s": 1.0, "element": "b3",
                                               "duration_s": 1.0}])
    assert all(r["verified"] and r["bytes_received"] == r["bytes"] for r in got.rows)
    assert all(r["attempts"] == 2 and r["moves"] == 1 for r in got.rows)
    assert [(r["action"], r["t_s"]) for r in got.faults] == [("down", 1.0), ("up", 2.0)]
    assert got.faults[0]["connections_moved"] == 6
    hit = affected(table, got.faults, got.rows)[0]
    assert hit["transfers_affected"] == 6 and hit["transfers_lost"] == 0
    assert abs(hit["first_byte_after_ms"]["max"] - CONTROL_S * 1000) < 1e-6
    # nothing reaches b3 between the reroute and the restore
    late = sum(b for hop, bins in got._bins.items() if "b3" in hop
               for k, b in bins.items() if 1.1 <= k * 0.5 < 2.0)
    assert late == 0


def test_a_dead_spine_stalls_its_flows_until_the_reroute_and_loses_nothing():
    table = RouteTable(roft(4, 4), "ecmp")
    work = _work(_through(table, "s0", 6))
    got = simulate(table, work, MBPS, faults=[{"at_s": 1.0, "element": "s0",
                                               "duration_s": 1.0}])
    assert all(r["verified"] for r in got.rows)
    stalled = [r for r in got.rows if r["gap_s"] is not None]
    assert stalled and all(abs(r["gap_s"] - CONTROL_S) < 1e-9 for r in stalled)
    assert all(abs(r["gap_end_s"] - 1.0 - CONTROL_S) < 1e-9 for r in stalled)
    assert not any(r["moves"] for r in got.rows)               # a Clos loses no pairing
    s0 = [bins for hop, bins in got._bins.items() if "s0" in hop]
    assert sum(b.get(1, 0) for b in s0) > 0 and sum(b.get(3, 0) for b in s0) == 0


def test_a_gpu_cut_off_waits_for_its_port_and_is_lost_if_it_never_returns():
    table = RouteTable(roft(4, 4), "ecmp")                    # one NIC port per GPU
    work = _work([Transfer(0, "g5", "g10", 300_000, 1.2), Transfer(1, "g0", "g4", 300_000, 1.2)])
    back = simulate(table, work, MBPS, faults=[{"at_s": 1.0, "element": "g5:0",
                                                "duration_s": 1.0}])
    assert back.rows[0]["verified"] and back.rows[0]["end_s"] > 2.0
    assert back.rows[1]["verified"] and back.rows[1]["end_s"] < 2.0
    never = simulate(table, work, MBPS, faults=[{"at_s": 1.0, "element": "g5:0",
                                                 "duration_s": None}])
    row = never.rows[0]
    assert not row["verified"] and row["status"] == "incomplete" and row["fct_ms"] is None
    assert never.faults[-1]["element"] == "(all, at the end)"
    assert row["first_byte_s"] is None and row["bytes_received"] == 0
    hit = affected(table, never.faults, never.rows)[0]
    assert hit["started_during"]["cut_off"] == 1 and hit["started_during"]["lost"] == 0


def test_a_dead_rail_leaf_on_roft_with_nvlink_loses_nothing():
    fab = roft(4, 4, nvlink_gbps=True)
    for policy in ("ecmp", "pxn"):
        table = RouteTable(fab, policy)
        work = _work(_through(table, "l1", 12))
        got = simulate(table, work, MBPS, faults=[{"at_s": 1.0, "element": "l1",
                                                   "duration_s": 1.0}])
        assert all(r["verified"] for r in got.rows), policy
        assert affected(table, got.faults, got.rows)[0]["transfers_lost"] == 0
