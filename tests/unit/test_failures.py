"""Failure handling, pure half: route tables around failed cables, NIC ports and switches."""
from __future__ import annotations

from functools import lru_cache

import pytest

from controller.failures import Damage, Failures, cable_at, switch_ports
from controller.routing import RouteTable
from controller.verify import verify
from topologies import FabricError, fattree, roft, zcube

FABRICS = {
    "zcube44": lambda: zcube(4, 4),
    "zcube33": lambda: zcube(3, 3),
    "zcube4-par2": lambda: zcube(4, parallel=2),
    "roft44": lambda: roft(4, 4),
    "roft44-sp2": lambda: roft(4, 4, spines=2),      # two cables from every leaf to a spine
    "fattree4": lambda: fattree(4),
}
POLICIES = {"zcube44": ["zcube", "zcube-short", "ecmp", "shortest"],
            "zcube33": ["zcube", "zcube-short"], "zcube4-par2": ["zcube"],
            "roft44": ["ecmp", "shortest"], "roft44-sp2": ["ecmp"], "fattree4": ["ecmp"]}
CASES = [(f, p) for f, ps in POLICIES.items() for p in ps]


@lru_cache(maxsize=None)
def _fab(name):
    return FABRICS[name]()


@lru_cache(maxsize=None)
def _base(name, policy):
    return RouteTable(_fab(name), policy)


def _all_paths(table):
    return {(s, d): table.paths(s, d) for s, d in table.pairs()}


def _zpos(host, n):
    """(A index, B index) of a zcube GPU, from its number."""
    return divmod(int(host[1:]), n)


def _hops(path):
    return {frozenset(h) for h in zip(path, path[1:])}


def _fail(name, *items):
    return Failures.parse(_fab(name), items)


# -- describing failures ---------------------------------------------------------------------

def test_parse_names_cables_ports_and_switches():
    f = _fab("zcube44")
    got = Failures.parse(f, ["a2", "g3:1", "a0:6", "b1-a3", "a1:5-b0:6"])
    assert got.switches == {"a2"}
    assert cable_at(f, "g3", 1) in got.links                         # NIC port 1 of g3
    assert cable_at(f, "a0", 6) == cable_at(f, "b1", 5) and cable_at(f, "a0", 6) in got.links
    assert cable_at(f, "a3", 6) in got.links                         # a3 port 5 + 1 = b1
    assert cable_at(f, "a1", 5) in got.links
    assert len(got.links) == 4
    assert got.describe(f) == {"switches": ["a2"], "host_ports": ["g3:1"],
                               "links": ["a0:6-b1:5", "a1:5-b0:6", "a3:6-b1:8"]}
    assert Failures.parse(f, got.describe(f)["links"] + ["g3:1", "a2"]) == got


def test_parse_between_nodes_takes_every_parallel_cable():
    f = _fab("zcube4-par2")
    got = Failures.parse(f, ["a0-b1"])
    assert {(link.a, link.a_port, link.b, link.b_port) for link in got.links} == {
        ("a0", 7, "b1", 5), ("a0", 8, "b1", 6)}


@pytest.mark.parametrize("text", ["zz", "g3", "g3:7", "a0:99", "a0-a1", "a0:6-b2:5", "a0:6-b1",
                                  "a0:x"])
def test_parse_refuses_what_the_fabric_lacks(text):
    with pytest.raises(FabricError):
        Failures.parse(_fab("zcube44"), [text])


def test_failures_of_another_fabric_are_refused():
    with pytest.raises(FabricError, match="not in this"):
        RouteTable(_fab("zcube33"), "zcube", _fail("zcube44", "a3-b3"))
    with pytest.raises(FabricError):
        RouteTable(_fab("zcube33"), "zcube", Failures(switches={"a3"}))


def test_empty_failures_are_falsy_and_combine():
    f = _fab("zcube44")
    assert not Failures() and Failures(switches={"a1"})
    both = Failures.parse(f, ["a1"]) | Failures.parse(f, ["g0:0"])
    assert both == Failures.parse(f, ["g0:0", "a1"])


def test_a_dead_switch_kills_every_cable_at_it():
    f = _fab("zcube44")
    dmg = Damage(f, Failures(switches={"b2"}))
    assert dmg.cables == {link for link in f.links if "b2" in (link.a, link.b)}
    assert all(not dmg.hop_ok("b2", peer) and not dmg.hop_ok(peer, "b2")
               for _, peer, _, _ in f.neighbors("b2"))
    assert dmg.hop_ok("a0", "b1")


def test_one_of_two_parallel_cables_dead_keeps_the_hop():
    f = _fab("zcube4-par2")
    dmg = Damage(f, _fail("zcube4-par2", "a0:7"))
    assert dmg.hop_ok("a0", "b1") and dmg.live_ports("a0", "b1") == [(8, 6)]
    assert dmg.live_ports("b1", "a0") == [(6, 8)]
    dmg2 = Damage(f, _fail("zcube4-par2", "a0-b1"))
    assert not dmg2.hop_ok("a0", "b1") and dmg2.live_ports("a0", "b1") == []


# -- no failures: the original table -----------------------------------------------------------

@pytest.mark.parametrize("fab, policy", CASES, ids=[f"{f}-{p}" for f, p in CASES])
def test_no_failures_give_the_original_table(fab, policy):
    base = _base(fab, policy)
    for failed in (None, Failures()):
        t = RouteTable(_fab(fab), policy, failed)
        assert t.damage is None and not t.failed
        assert _all_paths(t) == _all_paths(base)
        assert t.disconnected() == []
        assert all(t.claims(s, d) == base.claims(s, d) for s, d in base.pairs())
    assert _all_paths(base.with_failures(None)) == _all_paths(base)


