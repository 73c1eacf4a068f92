"""Builders: ZCube invariants (ZCUBE.md section 2), ROFT, fat tree, checks and refusals.

The invariants are recomputed here from the raw link list, not through the builder's own
``check`` or the Fabric lookups, so a bug shared by builder and checker still shows.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from topologies import Fabric, FabricError, Link, fattree, roft, zcube
from topologies.fattree import check as fattree_check
from topologies.roft import check as roft_check
from topologies.zcube import check as zcube_check

HYP = settings(max_examples=40, deadline=None)


@st.composite
def zcube_args(draw):
    n = draw(st.integers(2, 12))
    gps = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    m = draw(st.integers(1, 3))
    return n, gps, m


@lru_cache(maxsize=None)
def _zc(n, gps, m, nic=400.0):
    return zcube(n, gpus_per_server=gps, parallel=m, nic_gbps=nic)


def _ends(f: Fabric):
    """Per node: list of (my_port, peer) from the raw link list."""
    out: dict[str, list] = {}
    for link in f.links:
        out.setdefault(link.a, []).append((link.a_port, link.b))
        out.setdefault(link.b, []).append((link.b_port, link.a))
    return out


def _kind(name: str) -> str:
    return {"g": "host", "a": "A", "b": "B"}[name[0]]


# -- ZCube invariants ----------------------------------------------------------------------

@HYP
@given(zcube_args())
def test_zcube_each_gpu_has_one_neighbour_in_A_and_one_in_B(args):
    n, gps, m = args
    ends = _ends(_zc(n, gps, m))
    for g in range(n * n):
        peers = [p for _, p in ends[f"g{g}"]]
        assert sorted(_kind(p) for p in peers) == ["A", "B"], (g, peers)


@HYP
@given(zcube_args())
def test_zcube_port0_goes_to_A_seg_and_port1_to_B_rail(args):
    n, gps, m = args
    ends = _ends(_zc(n, gps, m))
    for g in range(n * n):
        assert sorted(ends[f"g{g}"]) == [(0, f"a{g // n}"), (1, f"b{g % n}")]


@HYP
@given(zcube_args())
def test_zcube_each_A_B_pair_shares_exactly_one_gpu(args):
    n, gps, m = args
    ends = _ends(_zc(n, gps, m))
    shared = Counter()
    for g in range(n * n):
        peers = dict((p[0], p) for _, p in ends[f"g{g}"])
        shared[(peers["a"], peers["b"])] += 1
    assert shared == Counter({(f"a{i}", f"b{j}"): 1 for i in range(n) for j in range(n)})


@HYP
@given(zcube_args())
def test_zcube_groups_form_complete_bipartite_graph_with_parallel_cables(args):
    n, gps, m = args
    f = _zc(n, gps, m)
    cables = Counter(tuple(sorted((link.a, link.b))) for link in f.links
                     if not link.a.startswith("g") and not link.b.startswith("g"))
    assert cables == Counter({(f"a{i}", f"b{j}"): m for i in range(n) for j in range(n)})


@HYP
@given(zcube_args())
def test_zcube_links_only_host_to_switch_or_A_to_B(args):
    n, gps, m = args
    f = _zc(n, gps, m)
    kinds = Counter(tuple(sorted((_kind(link.a), _kind(link.b)))) for link in f.links)
    assert kinds == Counter({("A", "host"): n * n, ("B", "host"): n * n, ("A", "B"): n * n * m})


@HYP
@given(zcube_args())
def test_zcube_every_switch_uses_n_plus_n_times_parallel_distinct_ports(args):
    n, gps, m = args
    f = _zc(n, gps, m)
    ends = _ends(f)
    for s in f.switches:
        ports = [p for p, _ in ends[s.name]]
        assert len(ports) == n + n * m
        assert sorted(ports) == list(range(1, n + n * m + 1))   # OpenFlow ports from 1
        if m == 1:
            assert len(ports) == 2 * n


@HYP
@given(zcube_args())
def test_zcube_has_n_squared_hosts_and_2n_switches(args):
    n, gps, m = args
    f = _zc(n, gps, m)
    assert len(f.hosts) == n * n
    assert sorted(h.index for h in f.hosts) == list(range(n * n))
    assert len(f.switches) == 2 * n
    assert Counter(s.group for s in f.switches) == {"A": n, "B": n}


@settings(max_examples=40, deadline=None)
@given(zcube_args(), st.sampled_from([400.0, 100.0, 3.0, 0.5]))
def test_zcube_every_port_and_cable_runs_at_half_the_nic(args, nic):
    n, gps, m = args
    f = _zc(n, gps, m, nic)
    assert all(p.gbps == nic / 2 for h in f.hosts for p in h.ports)
    assert all(link.gbps == nic / 2 for link in f.links)
    assert f.nic_gbps == nic


@HYP
@given(zcube_args())
def test_zcube_server_is_g_div_gps_and_rank_is_g_mod_gps(args):
    n, gps, m = args
    f = _zc(n, gps, m)
    for h in f.hosts:
        assert (h.server, h.rank) == (h.index // gps, h.index % gps)
    assert len(f.servers()) == n * n // gps


def test_zcube_default_gpus_per_server_is_n():
    f = zcube(4)
    assert f.params["gpus_per_server"] == 4
    assert [h.server for h in f.hosts] == [g // 4 for g in range(16)]


def test_zcube_builds_every_divisor_and_parallel_up_to_n12():
    built = 0
    for n in range(2, 13):
        for gps in (d for d in range(1, n + 1) if n % d == 0):
            for m in (1, 2, 3):
                assert len(_zc(n, gps, m).links) == 2 * n * n + n * n * m
                built += 1
    assert built == 34 * 3


# -- ZCube check refuses broken fabrics ----------------------------------------------------

def _rebuilt(f: Fabric, links) -> Fabric:
    return Fabric(f.kind, dict(f.params), list(f.hosts), list(f.switches), list(links),
                  dict(f.meta))


def test_zcube_check_accepts_the_built_fabric():
    zcube_check(zcube(4))


def test_zcube_check_refuses_a_missing_fabric_link():
    f = zcube(4)
    links = [link for link in f.links if (link.a, link.b) != ("a1", "b2")]
    with pytest.raises(FabricError, match="a1-b2 has 0 cables"):
        zcube_check(_rebuilt(f, links))


def test_zcube_check_refuses_a_missing_host_link():
    f = zcube(4)
    links = [link for link in f.links if (link.a, link.a_port) != ("g5", 1)]
    with pytest.raises(FabricError, match="g5 port 1 is not cabled"):
        zcube_check(_rebuilt(f, links))


def test_zcube_check_refuses_a_host_rewired_to_another_B_switch():
    f = zcube(4)
    # g0 (a0, b0) moved to b1 on a spare port: (a0, b1) now shares g0 and g1, (a0, b0) none
    links = [dataclasses.replace(link, b="b1", b_port=99)
             if (link.a, link.a_port) == ("g0", 1) else link
             for link in f.links]
    with pytest.raises(FabricError, match="a0 and b1 share two GPUs"):
        zcube_check(_rebuilt(f, links))


def test_zcube_check_refuses_a_link_inside_a_group():
    f = zcube(4)
    links = f.links + [Link("a0", 50, "a1", 50, 200.0)]
    with pytest.raises(FabricError, match="a0-a1 joins two switches of the same group"):
        zcube_check(_rebuilt(f, links))


def test_zcube_check_refuses_a_missing_parallel_cable():
    f = zcube(3, parallel=2)
    drop = next(link for link in f.links if (link.a, link.b) == ("a2", "b0"))
    links = [link for link in f.links if link is not drop]
    with pytest.raises(FabricError, match="a2-b0 has 1 cables"):
        zcube_check(_rebuilt(f, links))


# -- ROFT ------------------------------------------------------------------------------------

ROFT_CASES = [  # servers, gps, spines, oversubscription, radix
    (4, 4, None, 1, 64),
    (40, 2, None, 1, 16),
    (4, 4, 2, 2, 64),
    (8, 4, None, 2, 64),
    (10, 3, None, 1, 16),
    (6, 2, 3, 1, 64),
    (16, 8, None, 4, 64),
    (9, 2, None, 1, 8),
    (4, 4, None, 0.5, 64),
]
ROFT_IDS = [f"s{c[0]}-g{c[1]}-sp{c[2]}-x{c[3]}-r{c[4]}" for c in ROFT_CASES]


@lru_cache(maxsize=None)
def _roft(servers, gps, spines, x, radix):
    return roft(servers, gps, spines=spines, oversubscription=x, radix=radix)


def _roft_groups(f):
    return {s.name: s for s in f.switches}


@pytest.mark.parametrize("case", ROFT_CASES, ids=ROFT_IDS)
def test_roft_has_servers_times_gps_hosts_with_server_and_rank(case):
    servers, gps = case[0], case[1]
    f = _roft(*case)
    assert len(f.hosts) == servers * gps
    for h in f.hosts:
        assert (h.server, h.rank) == (h.index // gps, h.index % gps)
        assert len(h.ports) == 1


@pytest.mark.parametrize("case", ROFT_CASES, ids=ROFT_IDS)
def test_roft_rank_r_plugs_into_a_rail_r_leaf(case):
    f = _roft(*case)
    sw = _roft_groups(f)
    for link in f.links:
        if link.a.startswith("g"):
            h = f.host(link.a)
            assert sw[link.b].group == "leaf"
            assert dict(sw[link.b].attrs)["rail"] == h.rank, (h.name, link.b)


@pytest.mark.parametrize("case", ROFT_CASES, ids=ROFT_IDS)
def test_roft_every_leaf_cabled_equally_to_every_spine(case):
    f = _roft(*case)
    sw = _roft_groups(f)
    leaves = [s for s in sw.values() if s.group == "leaf"]
    spines = [s for s in sw.values() if s.group == "spine"]
    if case[2] is not None:
        assert len(spines) == case[2]
    cables = Counter((link.a, link.b) for link in f.links if not link.a.startswith("g"))
    assert all(sw[a].group == "leaf" and sw[b].group == "spine" for a, b in cables)
    counts = {cables[(lf.name, sp.name)] for lf in leaves for sp in spines}
    assert len(counts) == 1 and counts.pop() >= 1


@pytest.mark.parametrize("case", ROFT_CASES, ids=ROFT_IDS)
def test_roft_switch_ports_within_radix_and_distinct(case):
    radix = case[4]
    f = _roft(*case)
    ends = _ends(f)
    for s in f.switches:
        ports = [p for p, _ in ends[s.name]]
        assert len(ports) <= radix, s.name
        assert len(set(ports)) == len(ports), s.name
        assert all(1 <= p <= radix for p in ports), s.name


@pytest.mark.parametrize("case", ROFT_CASES, ids=ROFT_IDS)
def test_roft_leaf_uplinks_match_oversubscription(case):
    x = case[3]
    f = _roft(*case)
    sw = _roft_groups(f)
    down, up = Counter(), Counter()
    for link in f.links:
        if link.a.startswith("g"):
            down[link.b] += 1
        else:
            up[link.a] += 1
    busiest = max(down.values())
    for leaf in (s.name for s in sw.values() if s.group == "leaf"):
        assert math.isclose(busiest / up[leaf], x), leaf


def test_roft_adds_leaves_per_rail_when_servers_exceed_leaf_host_ports():
    f = roft(servers=40, gpus_per_server=2, radix=16)    # 8 host ports + 8 uplinks per leaf
    sw = _roft_groups(f)
    leaves_of_rail = Counter(dict(s.attrs)["rail"] for s in sw.values() if s.group == "leaf")
    assert leaves_of_rail == {0: 5, 1: 5}
    hosts_on = Counter(link.b for link in f.links if link.a.startswith("g"))
    assert set(hosts_on.values()) == {8}
    assert len(hosts_on) == 10


def test_roft_single_leaf_per_rail_when_servers_fit():
    f = roft(servers=4, gpus_per_server=4)
    assert Counter(s.group for s in f.switches) == {"leaf": 4, "spine": 4}


def test_roft_check_refuses_a_missing_uplink():
    f = roft(4, 4)
    links = [link for link in f.links if (link.a, link.b) != ("l2", "s1")]
    with pytest.raises(FabricError, match="l2 is not cabled equally to every spine"):
        roft_check(_rebuilt(f, links))


def test_roft_check_refuses_a_host_on_the_wrong_rail():
    f = roft(4, 4)
    # g1 has rank 1; move it to leaf l0 (rail 0) on a spare port
    links = [dataclasses.replace(link, b="l0", b_port=60) if link.a == "g1" else link
             for link in f.links]
    with pytest.raises(FabricError, match=r"g1 \(rank 1\) is on l0, not a rail-1 leaf"):
        roft_check(_rebuilt(f, links))


def test_roft_check_refuses_a_leaf_to_leaf_link():
    f = roft(4, 4)
    links = f.links + [Link("l0", 50, "l1", 50, 400.0)]
    with pytest.raises(FabricError, match="l0-l1 must join a leaf to a spine"):
        roft_check(_rebuilt(f, links))


# -- fat tree --------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fattree_has_k_cubed_over_4_hosts_and_5k2_over_4_switches(k):
    f = fattree(k)
    assert len(f.hosts) == k ** 3 // 4
    assert len(f.switches) == 5 * k * k // 4
    assert Counter(s.group for s in f.switches) == {"edge": k * k // 2, "agg": k * k // 2,
                                                    "core": k * k // 4}


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fattree_every_switch_uses_exactly_k_ports(k):
    f = fattree(k)
    ends = _ends(f)
    for s in f.switches:
        ports = sorted(p for p, _ in ends[s.name])
        assert ports == list(range(1, k + 1)), s.name


def test_fattree_check_refuses_a_missing_core_link():
    f = fattree(4)
    links = [link for link in f.links if (link.a, link.b) != ("p0a0", "c0")]
    with pytest.raises(FabricError, match="uses 3 ports; a k=4 fat tree uses all 4"):
        fattree_check(_rebuilt(f, links))


# -- bad input -------------------------------------------------------------------------------

NAN = float("nan")
BAD_INPUT = [
    (zcube, dict(n=0), "n"),
    (zcube, dict(n=1), "n"),
    (zcube, dict(n=2.5), "n"),
    (zcube, dict(n=True), "n"),
    (zcube, dict(n="4"), "n"),
    (zcube, dict(n=255), "n"),                       # 65,025 GPUs: beyond the address plan
    (zcube, dict(n=4, gpus_per_server=3), "gpus_per_server"),
    (zcube, dict(n=4, gpus_per_server=0), "gpus_per_server"),
    (zcube, dict(n=4, gpus_per_server=True), "gpus_per_server"),
    (zcube, dict(parallel=0), "parallel"),
    (zcube, dict(parallel=True), "parallel"),
    (zcube, dict(nic_gbps=-100), "nic_gbps"),
    (zcube, dict(nic_gbps=0), "nic_gbps"),
    (zcube, dict(nic_gbps=NAN), "nic_gbps"),
    (zcube, dict(nic_gbps=float("inf")), "nic_gbps"),
    (zcube, dict(nic_gbps=True), "nic_gbps"),
    (roft, dict(servers=0), "servers"),
    (roft, dict(servers=True), "servers"),
    (roft, dict(gpus_per_server=0), "gpus_per_server"),
    (roft, dict(oversubscription=0), "oversubscription"),
    (roft, dict(oversubscription=3), "oversubscription"),   # does not divide 4 hosts per leaf
    (roft, dict(oversubscription=NAN), "oversubscription"),
    (roft, dict(spines=3), "spines"),                       # does not divide 4 uplinks
    (roft, dict(spines=0), "spines"),
    (roft, dict(radix=1), "radix"),
    (roft, dict(radix=2), "radix"),                         # 16 leaves cannot fit on a spine
    (roft, dict(nic_gbps=-1), "nic_gbps"),
    (fattree, dict(k=3), "k"),
    (fattree, dict(k=0), "k"),
    (fattree, dict(k=True), "k"),
    (fattree, dict(k=4, gpus_per_server=3), "gpus_per_server"),
    (fattree, dict(nic_gbps=0), "nic_gbps"),
]


@pytest.mark.parametrize("builder, kwargs, param", BAD_INPUT,
                         ids=[f"{b.__name__}-{kw}" for b, kw, _ in BAD_INPUT])
def test_bad_input_raises_fabric_error_naming_parameter(builder, kwargs, param):
    with pytest.raises(FabricError) as err:
        builder(**kwargs)
    assert re.search(rf"(^|[^\w]){param}(=| must)", str(err.value)), str(err.value)


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_non_finite_n_raises_fabric_error_naming_n(value):
    with pytest.raises(FabricError, match=r"\bn must"):
        zcube(n=value)


def test_build_unknown_fabric_names_it():
    with pytest.raises(FabricError, match="unknown fabric 'nope'"):
        topologies.build("nope")


def test_build_passes_parameters_to_the_builder():
    f = topologies.build("zcube", n=3, gpus_per_server=1)
    assert (f.kind, len(f.hosts), f.params["gpus_per_server"]) == ("zcube", 9, 1)


def test_whole_float_n_is_accepted_as_int():
    f = zcube(n=3.0)
    assert f.params["n"] == 3 and isinstance(f.params["n"], int)
