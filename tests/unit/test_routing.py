"""Routing policies (ZCUBE.md section 3): zcube, zcube-short, ecmp, shortest, user policies."""
from __future__ import annotations

import io
import json
import uuid
from collections import Counter
from functools import lru_cache

import networkx as nx
import pytest

from controller.routing import RouteTable, make_policy
from controller.verify import verify
from topologies import FabricError, fattree, roft, zcube

ZN = [2, 3, 4, 5, 6]


@lru_cache(maxsize=None)
def _zc(n):
    return zcube(n)


def _idx(name: str, n: int):
    g = int(name[1:])
    return g // n, g % n          # (i: A index, j: B index)


def _pairs(n):
    N = n * n
    return [(f"g{s}", f"g{d}") for s in range(N) for d in range(N) if s != d]


def _switch_graph(f):
    g = nx.Graph()
    g.add_nodes_from(s.name for s in f.switches)
    g.add_edges_from((link.a, link.b) for link in f.links
                     if f.is_switch(link.a) and f.is_switch(link.b))
    return g


def _edges(path):
    return {frozenset(e) for e in zip(path, path[1:])}


# -- policy zcube ----------------------------------------------------------------------------

@pytest.mark.parametrize("n", ZN)
def test_zcube_policy_gives_P1_and_P2_for_every_ordered_pair(n):
    t = RouteTable(_zc(n), "zcube")
    for s, d in _pairs(n):
        (i, j), (i2, j2) = _idx(s, n), _idx(d, n)
        p1 = (s, f"a{i}", f"b{j2}", d)
        p2 = (s, f"b{j}", f"a{i2}", d)
        got = t.paths(s, d)
        assert len(got) == 2 and set(got) == {p1, p2}, (s, d, got)


@pytest.mark.parametrize("n", ZN)
def test_zcube_P1_leaves_on_port0_and_P2_on_port1(n):
    t = RouteTable(_zc(n), "zcube")
    for s, d in _pairs(n):
        pairings = sorted(t.port_pairing(p) for p in t.paths(s, d))
        assert pairings == [(0, 1), (1, 0)], (s, d)


@pytest.mark.parametrize("n", ZN)
def test_zcube_P1_and_P2_share_no_link(n):
    t = RouteTable(_zc(n), "zcube")
    for s, d in _pairs(n):
        p1, p2 = t.paths(s, d)
        assert not (_edges(p1) & _edges(p2)), (s, d)


@pytest.mark.parametrize("n", ZN)
def test_zcube_each_path_is_the_unique_shortest_for_its_port_pairing(n):
    f = _zc(n)
    g = _switch_graph(f)
    t = RouteTable(f, "zcube")
    for s, d in _pairs(n):
        for p in t.paths(s, d):
            sp, dp = t.port_pairing(p)
            first, last = f.attachment(s, sp)[0], f.attachment(d, dp)[0]
            every = list(nx.all_shortest_paths(g, first, last))
            assert every == [list(p[1:-1])], (s, d, p, every)


# -- policy zcube-short --------------------------------------------------------------------

@pytest.mark.parametrize("n", ZN)
def test_zcube_short_takes_one_switch_shortcut_exactly_when_a_switch_is_shared(n):
    t = RouteTable(_zc(n), "zcube-short")
    for s, d in _pairs(n):
        (i, j), (i2, j2) = _idx(s, n), _idx(d, n)
        if i == i2:
            want = {(s, f"a{i}", d)}
        elif j == j2:
            want = {(s, f"b{j}", d)}
        else:
            want = {(s, f"a{i}", f"b{j2}", d), (s, f"b{j}", f"a{i2}", d)}
        got = t.paths(s, d)
        assert len(got) == len(want) and set(got) == want, (s, d, got)


def test_zcube_short_at_n4_shortcuts_96_pairs_and_stripes_144():
    t = RouteTable(zcube(4), "zcube-short")
    per_pair = Counter(len(t.paths(s, d)) for s, d in t.pairs())
    assert per_pair == {1: 96, 2: 144}


# -- balance under all-to-all --------------------------------------------------------------

