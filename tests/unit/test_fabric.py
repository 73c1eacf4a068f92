"""Fabric data model: positional addressing, lookups, JSON round trip, generic wiring checks."""
from __future__ import annotations

import json
import re

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies import Fabric, FabricError, Link, Switch, fattree, roft, zcube
from topologies.fabric import (
    MAX_HOSTS,
    gpu_of_ip,
    host_ip,
    host_mac,
    load_fabric,
    make_host,
    save_fabric,
    switch_dpid,
)

# -- addressing ----------------------------------------------------------------------------

def test_host_ip_follows_documented_plan():
    assert host_ip(13, 1) == "10.1.1.13"
    assert host_ip(0, 0) == "10.0.1.0"
    assert host_ip(300, 0) == "10.0.2.44"          # 300 = 1 * 256 + 44
    assert host_ip(MAX_HOSTS - 1, 3) == "10.3.254.255"


def test_host_mac_encodes_port_and_gpu_as_three_bytes():
    assert host_mac(13, 1) == "02:01:00:00:00:0d"
    assert host_mac(0x012345, 0) == "02:00:00:01:23:45"
    assert host_mac(0, 10) == "02:0a:00:00:00:00"


@settings(max_examples=200, deadline=None)
@given(gpu=st.integers(0, MAX_HOSTS - 1), port=st.integers(0, 3))
def test_gpu_of_ip_inverts_host_ip(gpu, port):
    assert gpu_of_ip(host_ip(gpu, port)) == (gpu, port)


@pytest.mark.parametrize("ip", ["11.0.1.5", "10.0.0.5", "192.168.1.1"])
def test_gpu_of_ip_rejects_addresses_outside_the_plan(ip):
    with pytest.raises(FabricError, match=re.escape(ip)):
        gpu_of_ip(ip)


def test_gpu_of_ip_rejects_octet_above_255():
    with pytest.raises(FabricError):
        gpu_of_ip("10.0.1.300")


@pytest.mark.parametrize("ip", ["10.x.1.1", "10.0.1"])
def test_gpu_of_ip_rejects_malformed_address_with_fabric_error(ip):
    with pytest.raises(FabricError):
        gpu_of_ip(ip)


def test_built_hosts_carry_positional_names_and_addresses():
    f = zcube(4)
    for h in f.hosts:
        assert h.name == f"g{h.index}"
        assert [p.index for p in h.ports] == [0, 1]
        for p in h.ports:
            assert p.ip == host_ip(h.index, p.index)
            assert p.mac == host_mac(h.index, p.index)


def test_zcube_switch_names_are_group_letter_and_index():
    f = zcube(3)
    assert [(s.name, s.group, s.index) for s in f.switches] == [
        ("a0", "A", 0), ("a1", "A", 1), ("a2", "A", 2),
        ("b0", "B", 0), ("b1", "B", 1), ("b2", "B", 2)]


def test_roft_and_fattree_switch_names_are_positional():
    r = roft(4, 4)
    assert sorted(s.name for s in r.switches if s.group == "leaf") == ["l0", "l1", "l2", "l3"]
    assert sorted(s.name for s in r.switches if s.group == "spine") == ["s0", "s1", "s2", "s3"]
    ft = fattree(4)
    names = {s.name for s in ft.switches}
    assert {f"p{p}e{e}" for p in range(4) for e in range(2)} <= names
    assert {f"p{p}a{a}" for p in range(4) for a in range(2)} <= names
    assert {f"c{j}" for j in range(4)} <= names


@pytest.mark.parametrize("fab, name, dpid", [
    (lambda: zcube(4), "a2", "0a00000000000002"),
    (lambda: zcube(4), "b0", "0b00000000000000"),
    (lambda: roft(4, 4), "l3", "1e00000000000003"),
    (lambda: roft(4, 4), "s1", "5e00000000000001"),
    (lambda: fattree(4), "p1e1", "e000000001000001"),
    (lambda: fattree(4), "p3a0", "a000000003000000"),
    (lambda: fattree(4), "c3", "c000000000000003"),
])
def test_dpid_hex_carries_role_byte_pod_and_index(fab, name, dpid):
    assert fab().switch(name).dpid_hex == dpid


def test_switch_dpids_are_unique_in_every_builder():
    for f in (zcube(6), roft(40, 2, radix=16), fattree(6)):
        dpids = [s.dpid for s in f.switches]
        assert len(set(dpids)) == len(dpids), f.name


def test_switch_dpid_function_matches_role_codes():
    assert switch_dpid("A", 2) == 0x0A00000000000002
    assert switch_dpid("edge", 1, pod=2) == 0xE000000002000001


# -- lookups -------------------------------------------------------------------------------

