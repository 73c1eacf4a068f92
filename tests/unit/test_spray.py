"""The ``spray`` policy: ECMP's paths, each transfer over K connections per port pairing, as
MRC sprays a queue pair over many entropy values; the same split on every backend."""
from types import SimpleNamespace

import pytest

from controller.pairings import flows_for
from controller.routing import SPRAY_ENTROPY, RouteTable, make_policy
from testbed.emulation.transfers import pairings_by_host
from testbed.model.simulate import simulate
from topologies import FabricError, roft, zcube
from traffic.types import Transfer

MBPS = 100.0


def work(*transfers):
    return SimpleNamespace(transfers=list(transfers))


def spine_bytes(res) -> dict:
    """Spine switch -> bytes it carried (each byte counted on its way in)."""
    out: dict = {}
    for (a, b), n in res.link_bytes().items():
        if b.startswith("s"):
            out[b] = out.get(b, 0) + n
    return out


def test_spray_routes_as_ecmp_and_names_its_entropy():
    fab = roft(4, 4)
    ecmp, spray, four = (RouteTable(fab, p) for p in ("ecmp", "spray", "spray:4"))
    assert (spray.policy.lanes, four.policy.lanes, ecmp.policy.lanes) == (SPRAY_ENTROPY, 4, 1)
    assert (spray.policy_name, four.policy_name) == ("spray", "spray:4")
    for s, d in (("g0", "g5"), ("g1", "g14"), ("g3", "g7")):
        assert spray.paths(s, d) == four.paths(s, d) == ecmp.paths(s, d)
    assert make_policy("spray:1", fab).lanes == 1


@pytest.mark.parametrize("name", ["spray:0", "spray:x", "spray:257", "spray:", "spray:-2"])
def test_a_bad_entropy_is_one_error_naming_the_bounds(name):
    with pytest.raises(FabricError, match=r"whole number from 1 to 256|unknown policy"):
        RouteTable(roft(2, 2), name)


@pytest.mark.parametrize("size", [1, 7, 1000, 1_000_003])
def test_flows_split_over_pairings_then_lanes_and_every_byte_counts(size):
    fab = zcube(4, 4)                          # two pairings per pair under ecmp on ZCube
    plain = flows_for(RouteTable(fab, "ecmp"), "g2", "g13", size)
    sprayed = flows_for(RouteTable(fab, "spray:3"), "g2", "g13", size)
    assert len(sprayed) == 3 * len(plain)
    assert sum(f["bytes"] for f in sprayed) == size
    assert max(f["bytes"] for f in sprayed) - min(f["bytes"] for f in sprayed) <= 1
    assert [(f["src"], f["dst"], f["lane"]) for f in sprayed] == [
        (f["src"], f["dst"], lane) for f in plain for lane in range(3)]
    assert all(f["alternates"] == p["alternates"]
               for f, p in zip(sprayed, (p for p in plain for _ in range(3))))
    assert all("lane" not in f for f in plain)


def test_the_emulation_opens_a_connection_per_pairing_and_lane():
    table = RouteTable(roft(4, 4), "spray:4")
    pairs = pairings_by_host(table, work(Transfer(0, "g0", "g5", 1000, 0.0),
                                         Transfer(1, "g0", "g6", 1000, 0.0)))
    assert len(pairs["g0"]) == 8 and len(set(pairs["g0"])) == 8
    assert {p[2] for p in pairs["g0"]} == {0, 1, 2, 3}
    plain = pairings_by_host(RouteTable(roft(4, 4), "ecmp"), work(Transfer(0, "g0", "g5", 1, 0.0)))
    assert all(len(p) == 2 for p in plain["g0"])           # unchanged without lanes


def test_the_model_sprays_a_transfer_over_several_spines_and_ecmp_pins_it_to_one():
    table = RouteTable(roft(4, 4), "ecmp")
    one = spine_bytes(simulate(table, work(Transfer(0, "g0", "g5", 160_000, 0.0)), MBPS))
    assert len(one) == 1 and sum(one.values()) == 160_000
    sprayed = spine_bytes(simulate(RouteTable(roft(4, 4), "spray:16"),
                                   work(Transfer(0, "g0", "g5", 160_000, 0.0)), MBPS))
    assert len(sprayed) >= 3 and sum(sprayed.values()) == 160_000
    assert max(sprayed.values()) < 160_000 / 2


