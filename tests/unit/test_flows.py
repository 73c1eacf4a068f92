"""Compiling a route table into switch flows/groups and host routes, and parsing ovs-ofctl."""
from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import pytest

from controller.flows import (
    PRIO_DST,
    PRIO_MISS,
    PRIO_PAIR,
    Flow,
    compile_host_config,
    compile_switch_flows,
    parse_ofctl_flow,
    parse_ofctl_group,
)
from controller.routing import RouteTable
from topologies import fattree, roft, zcube

FABRICS = {
    "zcube44": lambda: zcube(4, 4),
    "zcube33": lambda: zcube(3, 3),
    "zcube4-par2": lambda: zcube(4, parallel=2),
    "roft44": lambda: roft(4, 4),
    "fattree4": lambda: fattree(4),
}


@lru_cache(maxsize=None)
def _fabric(name):
    return FABRICS[name]()


@lru_cache(maxsize=None)
def _table(name, policy):
    return RouteTable(_fabric(name), policy)


@lru_cache(maxsize=None)
def _flows(name, policy):
    return compile_switch_flows(_table(name, policy))


@lru_cache(maxsize=None)
def _hosts(name, policy):
    return compile_host_config(_table(name, policy))


def _ip(g: int, port: int) -> str:
    """The address plan written out independently: 10.<port>.1.<g> for g < 256."""
    assert g < 256
    return f"10.{port}.1.{g}"


def _mac(g: int, port: int) -> str:
    assert g < 256
    return f"02:{port:02x}:00:00:00:{g:02x}"


def _by_dst(sf):
    """Priority-100 flows of one switch by destination; fails on duplicates."""
    out = {}
    for f in sf.flows:
        if f.priority == PRIO_DST:
            assert f.dst not in out, f"{sf.switch}: two destination flows for {f.dst}"
            out[f.dst] = f
    return out


# -- zcube policy on zcube(4,4) ---------------------------------------------------------------

def test_zcube_policy_gives_every_switch_20_single_output_destination_flows():
    sfs = _flows("zcube44", "zcube")
    assert sorted(sfs) == [f"a{i}" for i in range(4)] + [f"b{j}" for j in range(4)]
    for name, sf in sfs.items():
        assert len(sf.flows) == 20, name
        assert sf.groups == {}, name
        for f in sf.flows:
            assert f.priority == PRIO_DST and f.src is None and len(f.ports) == 1, (name, f)
        assert len({f.dst for f in sf.flows}) == 20, name


def test_zcube_policy_a_switch_sends_b_addresses_to_the_destination_rail():
    n = 4
    sfs = _flows("zcube44", "zcube")
    for i in range(n):
        flows = _by_dst(sfs[f"a{i}"])
        want = {}
        for g in range(n * n):
            seg, rail = divmod(g, n)
            want[_ip(g, 1)] = (n + 1 + rail,)          # to B[rail]
            if seg == i:
                want[_ip(g, 0)] = (rail + 1,)          # own host, by its A address
        assert {d: f.ports for d, f in flows.items()} == want, f"a{i}"


def test_zcube_policy_b_switch_sends_a_addresses_to_the_destination_segment():
    n = 4
    sfs = _flows("zcube44", "zcube")
    for j in range(n):
        flows = _by_dst(sfs[f"b{j}"])
        want = {}
        for g in range(n * n):
            seg, rail = divmod(g, n)
            want[_ip(g, 0)] = (n + 1 + seg,)           # to A[seg]
            if rail == j:
                want[_ip(g, 1)] = (seg + 1,)           # own host, by its B address
        assert {d: f.ports for d, f in flows.items()} == want, f"b{j}"


def test_zcube_policy_concrete_flows_on_a0():
    text = _flows("zcube44", "zcube")["a0"].describe()
    assert "priority=100,ip,nw_dst=10.1.1.5 actions=output:6" in text   # g5: rail 1 -> b1
    assert "priority=100,ip,nw_dst=10.0.1.2 actions=output:3" in text   # g2: own host, port 3
    assert "priority=100,ip,nw_dst=10.1.1.0 actions=output:5" in text   # g0's B address -> b0
    assert not any("nw_dst=10.0.1.5" in t for t in text)                # g5's A address: not via a0