@pytest.mark.parametrize("n", ZN)
def test_zcube_all_to_all_crosses_every_directed_fabric_link_with_n2_minus_1_pairs(n):
    rep = verify(RouteTable(_zc(n), "zcube"), "all-to-all")
    for cls in ("A->B", "B->A"):
        st = rep.loads[cls]
        assert st["links"] == n * n
        assert st["pairs_min"] == st["pairs_max"] == n * n - 1, (cls, st)
        assert st["max"] == pytest.approx((n * n - 1) / 2)
        assert st["mean"] == pytest.approx((n * n - 1) / 2)
        assert st["jain"] == pytest.approx(1.0)


@pytest.mark.parametrize("n", ZN)
def test_zcube_all_to_all_pair_count_per_directed_link_counted_independently(n):
    f = _zc(n)
    t = RouteTable(f, "zcube")
    crossing = Counter()
    for s, d in _pairs(n):
        hops = {(u, v) for p in t.paths(s, d) for u, v in zip(p, p[1:])
                if f.is_switch(u) and f.is_switch(v)}
        crossing.update(hops)
    want = {(f"a{i}", f"b{j}") for i in range(n) for j in range(n)}
    want |= {(b, a) for a, b in want}
    assert set(crossing) == want
    assert set(crossing.values()) == {n * n - 1}


# -- ecmp and shortest ---------------------------------------------------------------------

def _rail_leaf(f, host):
    return f.attachment(host, 0)[0]


def test_ecmp_roft_cross_rail_pair_has_one_path_per_spine():
    f = roft(4, 4)
    t = RouteTable(f, "ecmp")
    spines = sorted(s.name for s in f.switches if s.group == "spine")
    checked = 0
    for s, d in t.pairs():
        if f.host(s).rank != f.host(d).rank:
            got = t.paths(s, d)
            ls, ld = _rail_leaf(f, s), _rail_leaf(f, d)
            assert sorted(got) == [(s, ls, sp, ld, d) for sp in spines], (s, d)
            checked += 1
    assert checked == 16 * 12


def test_ecmp_roft_same_leaf_pair_has_one_path_through_the_leaf():
    f = roft(4, 4)
    t = RouteTable(f, "ecmp")
    checked = 0
    for s, d in t.pairs():
        if f.host(s).rank == f.host(d).rank:
            assert t.paths(s, d) == [(s, _rail_leaf(f, s), d)]
            checked += 1
    assert checked == 16 * 3


def test_ecmp_roft_two_spines_oversubscribed_gives_two_paths():
    f = roft(4, 4, spines=2, oversubscription=2)
    t = RouteTable(f, "ecmp")
    counts = Counter(len(t.paths(s, d)) for s, d in t.pairs()
                     if f.host(s).rank != f.host(d).rank)
    assert counts == {2: 16 * 12}


def _ft_place(name, half=2):
    g = int(name[1:])
    return g // (half * half), g // half      # (pod, global edge)


@pytest.mark.parametrize("relation, want", [("inter-pod", 4), ("intra-pod", 2), ("same-edge", 1)])
def test_ecmp_fattree4_path_counts(relation, want):
    f = fattree(4)
    t = RouteTable(f, "ecmp")
    seen = 0
    for s, d in t.pairs():
        (ps, es), (pd, ed) = _ft_place(s), _ft_place(d)
        rel = "same-edge" if es == ed else "intra-pod" if ps == pd else "inter-pod"
        if rel == relation:
            paths = t.paths(s, d)
            assert len(paths) == want and len(set(paths)) == want, (s, d, paths)
            assert {len(p) for p in paths} == {{4: 7, 2: 5, 1: 3}[want]}
            seen += 1
    assert seen > 0


def test_ecmp_on_zcube_equals_zcube_short():
    f = zcube(4)
    e, z = RouteTable(f, "ecmp"), RouteTable(f, "zcube-short")
    for s, d in e.pairs():
        assert sorted(e.paths(s, d)) == sorted(z.paths(s, d)), (s, d)


@pytest.mark.parametrize("fab", [lambda: roft(4, 4), lambda: fattree(4), lambda: zcube(4)],
                         ids=["roft", "fattree", "zcube"])
