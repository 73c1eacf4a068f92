"""NVLink on the emulation, the pure part: what each GPU's namespace is given (its NVLink
address, the routes through a sibling and back), the switches' flows for the
acknowledgements, the changes a failure makes, and the build's commands (no root)."""
from __future__ import annotations

from controller.addresses import path_addresses
from controller.failures import Failures
from controller.flowdiff import apply_host_diff, diff_host_config
from controller.flows import compile_host_config, compile_switch_flows
from controller.nvlink_hosts import TABLE_FORWARD, nvlink_configs, table_of
from controller.routing import RouteTable
from testbed.emulation import nvlink_build
from testbed.emulation.isolated import _kind, ideal_s
from topologies import roft, zcube
from topologies.nvlink import nvlink_ip, nvlink_mac


def _pxn():
    fab = roft(4, 4, nvlink_gbps=True)
    return fab, RouteTable(fab, "pxn")


def _ip(fab, host, port=0):
    return fab.host(host).ports[port].ip


def _mac(fab, host, port=0):
    return fab.host(host).ports[port].mac


def test_a_rail_matched_transfer_is_routed_through_the_sibling_and_back():
    fab, table = _pxn()
    cfg = nvlink_configs(table)
    g0, g1, g5 = nvlink_ip(fab, "g0"), nvlink_ip(fab, "g1"), _ip(fab, "g5")
    # g0 sends from its NVLink address to g5's NIC, through g1 (rank 1) over NVLink
    assert (table_of(-1), f"{g5}/32", -1, g1, g0) in cfg["g0"].routes
    # g1 forwards what arrives on NVLink out of its NIC, framed for g5's
    assert (TABLE_FORWARD, f"{g5}/32", 0, None, None) in cfg["g1"].routes
    assert (g5, _mac(fab, "g5"), 0) in cfg["g1"].neighbours
    # g5 answers g0's NVLink address through its NIC, framed for g1's NIC
    assert (table_of(0), f"{g0}/32", 0, None, _ip(fab, "g5")) in cfg["g5"].routes
    assert (g0, _mac(fab, "g1"), 0) in cfg["g5"].neighbours
    # and every GPU reaches its siblings on NVLink, from its NVLink address
    assert (254, f"{g1}/32", -1, None, g0) in cfg["g0"].routes
    assert (g1, nvlink_mac(fab, "g1"), -1) in cfg["g0"].neighbours
    # none of it in the main table's NIC routes
    assert all(not prefix.startswith("10.254.") for prefix, _, _ in
               compile_host_config(table, ["g5"])["g5"].routes)


def test_the_switches_carry_acknowledgements_back_to_the_siblings_nic():
    fab, table = _pxn()
    leaf = compile_switch_flows(table)["l1"]
    back = [f for f in leaf.flows if f.dst == nvlink_ip(fab, "g0")]
    (here, _), = fab.ports_between("l1", "g1")
    assert [f.ports for f in back] == [(here,)]


def test_no_nvlink_no_nvlink_part():
    fab = roft(4, 4)
    assert nvlink_configs(RouteTable(fab, "ecmp")) == {}
    assert compile_host_config(RouteTable(fab, "ecmp"), ["g0"])["g0"].nvlink is None


def test_a_dead_rail_leaf_changes_the_nvlink_routes_and_the_diff_replays_them():
    fab, table = _pxn()
    cut = RouteTable(fab, "pxn", Failures(switches={"l1"}))
    old, new = compile_host_config(table), compile_host_config(cut)
    diffs = diff_host_config(old, new)
    assert diffs["g1"].nv_routes_set and diffs["g1"].nv_routes_delete
    for name in new:
        got = apply_host_diff(old[name], diffs[name]) if name in diffs else old[name]
        assert got == new[name], name


def test_tied_detours_hand_over_to_one_sibling_per_pairing():
    fab = roft(4, 4, nvlink_gbps=True)
    cut = RouteTable(fab, "pxn", Failures(switches={"l1"}))
    paths = cut.paths("g1", "g5")             # both behind the dead leaf: three ranks tie
    assert {path_addresses(fab, p)[:2] for p in paths} == {(nvlink_ip(fab, "g1"),
                                                            nvlink_ip(fab, "g5"))}
    assert {(p[2], p[-3]) for p in paths} == {("g0", "g4")}


def test_zcube_pxn_hands_each_plane_to_its_own_sibling():
    fab = zcube(4, 4, nvlink_gbps=True)
    table = RouteTable(fab, "zcube-pxn")
    cfg = nvlink_configs(table)["g0"]
    handed = [r for r in cfg.routes if r[0] == table_of(-1)]
    assert handed and all(r[3] is not None and r[3].startswith("10.254.") for r in handed)


def test_ideal_time_and_kind_count_the_nvlink():
    fab, table = _pxn()
    assert _kind(table, "g0", "g1") == ((0, 1),)          # inside the server
    assert _kind(table, "g0", "g5") == ((1, 1),)          # one leaf, one hand-over
    # inside a server at NVLink's rate (9 NICs); across, at the NIC's
    assert ideal_s(table, 40, "g0", "g1", 10**6) * 9 == ideal_s(table, 40, "g0", "g5", 10**6)


def test_the_build_makes_a_shaped_bridge_per_server_with_the_testbeds_prefix():
    fab = roft(2, 2, nvlink_gbps=True)
    names = nvlink_build.root_names(fab, "zc")
    assert set(names) == {"zcnv0", "zcnv1", "zcnv0-eth0", "zcnv0-eth1", "zcnv1-eth0",
                          "zcnv1-eth1"}
    batches = nvlink_build.build_batches(fab, {h.name: 100 + i for i, h in
                                              enumerate(fab.hosts)}, 360.0, "pfifo limit 64",
                                         "zc")
    root = batches[""]
    assert "link add zcnv0 type bridge" in root.ip
    assert any("peer name g1-nv netns 101" in line for line in root.ip)
    assert any("rate 360.000Mbit" in line for line in batches["g1"].tc)
    table = RouteTable(fab, "pxn")
    ip, _ = nvlink_build.host_lines(fab.host("g0"), nvlink_configs(table)["g0"], "", True)
    assert f"rule add pref 100 iif g0-nv lookup {TABLE_FORWARD}" in ip
    assert any(line.startswith("route replace") and "onlink" in line for line in ip)


def test_a_direct_path_whose_reverse_pair_hands_over_still_gets_its_answers_home():
    fab = zcube(4, 4, nvlink_gbps=True)
    table = RouteTable(fab, "zcube-pxn")
    # g14 -> g5 plane 2 goes straight from g14's port 1; g5 -> g14 hands over on both planes,
    # so no pair of g5's answers from 10.0.1.5 to 10.1.1.14 but this one's return
    assert ("g14", "b2", "a1", "g5") in table.paths("g14", "g5")
    src, dst = _ip(fab, "g14", 1), _ip(fab, "g5", 0)
    assert (table_of(0), f"{src}/32", 0, None, dst) in nvlink_configs(table)["g5"].routes
    flows = compile_switch_flows(table)["a1"].flows
    assert any(f.dst == src and f.src in (dst, None) for f in flows)