# -- zcube ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("i, j", [(0, 0), (1, 2), (3, 1)])
def test_zcube_fabric_cable_failure_moves_its_pairs_to_the_other_plane(i, j):
    n = 4
    base = _base("zcube44", "zcube")
    t = base.with_failures(_fail("zcube44", f"a{i}-b{j}"))
    affected = 0
    for s, d in base.pairs():
        (si, sj), (di, dj) = _zpos(s, n), _zpos(d, n)
        p1, p2 = (s, f"a{si}", f"b{dj}", d), (s, f"b{sj}", f"a{di}", d)
        p1_dead = (si, dj) == (i, j)
        p2_dead = (di, sj) == (i, j)
        assert not (p1_dead and p2_dead)
        want = [p2] if p1_dead else [p1] if p2_dead else base.paths(s, d)
        affected += p1_dead or p2_dead
        assert t.paths(s, d) == want, (s, d)
    assert affected == 2 * (n * n - 1)
    assert t.disconnected() == []
    rep = verify(t)
    assert rep.ok, rep.violations
    assert rep.hops == {2: 480 - affected}


def test_zcube_both_planes_dead_use_three_switch_detours_on_one_plane_each():
    t = _base("zcube44", "zcube").with_failures(_fail("zcube44", "a0-b1", "b0-a1"))
    # g0 = (0, 0), g5 = (1, 1): P1 g0-a0-b1-g5 and P2 g0-b0-a1-g5 both dead
    want_05 = {("g0", "a0", "b2", "a1", "g5"), ("g0", "a0", "b3", "a1", "g5"),
               ("g0", "b0", "a2", "b1", "g5"), ("g0", "b0", "a3", "b1", "g5")}
    assert set(t.paths("g0", "g5")) == want_05
    assert set(t.paths("g5", "g0")) == {("g5", "a1", f"b{x}", "a0", "g0") for x in (2, 3)} \
        | {("g5", "b1", f"a{x}", "b0", "g0") for x in (2, 3)}
    for p in t.paths("g0", "g5"):
        # a detour that leaves by the A port arrives at the A port: one address plane
        assert t.port_pairing(p) in {(0, 0), (1, 1)}
    detoured = [(s, d) for s, d in t.pairs() if any(len(p) == 5 for p in t.paths(s, d))]
    assert sorted(detoured) == [("g0", "g5"), ("g5", "g0")]
    rep = verify(t)
    assert rep.ok, rep.violations
    assert rep.hops[3] == 8 and max(rep.hops) == 3


def test_zcube_pair_sharing_a_switch_falls_back_to_the_shortcut():
    # g0 = (0, 0) and g1 = (0, 1) share a0; P1 crosses a0-b1, P2 crosses b0-a0
    t = _base("zcube44", "zcube").with_failures(_fail("zcube44", "a0-b1", "a0-b0"))
    assert t.paths("g0", "g1") == [("g0", "a0", "g1")]
    assert verify(t).ok


def test_zcube_short_dead_shortcut_falls_back_to_p1_p2():
    t = _base("zcube44", "zcube-short").with_failures(_fail("zcube44", "g1:0"))
    # g0 and g1 share a0; the shortcut ends on g1's dead A port
    assert t.paths("g0", "g1") == [("g0", "a0", "b1", "g1")]       # P1; P2 ends at g1.A
    assert t.paths("g1", "g0") == [("g1", "b1", "a0", "g0")]
    assert verify(t).ok


def test_zcube_detours_when_the_other_plane_is_cut_at_both_ends():
    # g0's A port and g5's A port dead: P1 leaves by g0.A, P2 arrives at g5.A
    t = _base("zcube44", "zcube").with_failures(_fail("zcube44", "g0:0", "g5:0"))
    assert set(t.paths("g0", "g5")) == {("g0", "b0", f"a{x}", "b1", "g5") for x in range(4)}
    # g4 = (1, 0) shares b0 with g0: the shortcut beats a detour
    assert t.paths("g0", "g4") == [("g0", "b0", "a1", "g4")]
    t2 = t.with_failures(_fail("zcube44", "g0:0", "g4:0"))
    assert t2.paths("g0", "g4") == [("g0", "b0", "g4")]
    assert verify(t).ok and verify(t2).ok


def test_zcube_switch_failure():
    n = 4
    base = _base("zcube44", "zcube")
    t = base.with_failures(Failures(switches={"a0"}))
    assert t.disconnected() == []
    for s, d in base.pairs():
        paths = t.paths(s, d)
        assert paths and all("a0" not in p for p in paths), (s, d)
        (si, _), (di, _) = _zpos(s, n), _zpos(d, n)
        if si == 0 and di == 0:         # both on a0: B -> A -> B detours over a1..a3
            assert len(paths) == n - 1 and all(len(p) == 5 and p[1][0] == "b" for p in paths)
        elif si == 0:                    # leaves by its B port only (P2)
            assert paths == [base.paths(s, d)[1]]
        elif di == 0:                    # arrives at its B port only (P1)
            assert paths == [base.paths(s, d)[0]]
        else:
            assert paths == base.paths(s, d)
    assert verify(t).ok


def test_zcube_host_port_failure_moves_the_hosts_pairs_to_the_other_port():
    base = _base("zcube44", "zcube")
    t = base.with_failures(_fail("zcube44", "g5:1"))
    for s, d in base.pairs():
        got = t.paths(s, d)
        if s == "g5":
            assert {t.port_pairing(p)[0] for p in got} == {0}
            assert got == [base.paths(s, d)[0]]
        elif d == "g5":
            assert {t.port_pairing(p)[1] for p in got} == {0}
            assert got == [base.paths(s, d)[1]]
        else:
            assert got == base.paths(s, d)
    assert verify(t).ok


def test_zcube_host_cut_off_is_reported():
    t = _base("zcube44", "zcube").with_failures(_fail("zcube44", "g7:0", "g7:1"))
    cut = t.disconnected()
    assert sorted(cut) == sorted([("g7", f"g{x}") for x in range(16) if x != 7]
                                 + [(f"g{x}", "g7") for x in range(16) if x != 7])
    rep = verify(t)
    assert rep.ok and rep.violations_total == 0
    assert rep.disconnected == 30 and len(rep.disconnected_pairs) == 10
    assert "cut off 30 pair(s)" in rep.to_text()


def test_zcube_parallel_cable_failure_keeps_paths():
    base = _base("zcube4-par2", "zcube")
    t = base.with_failures(_fail("zcube4-par2", "a0:7"))
    assert _all_paths(t) == _all_paths(base)
    assert t.live_ports("a0", "b1") == [(8, 6)]
    assert base.live_ports("a0", "b1") == [(7, 5), (8, 6)]


# -- ecmp / roft ---------------------------------------------------------------------------------