def test_switch_describe_ends_in_a_priority_zero_drop():
    sf = _flows("zcube44", "zcube")["b2"]
    text = sf.describe()
    assert "priority=0 actions=drop" in text
    assert text.count("priority=0 actions=drop") == 1
    assert len(text) == len(sf.flows) + 1
    assert text == sorted(text)
    assert PRIO_MISS == 0


# -- roft ecmp / shortest ---------------------------------------------------------------------

def test_roft_ecmp_leaf_has_one_select_group_over_its_spine_ports():
    sfs = _flows("roft44", "ecmp")
    for leaf in ("l0", "l1", "l2", "l3"):
        sf = sfs[leaf]
        assert sf.groups == {(5, 6, 7, 8): 1}, leaf
        assert sf.describe_groups() == [
            "group_id=1,type=select,bucket=actions=output:5,bucket=actions=output:6,"
            "bucket=actions=output:7,bucket=actions=output:8"]


def test_roft_ecmp_cross_leaf_destinations_use_the_group_local_ones_a_port():
    fab = _fabric("roft44")
    sfs = _flows("roft44", "ecmp")
    for r in range(4):                                  # leaf l<r> serves rank r
        flows = _by_dst(sfs[f"l{r}"])
        assert len(flows) == 16
        for g in range(16):
            srv, rank = divmod(g, 4)
            want = (srv + 1,) if rank == r else (5, 6, 7, 8)
            assert flows[_ip(g, 0)].ports == want, (f"l{r}", g)
        assert all(f.priority == PRIO_DST and f.src is None for f in sfs[f"l{r}"].flows)
    text = sfs["l0"].describe()
    assert "priority=100,ip,nw_dst=10.0.1.5 actions=group:1" in text
    assert "priority=100,ip,nw_dst=10.0.1.4 actions=output:2" in text
    assert fab.kind == "roft"


def test_roft_ecmp_spines_have_single_output_flows_to_the_destination_leaf():
    sfs = _flows("roft44", "ecmp")
    for s in range(4):
        sf = sfs[f"s{s}"]
        assert sf.groups == {}
        flows = _by_dst(sf)
        assert len(flows) == len(sf.flows) == 16
        for g in range(16):
            assert flows[_ip(g, 0)].ports == (1 + g % 4,), (f"s{s}", g)


def test_roft_shortest_adds_source_matched_flows_where_sources_disagree():
    sfs = _flows("roft44", "shortest")
    pair_flows = [f for sf in sfs.values() for f in sf.flows if f.priority == PRIO_PAIR]
    assert pair_flows, "one hashed path per pair must make some sources disagree at a leaf"
    assert PRIO_PAIR > PRIO_DST
    for name, sf in sfs.items():
        dst_flows = _by_dst(sf)
        seen = set()
        for f in sf.flows:
            if f.priority == PRIO_PAIR:
                assert f.src is not None
                assert (f.src, f.dst) not in seen
                seen.add((f.src, f.dst))
                # a pair flow exists only to differ from the destination flow
                assert f.dst in dst_flows and dst_flows[f.dst].ports != f.ports, (name, f)
        if name.startswith("s"):
            assert not seen, f"{name}: a spine has one way to every leaf"
        assert sf.groups == {}          # one path per pair: never a group
    assert any("priority=200,ip,nw_src=" in t for sf in sfs.values() for t in sf.describe())


# -- forwarding simulated from the compiled flows reproduces the route table ---------------------

def _port_maps(fab):
    """(switch, port) -> (peer, peer port), and (host, switch) -> host NIC port, from links."""
    peer, host_port = {}, {}
    for link in fab.links:
        peer[(link.a, link.a_port)] = (link.b, link.b_port)
        peer[(link.b, link.b_port)] = (link.a, link.a_port)
        if fab.is_host(link.a):
            host_port[(link.a, link.b)] = link.a_port
        if fab.is_host(link.b):
            host_port[(link.b, link.a)] = link.b_port
    return peer, host_port


def _lookup(sf, src_ip, dst_ip):
    pair = [f for f in sf.flows if f.priority == PRIO_PAIR and f.src == src_ip and f.dst == dst_ip]
    assert len(pair) <= 1, (sf.switch, pair)
    if pair:
        return pair[0]
    dst = [f for f in sf.flows if f.priority == PRIO_DST and f.src is None and f.dst == dst_ip]
    assert len(dst) <= 1, (sf.switch, dst)
    return dst[0] if dst else None