def test_the_model_keeps_one_connection_per_lane_for_the_workload():
    """Two transfers of one pair: each lane carries 10,000 bytes of each, so with the lanes
    pinned every spine carries a multiple of 20,000; a connection per transfer does not."""
    table = RouteTable(roft(4, 4), "spray:4")
    two = work(Transfer(0, "g0", "g5", 40_000, 0.0), Transfer(1, "g0", "g5", 40_000, 1.0))
    pinned = spine_bytes(simulate(table, two, MBPS))
    assert sum(pinned.values()) == 80_000 and all(n % 20_000 == 0 for n in pinned.values())
    fresh = spine_bytes(simulate(table, two, MBPS, transport="tcp-per-transfer"))
    assert any(n % 20_000 for n in fresh.values())


def test_the_ideal_of_a_sprayed_transfer_is_its_ports_bytes_over_the_ports_rate():
    from testbed.emulation.isolated import ideal_s
    fab = roft(4, 4)
    size = 168_000
    one_port = size * 8 / (fab.hosts[0].ports[0].gbps * 1e9 * fab.scale_for(100))
    for policy in ("ecmp", "spray:4", "spray:16"):          # lanes share the one port
        assert ideal_s(RouteTable(fab, policy), 100, "g0", "g5", size) == pytest.approx(one_port)
    z = zcube(4, 4)                                        # two ports, half each
    half = size / 2 * 8 / (z.hosts[0].ports[0].gbps * 1e9 * z.scale_for(100))
    assert ideal_s(RouteTable(z, "zcube"), 100, "g2", "g13", size) == pytest.approx(half)


def test_spray_all_routes_as_ecmp_and_splits_every_pairing_evenly_over_its_paths():
    fab = roft(4, 4)
    even, ecmp = RouteTable(fab, "spray:all"), RouteTable(fab, "ecmp")
    assert (even.policy_name, even.policy.even, even.policy.lanes) == ("spray:all", True, 1)
    paths = ecmp.paths("g0", "g5")
    assert even.paths("g0", "g5") == paths and len(paths) >= 2
    size = 4 * 40_001
    sprayed = spine_bytes(simulate(even, work(Transfer(0, "g0", "g5", size, 0.0)), MBPS))
    assert len(sprayed) == len(paths) and sum(sprayed.values()) == size
    assert max(sprayed.values()) - min(sprayed.values()) <= 1


def test_spray_all_on_zcube_puts_each_pairing_on_its_own_path():
    """ZCube's two pairings have one path each: the even split is zcube's striping."""
    z = zcube(4, 4)
    res = simulate(RouteTable(z, "spray:all"), work(Transfer(0, "g2", "g13", 100_000, 0.0)),
                   MBPS)
    plain = simulate(RouteTable(z, "ecmp"), work(Transfer(0, "g2", "g13", 100_000, 0.0)), MBPS)
    assert res.link_bytes() == plain.link_bytes()


def test_spray_all_is_refused_on_the_emulation_before_anything_starts(tmp_path):
    from testbed.errors import UsageError
    from testbed.experiment.pipeline import load_scenario, run_and_check
    path = tmp_path / "even.yaml"
    path.write_text(
        "name: even\nbackend: emulation\nlink_mbps: 100\n"
        "fabrics:\n  - {name: r, builder: roft, params: {servers: 2, gpus_per_server: 2},"
        " policy: 'spray:all'}\n"
        "deployment: {prefill_tp: 1, decode_tp: 1}\n"
        "workload: {arrivals: poisson, rate: 1, count: 2, input_tokens: 1024}\n")
    sc = load_scenario(str(path))
    out = tmp_path / "out"
    with pytest.raises(UsageError, match=r"spray:all .*model backend only"):
        run_and_check(sc, str(out))
    assert not out.exists()