def test_roft_dead_leaf_spine_cable_is_dropped_from_the_ecmp_sets():
    base = _base("roft44", "ecmp")
    t = base.with_failures(_fail("roft44", "l0-s1"))
    changed = 0
    for s, d in base.pairs():
        want = [p for p in base.paths(s, d) if frozenset(("l0", "s1")) not in _hops(p)]
        assert t.paths(s, d) == want, (s, d)
        changed += want != base.paths(s, d)
        assert len(want) in (1, 3, 4)
    assert changed == 2 * 4 * 12      # l0's four hosts to and from the twelve elsewhere
    assert verify(t).ok


def test_roft_shortest_moves_a_dead_hashed_path_to_another_surviving_one():
    base = _base("roft44", "shortest")
    t = base.with_failures(_fail("roft44", "l0-s1"))
    moved = 0
    for s, d in base.pairs():
        (old,), (new,) = base.paths(s, d), t.paths(s, d)
        if frozenset(("l0", "s1")) in _hops(old):
            moved += 1
            assert len(new) == len(old) and frozenset(("l0", "s1")) not in _hops(new)
        else:
            assert new == old
    assert moved > 0 and verify(t).ok


def test_ecmp_with_no_shortest_path_left_takes_the_shortest_surviving_one():
    # l0 keeps only s3, l1 loses s3: l0 -> l1 must cross another leaf
    t = _base("roft44", "ecmp").with_failures(_fail("roft44", "l0-s0", "l0-s1", "l0-s2",
                                                     "l1-s3"))
    paths = t.paths("g0", "g1")            # g0 on l0, g1 on l1
    assert paths and {len(p) for p in paths} == {7}
    assert {p[1:6] for p in paths} == {("l0", "s3", leaf, spine, "l1")
                                       for leaf in ("l2", "l3") for spine in ("s0", "s1", "s2")}
    assert t.disconnected() == []
    assert verify(t).ok


def test_roft_leaf_cut_off_from_every_spine_reports_its_pairs():
    t = _base("roft44", "ecmp").with_failures(Failures(switches={"s0", "s1", "s2", "s3"}))
    cut = set(t.disconnected())
    # only pairs on the same leaf (same rank) still talk: host g on leaf l<g % 4>
    want = {(s, d) for s, d in t.pairs() if int(s[1:]) % 4 != int(d[1:]) % 4}
    assert cut == want
    assert all(len(t.paths(s, d)) == 1 for s, d in t.pairs() if (s, d) not in cut)


def test_roft_parallel_spine_cable_failure_keeps_paths_and_drops_a_port():
    base = _base("roft44-sp2", "ecmp")
    t = base.with_failures(_fail("roft44-sp2", "l0:5"))
    assert _all_paths(t) == _all_paths(base)
    assert [p for p, _ in t.live_ports("l0", "s0")] == [6]


def test_fattree_core_failure_keeps_every_pair():
    t = _base("fattree4", "ecmp").with_failures(Failures(switches={"c0"}))
    assert t.disconnected() == [] and verify(t).ok
    assert all("c0" not in p for s, d in t.pairs() for p in t.paths(s, d))


# -- restore ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fab, policy", CASES, ids=[f"{f}-{p}" for f, p in CASES])
def test_restoring_everything_gives_back_the_original(fab, policy):
    base = _base(fab, policy)
    f = _fab(fab)
    broken = base.with_failures(Failures({f.links[0], next(f.switch_links())},
                                         {f.switches[-1].name}))
    assert _all_paths(broken) != _all_paths(base)
    assert _all_paths(broken.with_failures(Failures())) == _all_paths(base)


# -- port-status mapping -------------------------------------------------------------------------

@pytest.mark.parametrize("fab", list(FABRICS))
def test_every_switch_port_maps_to_its_cable(fab):
    f = _fab(fab)
    ports = switch_ports(f)
    ends = 0
    for link in f.links:
        for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
            if f.is_switch(node):
                ends += 1
                assert ports[(f.switch(node).dpid, port)] == (node, link)
                assert cable_at(f, node, port) == link
    assert len(ports) == ends


# -- flows: compiled around failures, and the differences -----------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from controller.flowdiff import (  # noqa: E402
    apply_host_diff,
    apply_message,
    apply_switch_diff,
    diff_host_config,
    diff_switch,
    diff_switch_flows,
    switch_state,
)
from controller.flows import PRIO_DST, PRIO_PAIR, compile_host_config, compile_switch_flows  # noqa: E402


@lru_cache(maxsize=None)
def _base_flows(name, policy):
    return compile_switch_flows(_base(name, policy))


@lru_cache(maxsize=None)
def _base_hosts(name, policy):
    return compile_host_config(_base(name, policy))


def _walks(fab, table, flows, src, dst_ip, src_ip, first):
    """Every walk packets src_ip -> dst_ip take from switch ``first`` by the compiled flows
    (all buckets of a group); asserts they never leave by a dead cable or loop."""
    dead = table.damage.cables if table.damage else frozenset()
    out, stack = set(), [(src, first)]
    while stack:
        walk = stack.pop()
        assert len(walk) <= 10, f"loop: {walk}"
        sw = walk[-1]
        state = switch_state(flows[sw])
        action = state.flows.get((PRIO_PAIR, src_ip, dst_ip)) or \
            state.flows.get((PRIO_DST, None, dst_ip))
        assert action is not None, f"{sw} drops {src_ip}->{dst_ip} ({walk})"
        ports = (action[1],) if action[0] == "output" else state.groups[action[1]]
        for port in ports:
            link = cable_at(fab, sw, port)
            assert link not in dead, f"{sw} sends {src_ip}->{dst_ip} into dead {link}"
            nxt, nxt_port = ((link.b, link.b_port) if (link.a, link.a_port) == (sw, port)
                             else (link.a, link.a_port))
            if fab.is_host(nxt):
                assert fab.host(nxt).ports[nxt_port].ip == dst_ip
                out.add(walk + (nxt,))
            else:
                stack.append(walk + (nxt,))
    return out