def _forward(fab, sfs, peer, src, first_sw, src_ip, dst_ip):
    """Every host-to-host walk packets src_ip -> dst_ip can take, following the flows (all
    buckets of a group), starting at the switch the source plugs into."""
    walks = set()
    stack = [(src, first_sw)]
    while stack:
        walk = stack.pop()
        assert len(walk) <= 8, f"forwarding loop or detour: {walk}"
        sw = walk[-1]
        sf = sfs[sw]
        flow = _lookup(sf, src_ip, dst_ip)
        assert flow is not None, f"{sw} drops {src_ip}->{dst_ip} (walk {walk})"
        if len(flow.ports) > 1:
            assert flow.ports in sf.groups, f"{sw}: no group for {flow.ports}"
        for p in flow.ports:
            assert (sw, p) in peer, f"{sw} outputs to uncabled port {p}"
            nxt, nxt_port = peer[(sw, p)]
            if fab.is_host(nxt):
                assert fab.host(nxt).ports[nxt_port].ip == dst_ip, \
                    f"{src_ip}->{dst_ip} delivered to {nxt} port {nxt_port}"
                walks.add(walk + (nxt,))
            else:
                stack.append(walk + (nxt,))
    return walks


SIMULATED = [
    ("zcube44", "zcube"),
    ("zcube44", "zcube-short"),
    ("zcube33", "zcube"),
    ("zcube33", "zcube-short"),
    ("zcube4-par2", "zcube"),
    ("roft44", "shortest"),
    ("roft44", "ecmp"),
    ("fattree4", "ecmp"),
]


@pytest.mark.parametrize("fab_name, policy", SIMULATED, ids=[f"{f}-{p}" for f, p in SIMULATED])
def test_forwarding_by_compiled_flows_reproduces_every_computed_path(fab_name, policy):
    fab, table, sfs = _fabric(fab_name), _table(fab_name, policy), _flows(fab_name, policy)
    peer, host_port = _port_maps(fab)
    n_pairs = 0
    for s, d in table.pairs():
        by_addr = defaultdict(set)
        for path in table.paths(s, d):
            sip = fab.host(s).ports[host_port[(s, path[1])]].ip
            dip = fab.host(d).ports[host_port[(d, path[-2])]].ip
            by_addr[(sip, dip, path[1])].add(tuple(path))
        assert by_addr, (s, d)
        for (sip, dip, first), want in by_addr.items():
            got = _forward(fab, sfs, peer, s, first, sip, dip)
            assert got == want, f"{policy}: {s}->{d} ({sip}->{dip}): flows give {got}, table {want}"
        n_pairs += 1
    assert n_pairs == len(fab.hosts) * (len(fab.hosts) - 1)


@pytest.mark.parametrize("fab_name, policy", SIMULATED, ids=[f"{f}-{p}" for f, p in SIMULATED])
def test_group_ids_are_numbered_from_one_and_cover_every_multi_port_flow(fab_name, policy):
    for name, sf in _flows(fab_name, policy).items():
        assert sorted(sf.groups.values()) == list(range(1, len(sf.groups) + 1)), name
        used = {f.ports for f in sf.flows if len(f.ports) > 1}
        assert used == set(sf.groups), name
        assert all(len(p) > 1 and list(p) == sorted(p) for p in sf.groups), name


# -- parallel cables ----------------------------------------------------------------------------

def test_zcube_parallel_cables_use_a_two_bucket_select_group():
    n, m = 4, 2
    sfs = _flows("zcube4-par2", "zcube")
    for i in range(n):
        sf = sfs[f"a{i}"]
        want_groups = {(n + 1 + j * m, n + 2 + j * m) for j in range(n)}
        assert set(sf.groups) == want_groups, f"a{i}"
        flows = _by_dst(sf)
        for g in range(n * n):
            seg, rail = divmod(g, n)
            assert flows[_ip(g, 1)].ports == (n + 1 + rail * m, n + 2 + rail * m), (f"a{i}", g)
            if seg == i:
                assert flows[_ip(g, 0)].ports == (rail + 1,)
    a0 = sfs["a0"]
    gid = a0.groups[(7, 8)]                                 # a0 -> b1, cables 0 and 1
    assert f"group_id={gid},type=select,bucket=actions=output:7,bucket=actions=output:8" \
        in a0.describe_groups()
    assert f"priority=100,ip,nw_dst=10.1.1.5 actions=group:{gid}" in a0.describe()
    b0 = sfs["b0"]
    assert b0.groups.keys() == {(5, 6), (7, 8), (9, 10), (11, 12)}
    assert _by_dst(b0)[_ip(5, 0)].ports == (7, 8)          # g5: segment 1 -> a1


