"""Route verifier: accepts good tables, names precise violations, measures link loads."""
from __future__ import annotations

from collections import Counter

import pytest

from controller.routing import FunctionPolicy, RouteTable, ZCubePolicy
from controller.verify import MAX_LISTED, jain, verify
from topologies import FabricError, fattree, roft, zcube
from traffic.matrix import matrix

GOOD = [
    ("zcube44", lambda: zcube(4, 4), "zcube"),
    ("zcube44", lambda: zcube(4, 4), "zcube-short"),
    ("zcube44", lambda: zcube(4, 4), "ecmp"),
    ("zcube44", lambda: zcube(4, 4), "shortest"),
    ("zcube3-par2", lambda: zcube(3, parallel=2), "zcube"),
    ("roft44", lambda: roft(4, 4), "ecmp"),
    ("roft44", lambda: roft(4, 4), "shortest"),
    ("fattree4", lambda: fattree(4), "ecmp"),
    ("fattree4", lambda: fattree(4), "shortest"),
]


@pytest.mark.parametrize("fab, policy", [(f, p) for _, f, p in GOOD],
                         ids=[f"{n}-{p}" for n, _, p in GOOD])
def test_verifier_accepts_builtin_policy(fab, policy):
    f = fab()
    rep = verify(RouteTable(f, policy))
    assert rep.ok, rep.violations
    assert rep.violations == [] and rep.violations_total == 0
    assert rep.pairs == len(f.hosts) * (len(f.hosts) - 1)
    assert "OK:" in rep.to_text()


def test_verifier_counts_pairings_and_hops_of_zcube_policy():
    rep = verify(RouteTable(zcube(4), "zcube"))
    assert rep.paths == 480 and rep.max_paths_per_pair == 2
    assert rep.pairings == {"0->1": 240, "1->0": 240}
    assert rep.hops == {2: 480}


def test_verifier_counts_hops_of_zcube_short_policy():
    rep = verify(RouteTable(zcube(4), "zcube-short"))
    assert rep.hops == {1: 96, 2: 2 * 144}
    assert rep.stretch_max == 1.0


# -- broken user policies ------------------------------------------------------------------

def _table_breaking(f, bad_pair, bad_paths):
    """zcube P1/P2 for every pair except ``bad_pair``, which gets ``bad_paths``."""
    good = ZCubePolicy(f)

    def fn(fabric, src, dst):
        return bad_paths if (src, dst) == bad_pair else good.paths(src, dst)

    return RouteTable(f, FunctionPolicy(f, fn, "broken"))


@pytest.mark.parametrize("bad, message", [
    ([("g0", "a0", "g5")], "g0 -> g5 path g0-a0-g5: no cable a0-g5"),
    ([("g0", "a0", "b1", "a0", "b1", "g5")],
     "g0 -> g5 path g0-a0-b1-a0-b1-g5: loop (visits a node twice)"),
    ([], "g0 -> g5: no path"),
    ([("g0", "a0", "g1", "b1", "g5")], "g0 -> g5 path g0-a0-g1-b1-g5: g1 is not a switch"),
    ([("g0", "a0", "b1", "g6")],
     "g0 -> g5 path g0-a0-b1-g6: must run from g0 through switches to g5"),
    ([("g0", "g5")], "g0 -> g5 path g0-g5: must run from g0 through switches to g5"),
], ids=["skips-cable", "loop", "missing-pair", "through-host", "wrong-end", "no-switch"])
def test_broken_user_policy_violation_names_pair_and_path(bad, message):
    f = zcube(4)                      # g5 = (a1, b1): not on a0
    rep = verify(_table_breaking(f, ("g0", "g5"), bad))
    assert not rep.ok
    assert rep.violations_total == 1
    assert rep.violations == [message]
    assert "FAILED: 1 violation(s)" in rep.to_text()


def test_broken_path_alongside_good_one_is_still_reported():
    f = zcube(4)
    good = ("g0", "b0", "a1", "g5")
    rep = verify(_table_breaking(f, ("g0", "g5"), [good, ("g0", "a0", "g5")]))
    assert rep.violations == ["g0 -> g5 path g0-a0-g5: no cable a0-g5"]


def test_user_policy_that_raises_is_reported_not_propagated():
    f = zcube(2)

    def fn(fabric, src, dst):
        raise RuntimeError("boom")

    rep = verify(RouteTable(f, FunctionPolicy(f, fn, "raises")))
    assert rep.violations_total == 12
    assert rep.violations[0] == "g0 -> g1: policy raised RuntimeError: boom"