def _check_forwarding(table, flows):
    fab = table.fabric
    for s, d in table.pairs():
        by_addr: dict = {}
        for p in table.paths(s, d):
            sp, dp = table.port_pairing(p)
            key = (fab.host(s).ports[sp].ip, fab.host(d).ports[dp].ip, p[1])
            by_addr.setdefault(key, set()).add(tuple(p))
        for (sip, dip, first), want in by_addr.items():
            assert _walks(fab, table, flows, s, dip, sip, first) == want, (s, d, sip, dip)


FAILURE_SETS = [("zcube44", "zcube", ("a0-b1",)), ("zcube44", "zcube", ("a0-b1", "b0-a1")),
                ("zcube44", "zcube", ("a2",)), ("zcube44", "zcube-short", ("g1:0", "b3")),
                ("zcube44", "zcube", ("g0:0", "g5:0")), ("zcube4-par2", "zcube", ("a0:7", "b2")),
                ("roft44", "ecmp", ("l0-s1",)), ("roft44", "shortest", ("l0-s1", "s2")),
                ("roft44", "ecmp", ("l0-s0", "l0-s1", "l0-s2", "l1-s3")),
                ("roft44-sp2", "ecmp", ("l0:5", "l3:8")),
                ("fattree4", "ecmp", ("c0", "p0a0", "p1e0-p1a1"))]


@pytest.mark.parametrize("fab, policy, items", FAILURE_SETS,
                         ids=[f"{f}-{p}-{'+'.join(i)}" for f, p, i in FAILURE_SETS])
def test_flows_around_failures_forward_exactly_the_table_and_never_into_dead_cables(
        fab, policy, items):
    t = _base(fab, policy).with_failures(_fail(fab, *items))
    _check_forwarding(t, compile_switch_flows(t))


def test_no_failures_compile_the_original_flows_and_hosts():
    for fab, policy in CASES:
        t = RouteTable(_fab(fab), policy, Failures())
        assert compile_switch_flows(t) == _base_flows(fab, policy)
        assert compile_host_config(t) == _base_hosts(fab, policy)
        assert diff_switch_flows(_base_flows(fab, policy), compile_switch_flows(t)) == {}


def test_roft_dead_spine_cable_is_a_group_modify_on_its_leaf():
    old = _base_flows("roft44", "ecmp")
    new = compile_switch_flows(_base("roft44", "ecmp").with_failures(_fail("roft44", "l0-s1")))
    diffs = diff_switch_flows(old, new)
    l0 = diffs["l0"]
    assert l0.groups_modify == [(1, (5, 7, 8))]          # the bucket to s1 (port 6) is gone
    assert l0.flow_mods == 0 and l0.group_mods == 1
    s1 = diffs["s1"]                                     # s1 no longer reaches l0's hosts
    assert s1.flows_delete == [(PRIO_DST, None, f"10.0.1.{g}") for g in (0, 12, 4, 8)]
    assert s1.group_mods == 0 and s1.flow_mods == 4
    assert set(diffs) == {"l0", "l1", "l2", "l3", "s1"}


def test_a_group_id_changing_meaning_never_lends_its_buckets_to_other_flows():
    # on l1, group 1 was every spine; now the first destination (on l0) needs 5, 7, 8, so
    # group 1 becomes that and the others move to a new group 2 before it changes
    old = _base_flows("roft44", "ecmp")["l1"]
    new = compile_switch_flows(_base("roft44", "ecmp").with_failures(
        _fail("roft44", "l0-s1")))["l1"]
    d = diff_switch(old, new)
    assert d.groups_add == [(2, (5, 6, 7, 8))] and d.groups_modify == [(1, (5, 7, 8))]
    assert len(d.flows_early) == 8 and d.flows_modify == []
    assert all(a == ("group", 2) for *_, a in d.flows_early)
    msgs = d.messages()
    assert msgs[0][:2] == ("group", "add") and msgs[-1][:2] == ("group", "modify")


def test_a_flow_moving_between_two_changing_groups_rides_a_temporary_copy():
    from controller.flows import Flow, SwitchFlows
    old = SwitchFlows("x", 1, [Flow(PRIO_DST, "10.0.1.1", None, (1, 2)),
                               Flow(PRIO_DST, "10.0.1.2", None, (3, 4))],
                      {(1, 2): 1, (3, 4): 2})
    new = SwitchFlows("x", 1, [Flow(PRIO_DST, "10.0.1.1", None, (7, 8)),
                               Flow(PRIO_DST, "10.0.1.2", None, (5, 6))],
                      {(5, 6): 1, (7, 8): 2})
    d = diff_switch(old, new)
    assert d.groups_add == [(3, (1, 2)), (4, (3, 4))]           # copies of the old buckets
    assert d.flows_early == [(PRIO_DST, None, "10.0.1.1", ("group", 3)),
                             (PRIO_DST, None, "10.0.1.2", ("group", 4))]
    assert d.groups_modify == [(1, (5, 6)), (2, (7, 8))]
    assert d.flows_modify == [(PRIO_DST, None, "10.0.1.1", ("group", 2)),
                              (PRIO_DST, None, "10.0.1.2", ("group", 1))]
    assert d.groups_delete == [3, 4] and d.flows_add == d.flows_delete == []
    _check_diff({"x": old}, {"x": new})


def test_apply_refuses_what_a_switch_would_refuse():
    from controller.flowdiff import SwitchState
    s = SwitchState({(PRIO_DST, None, "10.0.1.1"): ("group", 1)}, {1: (1, 2)})
    with pytest.raises(ValueError, match="existing"):
        apply_message(s, ("group", "add", 1, (3,)))
    with pytest.raises(ValueError, match="unknown"):
        apply_message(s, ("group", "modify", 2, (3,)))
    with pytest.raises(ValueError, match="missing group"):
        apply_message(s, ("flow", "add", PRIO_DST, None, "10.0.1.2", ("group", 9)))
    with pytest.raises(ValueError, match="missing"):
        apply_message(s, ("flow", "delete", PRIO_DST, None, "10.0.1.2"))
    # deleting a group takes the flows using it along, as OpenFlow does
    assert apply_message(s, ("group", "delete", 1)) == SwitchState({}, {})


def _buckets(state, action):
    return (action[1],) if action[0] == "output" else state.groups[action[1]]


