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
    assert {(l.a, l.a_port, l.b, l.b_port) for l in got.links} == {("a0", 7, "b1", 5),
                                                                  ("a0", 8, "b1", 6)}


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
    assert dmg.cables == {l for l in f.links if "b2" in (l.a, l.b)}
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

from controller.flows import (PRIO_DST, PRIO_PAIR, apply_host_diff, apply_message,  # noqa: E402
                              apply_switch_diff, compile_host_config, compile_switch_flows,
                              diff_host_config, diff_switch, diff_switch_flows, switch_state)


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
                ("roft44-sp2", "ecmp", ("l0:5", "l3:8")), ("fattree4", "ecmp", ("c0", "p0a0", "p1e0-p1a1"))]


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
    from controller.flows import SwitchState
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