def test_shortest_returns_exactly_one_of_the_ecmp_paths(fab):
    f = fab()
    e, s1 = RouteTable(f, "ecmp"), RouteTable(f, "shortest")
    for s, d in e.pairs():
        got = s1.paths(s, d)
        assert len(got) == 1 and got[0] in e.paths(s, d), (s, d, got)


@pytest.mark.parametrize("fab", [lambda: roft(4, 4), lambda: fattree(4)], ids=["roft", "fattree"])
def test_shortest_is_deterministic_across_tables(fab):
    a, b = RouteTable(fab(), "shortest"), RouteTable(fab(), "shortest")
    assert [a.paths(s, d) for s, d in a.pairs()] == [b.paths(s, d) for s, d in b.pairs()]


# -- policy selection ----------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["zcube", "zcube-short"])
@pytest.mark.parametrize("fab", [lambda: roft(4, 4), lambda: fattree(4)], ids=["roft", "fattree"])
def test_zcube_policies_refuse_non_zcube_fabrics(policy, fab):
    with pytest.raises(FabricError, match=f"policy {policy} needs a zcube fabric"):
        RouteTable(fab(), policy)


def test_unknown_policy_raises_naming_it():
    with pytest.raises(FabricError, match="unknown policy 'nope'"):
        RouteTable(zcube(2), "nope")


def test_default_policy_is_zcube_on_zcube_and_ecmp_elsewhere():
    assert RouteTable(zcube(2)).policy_name == "zcube"
    assert RouteTable(roft(2, 2)).policy_name == "ecmp"
    assert RouteTable(fattree(4)).policy_name == "ecmp"


def _user_module(tmp_path, monkeypatch, body):
    name = f"userpol_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


P1_ONLY = '''
VALUE = 3

def p1(fabric, src, dst):
    return [[src, fabric.attachment(src, 0)[0], fabric.attachment(dst, 1)[0], dst]]
'''


def test_user_policy_module_function_is_used(tmp_path, monkeypatch):
    mod = _user_module(tmp_path, monkeypatch, P1_ONLY)
    t = RouteTable(zcube(4), f"{mod}:p1")
    assert t.policy_name == f"{mod}:p1"
    assert t.paths("g0", "g5") == [("g0", "a0", "b1", "g5")]
    assert t.paths("g7", "g2") == [("g7", "a1", "b2", "g2")]


def test_user_policy_missing_module_raises():
    with pytest.raises(FabricError, match="no module 'no_such_mod_zq' in .* or on the Python path"):
        RouteTable(zcube(2), "no_such_mod_zq:route")


def test_user_policy_missing_function_raises(tmp_path, monkeypatch):
    mod = _user_module(tmp_path, monkeypatch, P1_ONLY)
    with pytest.raises(FabricError, match=f"'{mod}' has no 'route'"):
        RouteTable(zcube(2), f"{mod}:route")


def test_user_policy_non_callable_raises(tmp_path, monkeypatch):
    mod = _user_module(tmp_path, monkeypatch, P1_ONLY)
    with pytest.raises(FabricError, match="'VALUE' is not callable"):
        RouteTable(zcube(2), f"{mod}:VALUE")


def test_user_policy_empty_module_name_raises_fabric_error():
    with pytest.raises(FabricError):
        make_policy(":route", zcube(2))


# -- export --------------------------------------------------------------------------------

@pytest.mark.parametrize("fab, policy", [(lambda: zcube(3), "zcube"),
                                         (lambda: zcube(3), "zcube-short"),
                                         (lambda: roft(2, 2), "ecmp")],
                         ids=["zcube", "zcube-short", "roft-ecmp"])
def test_write_json_streams_the_same_document_as_to_json_dict(fab, policy):
    t = RouteTable(fab(), policy)
    buf = io.StringIO()
    t.write_json(buf)
    assert json.loads(buf.getvalue()) == t.to_json_dict()


def test_to_json_dict_lists_every_ordered_pair_with_its_paths():
    t = RouteTable(zcube(2), "zcube")
    d = t.to_json_dict()
    assert d["policy"] == "zcube"
    assert len(d["pairs"]) == 4 * 3
    first = d["pairs"][0]
    assert first == {"src": "g0", "dst": "g1",
                     "paths": [["g0", "a0", "b1", "g1"], ["g0", "b0", "a0", "g1"]]}