def _check_diff(old, new):
    """apply(old, diff) == new, and while the messages arrive every flow forwards as it did
    or as it will; also back again."""
    for a, b in ((old, new), (new, old)):
        diffs = diff_switch_flows(a, b)
        for name in b:
            sa, sb = switch_state(a[name]), switch_state(b[name])
            if name not in diffs:
                assert sa == sb
                continue
            state = sa
            for msg in diffs[name].messages():
                state = apply_message(state, msg, name)
                for key, act in state.flows.items():
                    now = _buckets(state, act)
                    allowed = {_buckets(s, s.flows[key]) for s in (sa, sb) if key in s.flows}
                    assert now in allowed, (name, msg, key, now, allowed)
            assert state == sb, name
            assert apply_switch_diff(sa, diffs[name]) == sb


def _failure_strategy(name):
    f = _fab(name)
    return st.builds(Failures,
                     st.sets(st.sampled_from(f.links), max_size=6),
                     st.sets(st.sampled_from([s.name for s in f.switches]), max_size=2))


PROPERTY = [("zcube33", "zcube"), ("zcube33", "zcube-short"), ("zcube44", "zcube"),
            ("zcube4-par2", "zcube"), ("roft44", "ecmp"), ("roft44", "shortest"),
            ("roft44-sp2", "ecmp")]


@pytest.mark.parametrize("fab, policy", PROPERTY, ids=[f"{f}-{p}" for f, p in PROPERTY])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_flow_diff_applied_to_the_old_flows_gives_the_new(fab, policy, data):
    failed = data.draw(_failure_strategy(fab))
    t = _base(fab, policy).with_failures(failed)
    new = compile_switch_flows(t)
    _check_diff(_base_flows(fab, policy), new)
    # and from one failure set to another
    t2 = _base(fab, policy).with_failures(data.draw(_failure_strategy(fab)))
    new2 = compile_switch_flows(t2)
    _check_diff(new, new2)
    _check_forwarding(t2, new2)


@pytest.mark.parametrize("fab, policy", PROPERTY, ids=[f"{f}-{p}" for f, p in PROPERTY])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_host_diff_applied_to_the_old_config_gives_the_new(fab, policy, data):
    old = _base_hosts(fab, policy)
    t = _base(fab, policy).with_failures(data.draw(_failure_strategy(fab)))
    new = compile_host_config(t)
    for a, b in ((old, new), (new, old)):
        diffs = diff_host_config(a, b)
        for name, hc in b.items():
            got = apply_host_diff(a[name], diffs[name]) if name in diffs else a[name]
            assert got == hc, name
    # every pair still connected reaches its peer by a live NIC port, with the source
    # address of that port
    dead = t.damage.cables if t.damage else frozenset()
    cut = set(t.disconnected())
    f = _fab(fab)
    for s, d in t.pairs():
        hc = new[s]
        reach = [port for ip, _, port in hc.neighbours
                 if ip in {p.ip for p in f.host(d).ports}]
        if (s, d) in cut:
            assert reach == []
            continue
        assert reach, (s, d)
        for port in reach:
            assert cable_at(f, s, port) not in dead, (s, d, port)


def test_host_port_failure_moves_the_hosts_routes_to_the_other_port():
    old = _base_hosts("zcube44", "zcube")
    t = _base("zcube44", "zcube").with_failures(_fail("zcube44", "g0:0"))
    new = compile_host_config(t)
    diffs = diff_host_config(old, new)
    g0 = diffs["g0"]
    assert g0.routes_delete == ["10.1.0.0/16"] and g0.routes_set == []
    assert new["g0"].routes == [("10.0.0.0/16", 1, "10.1.1.0")]   # every A address via B port
    assert g0.neighbours_delete == [f"10.1.1.{x}" for x in sorted(range(1, 16), key=str)]
    assert {port for _, _, port in new["g0"].neighbours} == {1}
    for g in range(1, 16):                 # the others just forget g0's dead A address
        d = diffs[f"g{g}"]
        assert d.neighbours_delete == ["10.0.1.0"] and not d.routes_set and not d.routes_delete
    back = diff_host_config(new, old)
    assert apply_host_diff(new["g0"], back["g0"]) == old["g0"]


def test_host_config_of_some_hosts_only():
    t = _base("zcube44", "zcube-short").with_failures(_fail("zcube44", "a1-b2", "g3:1"))
    full = compile_host_config(t)
    assert compile_host_config(t, hosts=["g3", "g9"]) == {"g3": full["g3"], "g9": full["g9"]}


# -- the controller's failure state (pure) ---------------------------------------------------------

from controller import reroute as rr  # noqa: E402
from controller.reroute import Rerouter, port_is_down  # noqa: E402


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        self.t += 0.5
        return self.t


def _end(fab, node, port):
    return (_fab(fab).switch(node).dpid, port)


@pytest.mark.filterwarnings("ignore")          # eventlet and webob deprecations
def test_port_state_constants_are_openflow_13s():
    from controller.ofcompat import ofproto_v1_3 as ofp
    assert (rr.OFPPR_ADD, rr.OFPPR_DELETE, rr.OFPPR_MODIFY) == (ofp.OFPPR_ADD, ofp.OFPPR_DELETE,
                                                                 ofp.OFPPR_MODIFY)
    assert (rr.OFPPS_LINK_DOWN, rr.OFPPS_BLOCKED, rr.OFPPS_LIVE) == (
        ofp.OFPPS_LINK_DOWN, ofp.OFPPS_BLOCKED, ofp.OFPPS_LIVE)
    assert rr.OFPPC_PORT_DOWN == ofp.OFPPC_PORT_DOWN


@pytest.mark.parametrize("reason, state, config, down", [
    (rr.OFPPR_MODIFY, rr.OFPPS_LIVE, 0, False),
    (rr.OFPPR_MODIFY, 0, 0, False),
    (rr.OFPPR_ADD, rr.OFPPS_LIVE, 0, False),
    (rr.OFPPR_MODIFY, rr.OFPPS_LINK_DOWN, 0, True),
    (rr.OFPPR_MODIFY, rr.OFPPS_BLOCKED, 0, True),
    (rr.OFPPR_MODIFY, rr.OFPPS_LIVE, rr.OFPPC_PORT_DOWN, True),
    (rr.OFPPR_DELETE, rr.OFPPS_LIVE, 0, True),
])
def test_port_is_down(reason, state, config, down):
    assert port_is_down(reason, state, config) is down