def test_attachment_gives_switch_and_port_per_nic_port():
    f = zcube(4)                       # g6: seg 1, rail 2
    assert f.attachment("g6", 0) == ("a1", 3)      # A[i] port rail + 1
    assert f.attachment("g6", 1) == ("b2", 2)      # B[j] port seg + 1
    assert f.attachments("g6") == [("a1", 3), ("b2", 2)]


def test_attachment_of_uncabled_port_raises():
    f = _tiny([("g0", 0, "s0", 1)], hosts=2)
    with pytest.raises(FabricError, match="g1 port 0 is not cabled"):
        f.attachment("g1", 0)


def test_host_port_toward_names_the_nic_port():
    f = zcube(4)
    assert f.host_port_toward("g6", "a1") == 0
    assert f.host_port_toward("g6", "b2") == 1


def test_host_port_toward_unattached_switch_raises():
    f = zcube(4)
    with pytest.raises(FabricError, match="g6 has no port on a0"):
        f.host_port_toward("g6", "a0")


def test_ports_between_single_cable():
    f = zcube(4)
    # A[i] port n + 1 + j; B[j] port n + 1 + i  (n = 4, i = 1, j = 2)
    assert f.ports_between("a1", "b2") == [(7, 6)]
    assert f.ports_between("b2", "a1") == [(6, 7)]


def test_ports_between_parallel_cables_lists_each():
    f = zcube(4, parallel=2)
    # A[1] ports n + 1 + j*m + k = 9, 10; B[2] ports n + 1 + i*m + k = 7, 8
    assert sorted(f.ports_between("a1", "b2")) == [(9, 7), (10, 8)]


def test_ports_between_unlinked_nodes_is_empty():
    f = zcube(4)
    assert f.ports_between("a0", "a1") == []
    assert f.ports_between("g0", "b3") == []


def test_host_and_switch_lookup_unknown_name_raises():
    f = zcube(2)
    with pytest.raises(FabricError, match="'g99'"):
        f.host("g99")
    with pytest.raises(FabricError, match="'z9'"):
        f.switch("z9")


# -- JSON round trip -----------------------------------------------------------------------

FABRICS = {
    "zcube4": lambda: zcube(4),
    "zcube4-gps2": lambda: zcube(4, gpus_per_server=2),
    "zcube4-parallel2": lambda: zcube(4, parallel=2),
    "zcube3-parallel3": lambda: zcube(3, parallel=3),
    "roft4x4": lambda: roft(4, 4),
    "roft40x2-r16": lambda: roft(40, 2, radix=16),
    "roft-spines2-over2": lambda: roft(4, 4, spines=2, oversubscription=2),
    "fattree4": lambda: fattree(4),
    "fattree2": lambda: fattree(2),
}


def _link_key(link: Link):
    return (link.a, link.a_port, link.b, link.b_port, link.gbps)


@pytest.mark.parametrize("which", sorted(FABRICS))
def test_json_round_trip_gives_equal_fabric(which):
    f = FABRICS[which]()
    g = Fabric.from_json_dict(json.loads(json.dumps(f.to_json_dict())))
    assert g.kind == f.kind
    assert g.params == f.params
    assert g.meta == f.meta
    assert g.hosts == f.hosts
    assert g.switches == f.switches
    assert sorted(map(_link_key, g.links)) == sorted(map(_link_key, f.links))


def test_save_and_load_fabric_file_round_trip(tmp_path):
    f = zcube(4, gpus_per_server=2, parallel=2)
    path = tmp_path / "fab.json"
    save_fabric(f, str(path))
    g = load_fabric(str(path))
    assert (g.hosts, g.switches) == (f.hosts, f.switches)
    assert sorted(map(_link_key, g.links)) == sorted(map(_link_key, f.links))


def test_load_fabric_missing_file_raises(tmp_path):
    with pytest.raises(FabricError, match="cannot read fabric file"):
        load_fabric(str(tmp_path / "absent.json"))


