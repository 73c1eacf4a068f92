"""A scenario's faults on the ns-3 backend (no root): the schedule runs as written, the
routes and the transfers in flight move off what died, and nothing is lost."""
import json
from types import SimpleNamespace

import pytest

from controller.failures import Damage, Failures
from controller.routing import RouteTable
from testbed.core.fault_records import affected
from testbed.ns3.faults import CONTROL_S, Timeline
from testbed.ns3.routes import plan
from topologies import roft, zcube
from traffic.types import Transfer


def _work(transfers):
    return SimpleNamespace(transfers=transfers, bytes_total=sum(t.bytes for t in transfers),
                           schedule=[], seed=1)


def _through(table, elem, n):
    """``n`` transfers of 2 MB at 0.9 s between pairs with a path through ``elem``."""
    dmg = Damage(table.fabric, Failures.parse(table.fabric, [elem]))
    pairs = [(s, d) for s, d in table.pairs()
             if any(not dmg.path_ok(p) for p in table.paths(s, d))]
    return [Transfer(i, s, d, 2_000_000, 0.9) for i, (s, d) in enumerate(pairs[:n])]


def test_overlapping_faults_hold_their_cables_until_the_last_is_restored():
    fab = zcube(4, 4)
    cable = next(c for c in fab.links if "b3" in (c.a, c.b) and fab.is_switch(c.a)
                 and fab.is_switch(c.b))
    name = f"{cable.a}:{cable.a_port}-{cable.b}:{cable.b_port}"
    tl = Timeline(RouteTable(fab, "zcube"), [
        {"at_s": 1.0, "element": "b3", "duration_s": 2.0},
        {"at_s": 1.5, "element": name, "duration_s": 2.0},
        {"at_s": 1.6, "element": "zz9", "duration_s": 1.0},
        {"at_s": 2.0, "element": name, "duration_s": None}], plan)
    assert [(t, a, e) for t, _, a, e in tl.events] == [
        (1.0, "down", "b3"), (1.5, "down", name), (1.6, "down", "zz9"), (2.0, "down", name),
        (2.6, "up", "zz9"), (3.0, "up", "b3"), (3.5, "up", name)]
    b3 = {c for c in fab.links if "b3" in (c.a, c.b)}
    assert tl.cables[1] == b3 and tl.cables[2] == b3          # the cable was down already
    assert tl.unchanged[1:4] == [True, True, True]
    assert "zz9" in tl.errors[2] and "zz9 was not taken down" == tl.errors[4]
    assert tl.cables[6] == {cable}                             # b3 back, the cable held twice
    assert tl.cables[7] == {cable}                             # once released: still down
    assert tl.epoch_at(1.0) == 0 and tl.epoch_at(1.0 + CONTROL_S) == 1
    rec = tl.record(2, 0)
    assert rec["error"] and rec["at_s"] == 1.6
    assert tl.record(0, 3)["connections_moved"] == 3 and not tl.record(0, 3)["unchanged"]


@pytest.fixture(scope="module")
def ns():
    pytest.importorskip("ns", reason="the ns3 package (make setup installs it)")
    from testbed.ns3.simulate import ns3
    return ns3()


def test_a_dead_zcube_switch_moves_transfers_in_flight_to_the_other_plane(ns):
    from testbed.ns3.simulate import simulate
    table = RouteTable(zcube(4, 4), "zcube")
    work = _work(_through(table, "b3", 6))
    got = simulate(table, work, 100, None, [{"at_s": 1.0, "element": "b3", "duration_s": 1.0}])
    assert all(r["verified"] and r["bytes_received"] == r["bytes"] for r in got.rows)
    assert all(r["attempts"] == 2 and r["moves"] == 1 for r in got.rows)
    assert [(r["action"], r["t_s"]) for r in got.faults] == [("down", 1.0), ("up", 2.0)]
    assert got.faults[0]["connections_moved"] == 6
    hit = affected(table, got.faults, got.rows)[0]
    assert hit["transfers_affected"] == hit["transfers_moved_at_once"] == 6
    assert hit["transfers_lost"] == 0
    # moved at the control step, going again within a few round trips of it
    assert CONTROL_S * 1000 <= hit["first_byte_after_ms"]["max"] < CONTROL_S * 1000 + 100