def test_verifier_lists_at_most_max_listed_but_counts_all():
    f = zcube(4)
    rep = verify(RouteTable(f, FunctionPolicy(f, lambda fab, s, d: [], "empty")))
    assert rep.violations_total == 240
    assert len(rep.violations) == MAX_LISTED
    # no path at all: the summary says so rather than printing empty lists and a 0 stretch
    lines = rep.to_text().splitlines()
    assert lines[1:4] == ["port pairings: none (no pair routed)", "switches per path: none",
                          "stretch over shortest: -"]


def test_a_routed_table_lists_its_pairings_hops_and_stretch():
    lines = verify(RouteTable(zcube(4), "zcube")).to_text().splitlines()
    assert lines[1] == "port pairings: 0->1 x240, 1->0 x240"
    assert lines[2].startswith("switches per path: 2: ")
    assert lines[3].startswith("stretch over shortest: max ")


class _DropsP2(ZCubePolicy):
    def paths(self, src, dst):
        return super().paths(src, dst)[:1]


def test_zcube_policy_dropping_P2_breaks_the_promised_pairing():
    f = zcube(4)
    rep = verify(RouteTable(f, _DropsP2(f)))
    assert rep.violations_total == 240
    assert rep.violations[0] == "g0 -> g1: no path on promised port pairing(s) 1->0"
    assert all(v.endswith("promised port pairing(s) 1->0") for v in rep.violations)


class _DropsShortcut(ZCubePolicy):
    """zcube-short that (wrongly) routes shortcut pairs over P2 only."""
    def paths(self, src, dst):
        got = super().paths(src, dst)
        if len(got) == 1:
            sa, sb = self._planes[src]
            da, db = self._planes[dst]
            return [(src, sb, da, dst)]
        return got


def test_zcube_short_variant_missing_shortcut_breaks_claims():
    f = zcube(3)
    rep = verify(RouteTable(f, _DropsShortcut(f, short=True)))
    # pairs on the same A switch lose their promised 0->0 pairing; same-B pairs lose 1->1
    assert rep.violations_total == 2 * 9 * 2
    assert "g0 -> g1: no path on promised port pairing(s) 0->0" in rep.violations


# -- loads under traffic matrices ------------------------------------------------------------

def _independent_class_loads(f, table, traffic, seed=0):
    """Per link class: sorted (load per cable, pairs crossing) over every directed node pair."""
    cables = Counter()
    for link in f.links:
        cables[(link.a, link.b)] += 1
        cables[(link.b, link.a)] += 1
    load, crossing = Counter(), Counter()
    for s, d, demand in matrix(traffic, f, seed):
        paths = table.paths(s, d)
        hops = set()
        for p in paths:
            for hop in zip(p, p[1:]):
                load[hop] += demand / len(paths)
                hops.add(hop)
        crossing.update(hops)
    assert set(load) <= set(cables)                   # the policy only uses real cables

    def cls(x):
        return "host" if f.is_host(x) else f.switch(x).group

    out = {}
    for (u, v), c in cables.items():
        out.setdefault(f"{cls(u)}->{cls(v)}", []).append((load[(u, v)] / c, crossing[(u, v)]))
    return out


TRAFFIC_CASES = [
    ("zcube42-zcube-pd", lambda: zcube(4, 2), "zcube", "pd"),
    ("zcube44-zcube-perm", lambda: zcube(4, 4), "zcube", "permutation"),
    ("zcube44-short-perm", lambda: zcube(4, 4), "zcube-short", "permutation"),
    ("roft44-ecmp-pd", lambda: roft(4, 4), "ecmp", "pd"),
    ("roft44-ecmp-perm", lambda: roft(4, 4), "ecmp", "permutation"),
    ("fattree4-ecmp-pd", lambda: fattree(4), "ecmp", "pd"),
]


@pytest.mark.parametrize("fab, policy, traffic", [c[1:] for c in TRAFFIC_CASES],
                         ids=[c[0] for c in TRAFFIC_CASES])
def test_traffic_loads_match_independent_per_link_count(fab, policy, traffic):
    f = fab()
    t = RouteTable(f, policy)
    rep = verify(t, traffic)
    want = _independent_class_loads(f, t, traffic)
    assert set(rep.loads) == set(want)
    for cls, vals in want.items():
        loads = [v for v, _ in vals]
        pairs = [c for _, c in vals]
        st = rep.loads[cls]
        assert st["links"] == len(vals), cls
        assert st["max"] == pytest.approx(max(loads)), cls
        assert st["mean"] == pytest.approx(sum(loads) / len(loads)), cls
        assert (st["pairs_min"], st["pairs_max"]) == (min(pairs), max(pairs)), cls


@pytest.mark.parametrize("fab, policy, traffic", [c[1:] for c in TRAFFIC_CASES],
                         ids=[c[0] for c in TRAFFIC_CASES])
def test_traffic_jain_index_in_zero_one(fab, policy, traffic):
    rep = verify(RouteTable(fab(), policy), traffic)
    assert rep.loads
    for cls, st in rep.loads.items():
        assert 0 < st["jain"] <= 1 + 1e-12, (cls, st)