@pytest.mark.parametrize("fab", list(FABRICS))
def test_rerouter_maps_every_switch_port_to_its_cable(fab):
    f = _fab(fab)
    r = Rerouter(f, POLICIES[fab][0])
    for link in f.links:
        for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
            if f.is_switch(node):
                assert r.element(f.switch(node).dpid, port) == (node, link)
    assert r.element(f.switches[0].dpid, 0xfffffffe) is None           # OFPP_LOCAL
    assert r.element(0x99, 1) is None


def test_rerouter_link_down_at_both_ends_then_restored():
    clock = Clock()
    r = Rerouter(_fab("zcube44"), "zcube", clock=clock)
    base_flows = r.flows
    a_end, b_end = _end("zcube44", "a0", 6), _end("zcube44", "b1", 5)    # the a0-b1 cable
    assert r.port_status(*a_end, True)
    assert not r.port_status(*a_end, True)                 # no news
    assert not r.port_status(0x99, 1, True)                # not a fabric port
    assert r.port_status(*b_end, True)
    diffs = r.reroute()
    base_flows_failed = compile_switch_flows(
        _base("zcube44", "zcube").with_failures(_fail("zcube44", "a0-b1")))
    assert r.flows == base_flows_failed
    assert diffs == diff_switch_flows(base_flows, base_flows_failed)
    assert r.reroutes == 1 and r.last["events"] == 2 and r.last["first_event"] == 100.5
    assert r.last["switches"] == sorted(diffs)
    assert r.last["flow_mods"] == sum(d.flow_mods for d in diffs.values())
    st_ = r.status()
    assert st_["failures"] == {"switches": [], "host_ports": [], "links": ["a0:6-b1:5"]}
    assert st_["reroutes"] == 1 and st_["disconnected"] == 0 and st_["pending_events"] == 0
    assert r.reroute() == {} and r.reroutes == 1           # nothing new
    assert r.port_status(*a_end, False)
    assert r.reroute() == {} and r.reroutes == 1           # b1's end still down
    assert r.port_status(*b_end, False)
    back = r.reroute()
    assert r.flows == base_flows and not r.table.failed and r.reroutes == 2
    assert back == diff_switch_flows(base_flows_failed, base_flows)
    r.installed(2)
    assert r.last["installed"] is not None
    assert r.last["reroute_s"] == r.last["installed"] - r.last["first_event"]
    r.installed(1)                                          # a stale confirmation: ignored
    assert r.last["number"] == 2


def test_rerouter_down_and_up_before_a_reroute_changes_nothing():
    r = Rerouter(_fab("roft44"), "ecmp")
    end = _end("roft44", "l0", 5)
    assert r.port_status(*end, True) and r.port_status(*end, False)
    assert r.reroute() == {} and r.reroutes == 0


def test_rerouter_switch_gone_and_back():
    f = _fab("zcube44")
    r = Rerouter(f, "zcube")
    dpid = f.switch("a2").dpid
    assert r.switch_gone(dpid) and not r.switch_gone(dpid) and not r.switch_gone(0x99)
    r.reroute()
    assert r.table.failed == Failures(switches={"a2"})
    assert r.flows["a2"].flows == [] and r.status()["failures"]["switches"] == ["a2"]
    assert r.switch_back(dpid)
    r.reroute()
    assert r.flows == _base_flows("zcube44", "zcube")


def test_rerouter_port_descriptions_on_connect():
    f = _fab("zcube44")
    r = Rerouter(f, "zcube")
    dpid = f.switch("b3").dpid
    assert not r.ports_seen(dpid, {p: False for p in range(1, 9)})
    assert r.ports_seen(dpid, {1: True, 2: False, 0xfffffffe: False})     # g3's B port
    r.reroute()
    assert r.status()["failures"]["host_ports"] == ["g3:1"]
    cfg = r.host_config("g3")
    assert cfg == compile_host_config(r.table)["g3"]
    assert {port for _, port, _ in cfg.routes} == {0}
    with pytest.raises(FabricError):
        r.host_config("g99")


def test_rerouter_reports_cut_off_pairs():
    f = _fab("roft44")
    r = Rerouter(f, "ecmp")
    r.port_status(*_end("roft44", "l1", 1), True)                        # g1's only port
    r.reroute()
    st_ = r.status()
    assert st_["disconnected"] == 30 and len(st_["disconnected_pairs"]) == rr.MAX_LISTED
    assert st_["failures"]["host_ports"] == ["g1:0"]


@pytest.mark.parametrize("fab, policy", [("zcube33", "zcube"), ("roft44-sp2", "ecmp")])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_rerouter_diffs_keep_every_switch_equal_to_the_table(fab, policy, data):
    """Switches that apply every diff the rerouter hands out hold the flows compiled for
    whatever is down, through any sequence of port and switch events."""
    f = _fab(fab)
    r = Rerouter(f, policy)
    held = {name: switch_state(sf) for name, sf in r.flows.items()}
    ends = sorted(switch_ports(f))
    events = data.draw(st.lists(st.tuples(st.sampled_from(ends + [None]), st.booleans(),
                                          st.booleans()), max_size=12))
    for end, down, now in events:
        if end is None:
            dpid = f.switches[0].dpid
            (r.switch_gone if down else r.switch_back)(dpid)
        else:
            r.port_status(*end, down)
        if now:
            for name, d in r.reroute().items():
                held[name] = apply_switch_diff(held[name], d)
    for name, d in r.reroute().items():
        held[name] = apply_switch_diff(held[name], d)
    failed = r.failures()
    assert r.table.failed == failed
    want = compile_switch_flows(RouteTable(f, policy, failed))
    assert held == {name: switch_state(sf) for name, sf in want.items()}


# -- the Ryu glue, driven without switches --------------------------------------------------------