# -- host configuration -------------------------------------------------------------------------

def test_zcube_policy_hosts_get_one_route_per_plane():
    hcs = _hosts("zcube44", "zcube")
    assert len(hcs) == 16
    for g in range(16):
        hc = hcs[f"g{g}"]
        assert hc.addresses == [(0, _ip(g, 0)), (1, _ip(g, 1))]
        assert sorted(hc.routes) == sorted([("10.1.0.0/16", 0, _ip(g, 0)),
                                            ("10.0.0.0/16", 1, _ip(g, 1))]), hc.host


def test_zcube_policy_hosts_get_a_static_neighbour_for_every_other_address():
    hcs = _hosts("zcube44", "zcube")
    for g in range(16):
        hc = hcs[f"g{g}"]
        want = sorted([(_ip(o, 0), _mac(o, 0), 1) for o in range(16) if o != g]      # A via B port
                      + [(_ip(o, 1), _mac(o, 1), 0) for o in range(16) if o != g])   # B via A port
        assert len(hc.neighbours) == 30
        assert hc.neighbours == want, hc.host


def test_zcube_short_hosts_sharing_a_switch_get_host_routes():
    hcs = _hosts("zcube44", "zcube-short")
    routes = {dst: (port, src) for dst, port, src in hcs["g0"].routes}
    assert routes["10.0.1.1/32"] == (0, "10.0.1.0")      # g1 shares a0: A address, A port
    assert routes["10.1.1.4/32"] == (1, "10.1.1.0")      # g4 shares b0: B address, B port
    assert routes["10.0.1.5/32"] == (1, "10.1.1.0")      # g5 shares nothing: P2 by B port
    assert routes["10.1.1.5/32"] == (0, "10.0.1.0")      # ... and P1 by A port
    assert "10.1.1.1/32" not in routes                    # g1 only by its A address
    assert not any(r.endswith("/16") for r in routes)    # both planes are mixed
    on_a0, on_b0 = {1, 2, 3}, {4, 8, 12}
    want = {f"{_ip(o, 0)}/32": (0, _ip(0, 0)) for o in on_a0}
    want.update({f"{_ip(o, 1)}/32": (1, _ip(0, 1)) for o in on_b0})
    for o in set(range(1, 16)) - on_a0 - on_b0:          # 9 hosts: P1 and P2
        want[f"{_ip(o, 1)}/32"] = (0, _ip(0, 0))
        want[f"{_ip(o, 0)}/32"] = (1, _ip(0, 1))
    assert routes == want
    assert len(routes) == len(hcs["g0"].routes) == 24
    neigh = {ip: (mac, port) for ip, mac, port in hcs["g0"].neighbours}
    assert neigh["10.0.1.1"] == (_mac(1, 0), 0)
    assert neigh["10.1.1.4"] == (_mac(4, 1), 1)
    assert neigh["10.0.1.5"] == (_mac(5, 0), 1)


def test_roft_hosts_get_one_route_by_their_only_port():
    hcs = _hosts("roft44", "ecmp")
    for g in range(16):
        hc = hcs[f"g{g}"]
        assert hc.addresses == [(0, _ip(g, 0))]
        assert hc.routes == [("10.0.0.0/16", 0, _ip(g, 0))]
        assert hc.neighbours == sorted((_ip(o, 0), _mac(o, 0), 0) for o in range(16) if o != g)


# -- parsing ovs-ofctl output ---------------------------------------------------------------------

DUMP_FLOWS = """\
OFPST_FLOW reply (OF1.3) (xid=0x2):
 cookie=0x2c0be00000000001, priority=100,ip,nw_dst=10.1.1.5 actions=output:6
 cookie=0x2c0be00000000001, priority=200,ip,nw_src=10.0.1.0,nw_dst=10.0.1.7 actions=group:1
 cookie=0x2c0be00000000001, priority=0 actions=drop
"""


