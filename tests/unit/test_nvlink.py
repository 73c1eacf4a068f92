"""NVLink inside the servers: the Fabric's domains, routing through them (same-server pairs,
pxn and zcube-pxn, detours around a dead NIC's switch), what the verifier and the switch
flows make of such paths, and the flow-level model carrying them."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from controller.addresses import network_addresses
from controller.failures import Failures
from controller.flows import compile_switch_flows, path_addresses
from controller.routing import EcmpPolicy, RouteTable, make_policy
from controller.verify import verify
from testbed.model.capacity import directed_capacity
from testbed.model.simulate import simulate
from topologies import Fabric, FabricError, fattree, roft, zcube
from topologies.cost import cost
from topologies.nvlink import NVLINK_GBPS, network_part, nvlink_hops, nvlink_ip
from topologies.text_summary import summary
from traffic.types import Transfer

MBPS = 100.0


def _roft(**kw):
    return roft(4, 4, nvlink_gbps=True, **kw)


# -- the Fabric -----------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda v: zcube(4, nvlink_gbps=v),
                                  lambda v: roft(4, 4, nvlink_gbps=v),
                                  lambda v: fattree(4, gpus_per_server=2, nvlink_gbps=v)])
def test_every_builder_takes_nvlink_and_leaves_fabrics_without_it_unchanged(make):
    off, on, fast = make(0), make(True), make(7200)
    assert off.nvlinks == [] and off.nvlink_gbps == 0 and "nvlink_gbps" not in off.params
    assert on.nvlink_gbps == NVLINK_GBPS == 3600 and on.params["nvlink_gbps"] == 3600
    assert fast.nvlink_gbps == 7200
    assert len(on.nvlinks) == len(on.hosts)
    for link in on.nvlinks:
        assert on.domain_of(link.a) == link.b == f"nv{on.host(link.a).server}"
    # server-internal: the same switches, ports, optics and cables as without NVLink
    assert {k: v for k, v in cost(on).items() if k != "spec"} == \
        {k: v for k, v in cost(off).items() if k != "spec"}
    assert on.links == off.links and on.switch_graph().edges == off.switch_graph().edges
    assert "NVLink inside each server: 3,600 Gb/s" in summary(on)
    assert "NVLink" not in summary(off)


def test_nvlink_survives_the_json_round_trip_and_a_wrong_domain_is_refused():
    fab = _roft()
    again = Fabric.from_json_dict(fab.to_json_dict())
    assert again.nvlinks == fab.nvlinks and again.params == fab.params
    data = fab.to_json_dict()
    edge = next(e for e in data["links"] if e.get("nvlink") and e["a"] == "g5")
    edge["b"] = edge["target"] = "nv0"                  # g5 is on server 1
    with pytest.raises(FabricError, match="g5 is on server 1"):
        Fabric.from_json_dict(data)
    data = fab.to_json_dict()
    data["links"] = [e for e in data["links"] if not (e.get("nvlink") and e["a"] == "g3")]
    with pytest.raises(FabricError, match="g3 has no NVLink"):
        Fabric.from_json_dict(data)


def test_a_bad_nvlink_rate_is_refused_by_name():
    with pytest.raises(FabricError, match="nvlink_gbps must be greater than 0"):
        roft(2, 2, nvlink_gbps=-1)


def test_network_part_strips_the_hand_overs_at_either_end():
    fab = _roft()
    assert network_part(fab, ("g0", "l0", "s1", "l1", "g5")) == ("g0", "l0", "s1", "l1", "g5")
    assert network_part(fab, ("g0", "nv0", "g1", "l1", "g5")) == ("g1", "l1", "g5")
    assert network_part(fab, ("g0", "l0", "g4", "nv1", "g5")) == ("g0", "l0", "g4")
    assert network_part(fab, ("g0", "nv0", "g1", "l1", "g5", "nv1", "g6")) == ("g1", "l1", "g5")
    assert network_part(fab, ("g0", "nv0", "g1")) == ()
    assert nvlink_hops(fab, ("g0", "nv0", "g1", "l1", "g5", "nv1", "g6")) == 2


# -- routing --------------------------------------------------------------------------------

@pytest.mark.parametrize("fab,policy", [(_roft(), "ecmp"), (_roft(), "pxn"),
                                        (zcube(4, nvlink_gbps=True), "zcube"),
                                        (zcube(4, nvlink_gbps=True), "zcube-pxn")])
def test_gpus_of_one_server_use_their_nvlink_and_nothing_else(fab, policy):
    t = RouteTable(fab, policy)
    assert t.paths("g0", "g3") == [("g0", "nv0", "g3")]
    assert path_addresses(fab, ("g0", "nv0", "g3"))[2:] == (-1, -1)
    rep = verify(t, "all-to-all", line_rate=True)
    assert rep.ok, rep.violations
    assert rep.hops[0] == 4 * 4 * 3                      # every same-server ordered pair


def test_same_server_pairs_cross_the_fabric_without_nvlink():
    assert RouteTable(roft(4, 4), "ecmp").paths("g0", "g3")[0][1] == "l0"


def test_pxn_keeps_a_transfer_in_the_destinations_rail():
    fab = _roft()
    t = RouteTable(fab, "pxn")
    # rank 0 to rank 1 of another server: over NVLink to g1 (rank 1), then rail 1's leaf
    assert t.paths("g0", "g5") == [("g0", "nv0", "g1", "l1", "g5")]
    # g0 sends from its NVLink address; g1's NIC carries it across the fabric
    assert path_addresses(fab, t.paths("g0", "g5")[0])[:2] == \
        (nvlink_ip(fab, "g0"), fab.host("g5").ports[0].ip)
    assert network_addresses(fab, network_part(fab, t.paths("g0", "g5")[0]))[:2] == \
        (fab.host("g1").ports[0].ip, fab.host("g5").ports[0].ip)
    assert t.paths("g0", "g4") == [("g0", "l0", "g4")]          # ranks match: its own NIC
    rep = verify(t, "all-to-all", line_rate=True)
    assert rep.ok and set(rep.hops) == {0, 1}                 # no spine is ever crossed
    assert rep.loads["leaf->spine"]["max"] == 0


def test_pxn_on_two_leaves_per_rail_still_crosses_a_spine_inside_the_rail():
    fab = roft(8, 2, radix=8, nvlink_gbps=True)
    t = RouteTable(fab, "pxn")
    paths = t.paths("g0", "g15")           # server 0 rank 0 -> server 7 rank 1 (other leaf)
    assert paths and all(p[:3] == ("g0", "nv0", "g1") and len(p) == 7 for p in paths)
    assert {fab.switch(p[3]).attr("rail") for p in paths} == {1}


def test_pxn_and_zcube_pxn_need_nvlink():
    with pytest.raises(FabricError, match="policy pxn needs NVLink"):
        make_policy("pxn", roft(4, 4))
    with pytest.raises(FabricError, match="policy zcube-pxn needs NVLink"):
        make_policy("zcube-pxn", zcube(4))


def test_zcube_pxn_hands_p1_to_the_sibling_on_the_destinations_b_switch():
    fab = zcube(4, nvlink_gbps=True)
    t = RouteTable(fab, "zcube-pxn")
    # g0 (a0, b0) -> g5 (a1, b1): P1 a0-b1 becomes g1's NIC into b1; P2 b0-a1 stays
    assert t.paths("g0", "g5") == [("g0", "nv0", "g1", "b1", "g5"), ("g0", "b0", "a1", "g5")]
    assert t.claims("g0", "g5") is None
    assert verify(t).ok


def test_a_dead_rail_leaf_leaves_every_gpu_reachable_through_nvlink():
    fab = _roft()
    dead = Failures.parse(fab, ["l1"])               # rank 1 of every server loses its NIC
    without = RouteTable(roft(4, 4), "ecmp", Failures.parse(roft(4, 4), ["l1"]))
    assert len(without.disconnected()) == 2 * 4 * 15 - 4 * 3
    for policy in ("ecmp", "pxn"):
        t = RouteTable(fab, policy, dead)
        assert t.disconnected() == []
        rep = verify(t)
        assert rep.ok, rep.violations
        # to g5: into a sibling's NIC on a live rail, then NVLink; from g5: the other way
        assert t.paths("g0", "g5") == [("g0", "l0", "g4", "nv1", "g5")]
        assert t.paths("g5", "g0") == [("g5", "nv1", "g4", "l0", "g0")]


def test_pxn_whose_relay_rail_is_down_takes_the_sources_own_rail():
    fab = roft(8, 2, radix=8, nvlink_gbps=True)   # two leaves per rail: l2 and l3 on rail 1
    relay_leaf = fab.attachment("g1", 0)[0]
    t = RouteTable(fab, "pxn", Failures.parse(fab, [relay_leaf]))
    paths = t.paths("g0", "g15")
    assert paths and all(p[0] == "g0" and p[1] == fab.attachment("g0", 0)[0] for p in paths)


def test_the_verifier_refuses_nvlink_in_the_middle_of_a_path():
    fab = _roft()

    class Bad(EcmpPolicy):
        def paths(self, src, dst):
            if (src, dst) == ("g0", "g9"):
                return [(src, "l0", "g4", "nv1", "g5", "l1", dst)]
            return super().paths(src, dst)
    rep = verify(RouteTable(fab, Bad(fab)))
    assert not rep.ok and "g4 is not a switch" in rep.violations[0]


def test_switch_flows_of_a_relayed_path_are_the_relays():
    fab = _roft()
    flows = compile_switch_flows(RouteTable(fab, "pxn"))
    # the spines carry nothing; leaf l1 reaches g5 from g1's address only via its own port
    assert all(not flows[f"s{k}"].flows for k in range(4))
    g5 = fab.host("g5").ports[0].ip
    assert any(f.dst == g5 for f in flows["l1"].flows)


# -- the model ------------------------------------------------------------------------------

def test_the_model_counts_nvlink_at_the_nics_scale():
    cap = directed_capacity(_roft(), MBPS)
    assert cap[("g0", "nv0")] == cap[("nv0", "g1")] == pytest.approx(MBPS * 9)
    assert cap[("g0", "l0")] == pytest.approx(MBPS)


def test_a_relayed_transfer_crosses_nvlink_then_one_leaf_on_the_model():
    fab = _roft()
    w = SimpleNamespace(transfers=[Transfer(0, "g0", "g5", 1_000_000, 0.0)])
    res = simulate(RouteTable(fab, "pxn"), w, MBPS)
    crossed = {hop for hop, b in res.link_bytes().items() if b}
    assert crossed == {("g0", "nv0"), ("nv0", "g1"), ("g1", "l1"), ("l1", "g5")}
    ecmp = simulate(RouteTable(fab, "ecmp"), w, MBPS)
    assert res.rows[0]["fct_ms"] < ecmp.rows[0]["fct_ms"]   # one switch, not three


# -- where NVLink is not carried yet, and the comparison's one server ------------------------

def test_a_scenario_mixing_servers_with_and_without_nvlink_is_refused(tmp_path):
    from testbed.experiment.scenario import ScenarioError, loads
    text = ("name: mixed\nbackend: model\nlink_mbps: 100\nfabrics:\n"
            "  - {name: z, builder: zcube, params: {n: 4, nvlink_gbps: 3600}}\n"
            "  - {name: r, builder: roft, params: {servers: 4, gpus_per_server: 4}}\n"
            "deployment: {prefill_tp: 4, decode_tp: 4}\n"
            "workload: {arrivals: poisson, rate: 1, count: 2, input_tokens: 1024}\n")
    with pytest.raises(ScenarioError, match=r":6: .*no NVLink here but NVLink at 3600 Gb/s"):
        loads(text)


def test_the_containerlab_export_refuses_nvlink_in_one_line(capsys):
    from testbed.cli.main import main
    assert main(["topo", "roft", "--nvlink-gbps", "3600", "--format", "clab"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NVLink" in err[0]


def test_the_simai_export_takes_the_fabrics_nvlink_rate():
    from topologies.simai import simai_lines
    assert simai_lines(_roft())[2].split()[2] == "3600Gbps"
    assert simai_lines(roft(4, 4))[2].split()[2] == "2880Gbps"
    with pytest.raises(FabricError, match="NVLink runs at 3600"):
        simai_lines(_roft(), nvlink_gbps=2880)