class FakeDatapath:
    """Enough of a datapath to build and record OpenFlow 1.3 messages."""

    def __init__(self, dpid):
        from controller.ofcompat import _mod
        self.id = dpid
        self.ofproto = _mod("ofproto.ofproto_v1_3")
        self.ofproto_parser = _mod("ofproto.ofproto_v1_3_parser")
        self.sent = []
        self.bundles = []
        self.xid = 0

    def send_msg(self, msg):
        """Record ``msg``; a bundle's mods as the mods themselves (the switch applies them
        at the commit, in order), its control messages in ``bundles``."""
        name = type(msg).__name__
        if name == "ONFBundleCtrlMsg":
            self.bundles.append((msg.bundle_id, msg.type, msg.flags, len(self.sent)))
            return
        if name == "ONFBundleAddMsg":
            self.bundles.append((msg.bundle_id, "add", msg.flags, len(self.sent)))
            msg = msg.message
        if msg.xid is None:
            self.xid += 1
            msg.xid = self.xid
        self.sent.append(msg)


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _app(fab, policy, monkeypatch, spawned=None):
    """The app without its constructor; green threads run at once, or are collected in
    ``spawned`` to be run by the test."""
    import logging

    from controller import ryu_app
    monkeypatch.setattr(ryu_app.hub, "spawn",
                        (lambda fn, *a, **k: fn(*a, **k)) if spawned is None
                        else (lambda fn, *a, **k: spawned.append(fn)))
    monkeypatch.setattr(ryu_app.hub, "sleep", lambda s: None)
    app = object.__new__(ryu_app.ZCubeController)       # no fabric file, no REST server
    f = _fab(fab)
    app.logger = logging.getLogger("test-zcube")
    app.rerouter = Rerouter(f, policy)
    app.names = {sw.dpid: sw.name for sw in f.switches}
    app.datapaths, app.installed, app.to_install = {}, {}, {}
    app.scheduled = app.working = False
    app.barriers, app.barriers_of = set(), 0
    app.pending, app.bundles = None, 0
    app.repin, app.pin_barriers = set(), set()
    return app


def _connect(app, name):
    dp = FakeDatapath(app.rerouter.fabric.switch(name).dpid)
    app.on_switch_features(Obj(msg=Obj(datapath=dp)))
    return dp


def _held(dp):
    """Flows and groups a switch would hold after the recorded messages (adds, modifies,
    deletes by exact match; a delete-all clears everything)."""
    ofp = dp.ofproto
    flows, groups = {}, {}
    for m in dp.sent:
        name = type(m).__name__
        if name == "OFPGroupMod":
            if m.command == ofp.OFPGC_DELETE and m.group_id == ofp.OFPG_ALL:
                groups.clear()
            elif m.command == ofp.OFPGC_DELETE:
                groups.pop(m.group_id)
            else:
                assert (m.group_id in groups) == (m.command == ofp.OFPGC_MODIFY)
                groups[m.group_id] = tuple(b.actions[0].port for b in m.buckets)
        elif name == "OFPFlowMod":
            if m.command == ofp.OFPFC_DELETE:
                flows.clear()
                continue
            fields = dict(m.match.items())
            key = (m.priority, fields.get("ipv4_src"), fields.get("ipv4_dst"))
            if m.command == ofp.OFPFC_DELETE_STRICT:
                flows.pop(key)
                continue
            assert (key in flows) == (m.command == ofp.OFPFC_MODIFY_STRICT)
            acts = [a for i in m.instructions for a in i.actions]
            flows[key] = (("output", acts[0].port) if type(acts[0]).__name__ == "OFPActionOutput"
                          else ("group", acts[0].group_id)) if acts else None
    flows.pop((0, None, None), None)                         # the priority-0 drop
    return switch_state_from(flows, groups)


def switch_state_from(flows, groups):
    from controller.flowdiff import SwitchState
    return SwitchState(flows, groups)


@pytest.mark.filterwarnings("ignore")          # eventlet and webob deprecations
def _one_bundle_each(dp, start=0):
    """The bundles recorded from ``start`` on: each opened, filled and committed with one id
    and atomic, ordered flags, every mod of that stretch inside one, barriers outside."""
    ofp = dp.ofproto
    flags = ofp.ONF_BF_ATOMIC | ofp.ONF_BF_ORDERED
    ids = []
    for bid, kind, fl, _ in dp.bundles[start:]:
        assert fl == flags
        if kind == ofp.ONF_BCT_OPEN_REQUEST:
            ids.append(bid)
        else:
            assert bid == ids[-1] and kind in ("add", ofp.ONF_BCT_COMMIT_REQUEST)
    commits = [b for b in dp.bundles[start:] if b[1] == ofp.ONF_BCT_COMMIT_REQUEST]
    assert len(commits) == len(ids) == len(set(ids))
    return ids, commits


def test_app_sends_each_install_and_reroute_as_one_atomic_bundle(monkeypatch):
    app = _app("roft44", "ecmp", monkeypatch)
    dp = _connect(app, "l0")
    ids, commits = _one_bundle_each(dp)
    mods = [m for m in dp.sent if type(m).__name__ != "OFPBarrierRequest"]
    assert len(ids) == 1 and sum(1 for b in dp.bundles if b[1] == "add") == len(mods)
    assert commits[0][3] == len(dp.sent) - 1       # committed, then its barrier
    ofp, before, seen = dp.ofproto, len(dp.sent), len(dp.bundles)
    desc = Obj(port_no=6, state=ofp.OFPPS_LINK_DOWN, config=0)
    app.on_port_status(Obj(msg=Obj(datapath=dp, reason=ofp.OFPPR_MODIFY, desc=desc)))
    ids2, _ = _one_bundle_each(dp, seen)
    assert len(ids2) == 1 and ids2[0] != ids[0]
    assert [type(m).__name__ for m in dp.sent[before:]] == ["OFPGroupMod", "OFPBarrierRequest"]
    assert app.status()["bundles"] == 2