@pytest.mark.parametrize("line, want", [
    (" cookie=0x2c0be00000000001, priority=100,ip,nw_dst=10.1.1.5 actions=output:6",
     "priority=100,ip,nw_dst=10.1.1.5 actions=output:6"),
    (" cookie=0x2c0be00000000001, priority=200,ip,nw_src=10.0.1.0,nw_dst=10.0.1.7 actions=group:1",
     "priority=200,ip,nw_src=10.0.1.0,nw_dst=10.0.1.7 actions=group:1"),
    (" cookie=0x2c0be00000000001, priority=0 actions=drop", "priority=0 actions=drop"),
    (" cookie=0x2c0be00000000001, duration=12.5s, table=0, n_packets=7, n_bytes=686, "
     "idle_age=3, priority=100,ip,nw_dst=10.1.1.5 actions=output:6",
     "priority=100,ip,nw_dst=10.1.1.5 actions=output:6"),
])
def test_parse_ofctl_flow_canonical_text(line, want):
    assert parse_ofctl_flow(line) == want


@pytest.mark.parametrize("line", ["OFPST_FLOW reply (OF1.3) (xid=0x2):",
                                  "NXST_FLOW reply (xid=0x4):", "", "   "])
def test_parse_ofctl_flow_ignores_headers_and_blank_lines(line):
    assert parse_ofctl_flow(line) is None


def test_parse_ofctl_flow_matches_flow_describe():
    groups = {(5, 6, 7, 8): 1}
    flows = [Flow(100, "10.1.1.5", None, (6,)),
             Flow(200, "10.0.1.7", "10.0.1.0", (5, 6, 7, 8))]
    parsed = [p for p in map(parse_ofctl_flow, DUMP_FLOWS.splitlines()) if p]
    assert len(parsed) == 3
    assert parsed[0] == flows[0].describe(groups)
    assert parsed[1] == flows[1].describe(groups)
    assert parsed[2] == "priority=0 actions=drop"


def test_parsed_dump_of_a_switch_equals_its_description():
    """What check_flows compares: a dump rendered the way ovs-ofctl prints it."""
    sf = _flows("roft44", "shortest")["l0"]

    def ofctl_line(text):
        match, _, action = text.partition(" actions=")
        return f" cookie=0x2c0be00000000001, {match} actions={action}"

    dump = ["OFPST_FLOW reply (OF1.3) (xid=0x2):"] + [ofctl_line(t) for t in sf.describe()]
    assert sorted(p for p in map(parse_ofctl_flow, dump) if p) == sf.describe()
    groups = _flows("roft44", "ecmp")["l0"]
    gdump = ["OFPST_GROUP_DESC reply (OF1.3) (xid=0x2):"] + \
        [" " + t for t in groups.describe_groups()]
    assert [p for p in map(parse_ofctl_group, gdump) if p] == groups.describe_groups()


def test_parse_ofctl_group_canonical_text():
    line = " group_id=1,type=select,bucket=actions=output:3,bucket=actions=output:4"
    assert parse_ofctl_group(line) == \
        "group_id=1,type=select,bucket=actions=output:3,bucket=actions=output:4"
    assert parse_ofctl_group("OFPST_GROUP_DESC reply (OF1.3) (xid=0x2):") is None
    assert parse_ofctl_group("") is None


def test_parse_ofctl_group_equals_describe_groups():
    sf = _flows("zcube4-par2", "zcube")["a0"]
    gid = sf.groups[(7, 8)]
    line = f" group_id={gid},type=select,bucket=actions=output:7,bucket=actions=output:8"
    assert parse_ofctl_group(line) in sf.describe_groups()


@pytest.mark.parametrize("line", [
    (" group_id=1,type=select,bucket=bucket_id:0,actions=output:5,"
     "bucket=bucket_id:1,actions=output:6"),
    (" group_id=1,type=select,bucket=weight:100,actions=output:5,"
     "bucket=weight:100,actions=output:6"),
], ids=["bucket_id", "weight"])
def test_parse_ofctl_group_drops_bucket_ids_and_weights(line):
    assert parse_ofctl_group(line) == \
        "group_id=1,type=select,bucket=actions=output:5,bucket=actions=output:6"