def test_a_dead_spine_is_routed_around_and_sends_nothing_after_the_reroute(ns):
    from testbed.ns3.simulate import simulate
    table = RouteTable(roft(4, 4), "ecmp")
    work = _work(_through(table, "s0", 6))
    got = simulate(table, work, 100, None, [{"at_s": 1.0, "element": "s0", "duration_s": 1.0}])
    assert all(r["verified"] for r in got.rows)
    assert not any(r["moves"] for r in got.rows)               # a Clos loses no pairing
    rehashed = [r for r in got.rows if r["gap_s"] is not None]
    assert rehashed and all(r["gap_end_s"] > 1.0 for r in rehashed)
    # between the reroute and the restore only the abandoned connections' timer-driven
    # retransmissions (a packet or two each) still go to s0
    late = sum(x["bytes"] for x in got.links if 1.5 < x["t_s"] <= 2.0 and "s0" in
               (x["src"], x["dst"]))
    assert late <= 10 * 1500
    before = sum(x["bytes"] for x in got.links if x["t_s"] <= 1.0 and "s0" in
                 (x["src"], x["dst"]))
    assert before > 100 * late


def test_a_gpu_cut_off_waits_and_completes_when_its_port_returns(ns):
    from testbed.ns3.simulate import simulate
    table = RouteTable(roft(4, 4), "ecmp")                    # one NIC port per GPU
    work = _work([Transfer(0, "g5", "g10", 300_000, 1.2)])
    got = simulate(table, work, 100, None, [{"at_s": 1.0, "element": "g5:0", "duration_s": 1.0}])
    (row,) = got.rows
    assert row["verified"] and row["end_s"] > 2.0


TINY = """\
name: tiny-faults
link_mbps: 100
repetitions: 1
fabrics:
  - {name: zc, builder: zcube, params: {n: 2}, policy: zcube}
deployment: {prefill_tp: 2, decode_tp: 2, placements: [cross-rail]}
workload: {arrivals: poisson, rate: 8, count: 6, input_tokens: 4096}
faults:
  - {at_s: 0.2, element: "random:switch", duration_s: 0.4}
  - {at_s: 0.3, element: "g9:0", duration_s: 0.1}
"""


def test_zcube_run_on_ns3_records_every_fault_event_and_reports_them(ns, tmp_path, capsys):
    from testbed.cli.main import main
    scen = tmp_path / "f.yaml"
    scen.write_text(TINY.replace('"g9:0"', '"g1:0"'))
    assert main(["run", str(scen), "--backend", "ns3", "-o", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "zc" / "summary.json").read_text())
    assert [(f["action"], f["at_s"]) for f in s["faults"]] == [
        ("down", 0.2), ("down", 0.3), ("up", 0.4), ("up", 0.6)]
    assert s["transfers_verified"] == s["transfers_total"] and "faults_note" not in s
    assert not s.get("faults_not_run")
    page = (tmp_path / "o" / "report.html").read_text()
    assert "<h2>Faults</h2>" in page and "g1:0" in page


def test_nvlink_on_ns3_relays_through_the_siblings_nic_and_survives_a_dead_rail_leaf(ns):
    from testbed.ns3.simulate import simulate
    fab = roft(4, 4, nvlink_gbps=True)
    table = RouteTable(fab, "pxn")
    work = _work([Transfer(0, "g0", "g5", 300_000, 0.1),     # relayed by g1, rail 1
                  Transfer(1, "g0", "g3", 300_000, 0.1),     # inside server 0: NVLink only
                  Transfer(2, "g4", "g9", 300_000, 1.2)])    # g9's leaf l1 is down then
    got = simulate(table, work, 100, None, [{"at_s": 1.0, "element": "l1", "duration_s": 1.0}])
    assert all(r["verified"] and r["bytes_received"] == r["bytes"] for r in got.rows)
    relayed, inside, detour = got.rows
    # 300 KB at 100 Mb/s takes about 25 ms over a NIC, nine times less over NVLink
    assert 20 < relayed["fct_ms"] < 60 and inside["fct_ms"] < relayed["fct_ms"] / 5
    assert detour["end_s"] < 2.0                              # through a sibling, not waiting
    sent = {(x["src"], x["dst"]) for x in got.links if x["bytes"]}
    assert ("g1", "l1") in sent and ("g0", "l0") not in sent