def test_pd_loads_only_prefill_uplinks_and_decode_downlinks():
    # zcube(4, gps=2): servers 0..3 (g0..g7, on a0/a1) prefill; g8..g15 (a2/a3) decode.
    # Each prefill GPU sends 8 units, half per NIC port: 4 on host->A, 4 on host->B.
    rep = verify(RouteTable(zcube(4, 2), "zcube"), "pd")
    up = rep.loads["host->A"]
    assert (up["max"], up["mean"], up["pairs_min"], up["pairs_max"]) == (4.0, 2.0, 0, 8)
    assert up["jain"] == pytest.approx(0.5)
    down = rep.loads["A->host"]
    assert (down["max"], down["mean"], down["pairs_min"]) == (4.0, 2.0, 0)


def test_permutation_loads_every_host_link_with_half_a_unit():
    rep = verify(RouteTable(zcube(4), "zcube"), "permutation")
    for cls in ("host->A", "host->B", "A->host", "B->host"):
        st = rep.loads[cls]
        assert (st["max"], st["mean"], st["pairs_min"], st["pairs_max"]) == (0.5, 0.5, 1, 1), cls
    # 16 pairs put half a unit on one A->B link each: total 8 units over 16 links
    assert rep.loads["A->B"]["mean"] * rep.loads["A->B"]["links"] == pytest.approx(8.0)


def test_all_to_all_parallel_cables_share_a_node_pairs_load():
    n = 3
    rep = verify(RouteTable(zcube(n, parallel=2), "zcube"), "all-to-all")
    st = rep.loads["A->B"]
    assert st["links"] == n * n
    assert st["max"] == pytest.approx((n * n - 1) / 2 / 2)
    assert st["pairs_min"] == st["pairs_max"] == n * n - 1


def test_unknown_traffic_matrix_raises_naming_it():
    with pytest.raises(FabricError, match="unknown traffic matrix 'nope'"):
        verify(RouteTable(zcube(2), "zcube"), "nope")


def test_permutation_is_a_seeded_derangement():
    f = zcube(4)
    a = list(matrix("permutation", f, 7))
    assert a == list(matrix("permutation", f, 7))
    assert (sorted(s for s, _, _ in a) == sorted(d for _, d, _ in a)
            == sorted(h.name for h in f.hosts))
    assert all(s != d for s, d, _ in a)


# -- jain ------------------------------------------------------------------------------------

@pytest.mark.parametrize("values, want", [
    ([1, 1], 1.0),
    ([1, 0], 0.5),
    ([2, 2, 2], 1.0),
    ([3, 1], 0.8),               # 16 / (2 * 10)
    ([1, 0, 0, 0], 0.25),
    ([0, 0], 1.0),               # no load at all counts as fair
])
def test_jain_hand_worked_values(values, want):
    assert jain(values) == pytest.approx(want)


def test_jain_accepts_a_generator():
    assert jain(v for v in (1, 1, 0, 0)) == pytest.approx(0.5)


# -- links offered more than their rate at line rate ------------------------------------------

def test_links_offered_more_than_their_rate_are_named_overloaded_and_the_check_still_passes():
    rep = verify(RouteTable(roft(4, 4, oversubscription=2), "ecmp"), traffic="all-to-all",
                 line_rate=True)
    assert rep.ok and rep.loads["leaf->spine"]["util_max"] > 1
    assert rep.overloaded_total == len([1 for st in ("leaf->spine", "spine->leaf")
                                        for _ in range(rep.loads[st]["links"])])
    assert all(util > 1 for _, util in rep.overloaded)
    assert [u for _, u in rep.overloaded] == sorted((u for _, u in rep.overloaded), reverse=True)
    lines = rep.to_text().splitlines()
    warning = next(i for i, line in enumerate(lines) if line.startswith("OVERLOADED: "))
    link, util = rep.overloaded[0]
    assert f"{link} at {util:.2f}" in lines[warning]
    assert "cannot all get that rate" in lines[warning + 1]
    assert lines[-1].startswith("OK: ")
    assert rep.to_dict()["overloaded_total"] == rep.overloaded_total


def test_a_link_at_exactly_its_rate_is_not_overloaded():
    rep = verify(RouteTable(roft(4, 4), "ecmp"), traffic="pd", line_rate=True)
    assert rep.loads["host->leaf"]["util_max"] == pytest.approx(1.0)
    assert rep.overloaded == [] and "OVERLOADED" not in rep.to_text()


def test_without_line_rate_nothing_is_called_overloaded():
    rep = verify(RouteTable(roft(4, 4, oversubscription=2), "ecmp"), traffic="all-to-all")
    assert rep.overloaded == [] and rep.overloaded_total == 0