def test_app_installs_then_sends_only_the_difference_on_port_status(monkeypatch):
    app = _app("roft44", "ecmp", monkeypatch)
    dps = {name: _connect(app, name) for name in ("l0", "l1", "s1")}
    ofp = dps["l0"].ofproto
    for name, dp in dps.items():
        assert _held(dp) == switch_state(app.rerouter.flows[name])
        assert type(dp.sent[-1]).__name__ == "OFPBarrierRequest"
    sent_before = {name: len(dp.sent) for name, dp in dps.items()}
    # l0's port 6 (to s1) loses its link
    desc = Obj(port_no=6, state=ofp.OFPPS_LINK_DOWN, config=0)
    app.on_port_status(Obj(msg=Obj(datapath=dps["l0"], reason=ofp.OFPPR_MODIFY, desc=desc)))
    assert app.rerouter.reroutes == 1 and not app.scheduled and not app.working
    want = compile_switch_flows(_base("roft44", "ecmp").with_failures(_fail("roft44", "l0-s1")))
    for name, dp in dps.items():
        assert _held(dp) == switch_state(want[name]), name
        assert type(dp.sent[-1]).__name__ == "OFPBarrierRequest"
    new_l0 = dps["l0"].sent[sent_before["l0"]:]
    assert [type(m).__name__ for m in new_l0] == ["OFPGroupMod", "OFPBarrierRequest"]
    assert new_l0[0].command == ofp.OFPGC_MODIFY
    assert len(app.barriers) == 3
    for name, dp in dps.items():
        app.on_barrier(Obj(msg=Obj(datapath=dp, xid=dp.sent[-1].xid)))
    assert app.rerouter.last["installed"] is not None
    status = app.status()
    assert status["failures"]["links"] == ["l0:6-s1:1"] and status["reroutes"] == 1
    assert status["switches"]["l0"]["connected"] and not status["switches"]["l2"]["connected"]
    import json
    json.dumps(status)
    # a switch connecting later gets the current flows in full
    l2 = _connect(app, "l2")
    assert _held(l2) == switch_state(want["l2"])
    # the link comes back: the original flows again
    desc = Obj(port_no=6, state=ofp.OFPPS_LIVE, config=0)
    app.on_port_status(Obj(msg=Obj(datapath=dps["l0"], reason=ofp.OFPPR_MODIFY, desc=desc)))
    base = _base_flows("roft44", "ecmp")
    for name, dp in list(dps.items()) + [("l2", l2)]:
        assert _held(dp) == switch_state(base[name]), name


@pytest.mark.filterwarnings("ignore")          # eventlet and webob deprecations
def test_app_sends_from_one_green_thread_and_coalesces_events(monkeypatch):
    spawned = []
    app = _app("roft44", "ecmp", monkeypatch, spawned)
    f = app.rerouter.fabric
    l0 = FakeDatapath(f.switch("l0").dpid)
    app.on_switch_features(Obj(msg=Obj(datapath=l0)))
    assert l0.sent == [] and len(spawned) == 1                # nothing sent by the handler
    ofp = l0.ofproto
    for dp, port in ((l0, 6), (FakeDatapath(f.switch("s1").dpid), 1)):   # both ends of l0-s1
        desc = Obj(port_no=port, state=ofp.OFPPS_LINK_DOWN, config=0)
        app.on_port_status(Obj(msg=Obj(datapath=dp, reason=ofp.OFPPR_MODIFY, desc=desc)))
    assert len(spawned) == 1                                  # the worker is already asked for
    spawned.pop()()
    assert not app.working and app.rerouter.reroutes == 1 and app.rerouter.last["events"] == 2
    want = compile_switch_flows(_base("roft44", "ecmp").with_failures(_fail("roft44", "l0-s1")))
    assert _held(l0) == switch_state(want["l0"])
    assert [type(m).__name__ for m in l0.sent].count("OFPBarrierRequest") == 2


@pytest.mark.filterwarnings("ignore")          # eventlet and webob deprecations
def test_app_routes_around_a_switch_that_disconnects(monkeypatch):
    from controller.ofcompat import DEAD_DISPATCHER
    app = _app("zcube33", "zcube", monkeypatch)
    dps = {sw.name: _connect(app, sw.name) for sw in app.rerouter.fabric.switches}
    app.on_state_change(Obj(datapath=dps["a1"], state=DEAD_DISPATCHER))
    assert app.rerouter.table.failed == Failures(switches={"a1"})
    want = compile_switch_flows(_base("zcube33", "zcube").with_failures(
        Failures(switches={"a1"})))
    for name, dp in dps.items():
        if name != "a1":
            assert _held(dp) == switch_state(want[name]), name
    assert not app.status()["switches"]["a1"]["connected"]
    # a1 comes back: full install, then the others return to the original
    dps["a1"] = _connect(app, "a1")
    base = _base_flows("zcube33", "zcube")
    for name, dp in dps.items():
        assert _held(dp) == switch_state(base[name]), name


@pytest.mark.filterwarnings("ignore")          # eventlet and webob deprecations
def test_app_port_descriptions_mark_ports_down_at_connect(monkeypatch):
    app = _app("zcube33", "zcube", monkeypatch)
    dp = _connect(app, "a0")
    ofp = dp.ofproto
    body = [Obj(port_no=1, state=ofp.OFPPS_LINK_DOWN, config=0),
            Obj(port_no=2, state=ofp.OFPPS_LIVE, config=0),
            Obj(port_no=ofp.OFPP_LOCAL, state=0, config=ofp.OFPPC_PORT_DOWN)]
    app.on_port_desc(Obj(msg=Obj(datapath=dp, body=body)))
    assert app.rerouter.status()["failures"]["host_ports"] == ["g0:0"]
    assert _held(dp) == switch_state(app.rerouter.flows["a0"])


@pytest.mark.filterwarnings("ignore")          # eventlet and webob deprecations
def test_app_rest_serves_status_and_host_routes(monkeypatch):
    import json
    app = _app("zcube33", "zcube", monkeypatch)
    app.rerouter.port_status(*_end("zcube33", "a0", 1), True)          # g0's A port
    app.rerouter.reroute()
    calls = []

    def get(path):
        body = app.rest_app({"PATH_INFO": path, "REQUEST_METHOD": "GET",
                             "HTTP_HOST": "127.0.0.1:8080"},
                            lambda code, headers: calls.append(code))
        return calls[-1], json.loads(b"".join(body))

    code, body = get("/zcube/hosts/g0")
    assert code == "200 OK"
    assert {tuple(r) for r in body["routes"]} == {("10.0.0.0/16", 1, "10.1.1.0")}
    code, body = get("/zcube/hosts/g42")
    assert code.startswith("404") and "g42" in body["error"]
    code, body = get("/zcube/status")
    assert code == "200 OK" and body["failures"]["host_ports"] == ["g0:0"]
    assert body["reroutes"] == 1 and body["last_reroute"]["number"] == 1