def test_load_fabric_non_json_raises(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(FabricError, match="is not JSON"):
        load_fabric(str(p))


def test_from_json_dict_missing_field_raises():
    d = zcube(2).to_json_dict()
    del d["links"][0]["gbps"]
    with pytest.raises(FabricError, match="gbps"):
        Fabric.from_json_dict(d)


def test_from_json_dict_unknown_node_kind_raises():
    d = zcube(2).to_json_dict()
    d["nodes"][0]["kind"] = "router"
    with pytest.raises(FabricError, match="unknown kind 'router'"):
        Fabric.from_json_dict(d)


def test_from_json_dict_mistyped_dpid_raises_fabric_error():
    d = zcube(2).to_json_dict()
    next(n for n in d["nodes"] if n["kind"] == "switch")["dpid"] = "zz"
    with pytest.raises(FabricError):
        Fabric.from_json_dict(d)


@pytest.mark.parametrize("which", sorted(FABRICS))
def test_json_loads_into_networkx_with_node_kinds_and_groups(which):
    f = FABRICS[which]()
    g = nx.node_link_graph(json.loads(json.dumps(f.to_json_dict())), edges="links")
    assert g.number_of_nodes() == len(f.hosts) + len(f.switches)
    for h in f.hosts:
        assert g.nodes[h.name]["kind"] == "host"
        assert g.nodes[h.name]["index"] == h.index
    for s in f.switches:
        assert g.nodes[s.name]["kind"] == "switch"
        assert g.nodes[s.name]["group"] == s.group
        assert g.nodes[s.name]["dpid"] == s.dpid_hex


@pytest.mark.parametrize("which", sorted(FABRICS))
def test_json_loads_into_networkx_with_link_ports_and_bandwidth(which):
    f = FABRICS[which]()
    g = nx.node_link_graph(json.loads(json.dumps(f.to_json_dict())), edges="links")
    assert g.number_of_edges() == len(f.links)
    got = sorted((d["a"], d["a_port"], d["b"], d["b_port"], d["gbps"])
                 for _, _, d in g.edges(data=True))
    assert got == sorted(map(_link_key, f.links))


def test_parallel_cables_export_as_multigraph():
    g = zcube(3, parallel=2).to_networkx()
    assert g.is_multigraph()
    assert g.number_of_edges("a0", "b1") == 2


def test_single_cables_export_as_simple_graph():
    assert not zcube(3).to_networkx().is_multigraph()


# -- check_wiring refusals on hand-built fabrics ---------------------------------------------

def _tiny(links, hosts=2, ports_per_host=1, switches=("s0",)):
    """A hand-made fabric: hosts g0.. with one NIC port each, switches in group 'leaf'."""
    hs = [make_host(g, g, 0, [100.0] * ports_per_host) for g in range(hosts)]
    sws = [Switch(name, "leaf", i, switch_dpid("leaf", i)) for i, name in enumerate(switches)]
    return Fabric("custom", {}, hs, sws, [Link(a, ap, b, bp, 100.0) for a, ap, b, bp in links])


def test_check_wiring_accepts_a_correct_small_fabric():
    _tiny([("g0", 0, "s0", 1), ("g1", 0, "s0", 2)]).check_wiring()


def test_check_wiring_refuses_a_port_cabled_twice():
    f = _tiny([("g0", 0, "s0", 1), ("g1", 0, "s0", 1)])
    with pytest.raises(FabricError, match="port 1 of s0 is cabled twice"):
        f.check_wiring()


def test_check_wiring_refuses_a_host_to_host_link():
    f = _tiny([("g0", 0, "g1", 0)])
    with pytest.raises(FabricError, match="link g0-g1 joins two hosts directly"):
        f.check_wiring()


def test_check_wiring_refuses_an_uncabled_host_port():
    f = _tiny([("g0", 0, "s0", 1), ("g1", 0, "s0", 2)], ports_per_host=2,
              switches=("s0", "s1"))
    f.links.append(Link("g0", 1, "s1", 1, 100.0))
    f = Fabric(f.kind, f.params, f.hosts, f.switches, f.links)
    with pytest.raises(FabricError, match="g1 port 1 is not cabled to a switch"):
        f.check_wiring()


def test_check_wiring_refuses_a_link_to_an_unknown_node():
    f = _tiny([("g0", 0, "s0", 1), ("g1", 0, "s9", 1)])
    with pytest.raises(FabricError, match="unknown node 's9'"):
        f.check_wiring()


def test_check_wiring_refuses_zero_bandwidth_link():
    f = _tiny([("g0", 0, "s0", 1), ("g1", 0, "s0", 2)])
    f = Fabric(f.kind, f.params, f.hosts, f.switches,
               [f.links[0], Link("g1", 0, "s0", 2, 0.0)])
    with pytest.raises(FabricError, match="bandwidth 0.0 Gb/s"):
        f.check_wiring()


def test_check_wiring_refuses_a_duplicate_node_name():
    f = _tiny([("g0", 0, "s0", 1), ("g1", 0, "s0", 2)], switches=("s0", "g1"))
    with pytest.raises(FabricError, match="node name 'g1' is used twice"):
        f.check_wiring()


def test_check_wiring_refuses_nan_bandwidth_link():
    f = _tiny([("g0", 0, "s0", 1)], hosts=1)
    f = Fabric(f.kind, f.params, f.hosts, f.switches, [Link("g0", 0, "s0", 1, float("nan"))])
    with pytest.raises(FabricError):
        f.check_wiring()


def test_check_wiring_refuses_invalid_ip_with_fabric_error():
    d = zcube(2).to_json_dict()
    next(n for n in d["nodes"] if n["kind"] == "host")["ports"][0]["ip"] = "10.0.1.999"
    with pytest.raises(FabricError):
        Fabric.from_json_dict(d)
