"""Path tracing from link counters: base-3 bursts, decomposition, judging a probe."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.trace import ROUND, burst_sizes, decompose, hops_of_path, judge, walk

P1 = ("g0", "a0", "b1", "g5")          # zcube P1 of g0 -> g5
P2 = ("g0", "b0", "a1", "g5")          # zcube P2 of g0 -> g5
Q = ("g2", "a0", "b3", "g14")          # shares no hop with P1 but a switch
R = ("g1", "a0", "b1", "g5")           # shares the hops a0->b1 and b1->g5 with P1


def _deltas(*probes):
    """Counter deltas of a round where probe k crossed the hops of probes[k] once."""
    out: dict = {}
    for k, path in enumerate(probes):
        for hop in hops_of_path(path):
            out[hop] = out.get(hop, 0) + burst_sizes(len(probes))[k]
    return out


# -- bursts -------------------------------------------------------------------------------------

def test_burst_sizes_are_powers_of_three_from_three():
    assert burst_sizes(0) == []
    assert burst_sizes(1) == [3]
    assert burst_sizes(5) == [3, 9, 27, 81, 243]
    assert sum(burst_sizes(ROUND)) == 363


def test_hops_of_path_are_directed_consecutive_pairs():
    assert hops_of_path(P1) == (("g0", "a0"), ("a0", "b1"), ("b1", "g5"))
    assert hops_of_path(("g0", "a0", "g1")) == (("g0", "a0"), ("a0", "g1"))


# -- decompose ----------------------------------------------------------------------------------

def test_decompose_separates_probes_on_disjoint_links():
    crossed, repeated = decompose(_deltas(P1, Q), 2)
    assert crossed == [set(hops_of_path(P1)), set(hops_of_path(Q))]
    assert repeated == [set(), set()]


def test_decompose_separates_probes_sharing_links():
    deltas = _deltas(P1, R)
    assert deltas[("a0", "b1")] == 3 + 9
    crossed, repeated = decompose(deltas, 2)
    assert crossed == [set(hops_of_path(P1)), set(hops_of_path(R))]
    assert repeated == [set(), set()]


def test_decompose_reports_a_duplicated_probe_as_repeated():
    deltas = _deltas(P1, Q)
    deltas[("b1", "g5")] += 3                 # probe 0's packets crossed b1->g5 twice
    crossed, repeated = decompose(deltas, 2)
    assert repeated[0] == {("b1", "g5")}
    assert crossed[0] == set(hops_of_path(P1)) - {("b1", "g5")}
    assert crossed[1] == set(hops_of_path(Q)) and repeated[1] == set()


def test_decompose_absorbs_one_or_two_stray_packets_per_link():
    clean = decompose(_deltas(P1, Q, R), 3)
    for noise in (1, 2):
        deltas = _deltas(P1, Q, R)
        for hop in deltas:
            deltas[hop] += noise
        deltas[("b2", "a3")] = noise          # a link no probe crossed
        assert decompose(deltas, 3) == clean
    assert clean[0][0] == set(hops_of_path(P1))


def test_decompose_ignores_zero_and_negative_deltas():
    deltas = _deltas(P1)
    deltas[("a2", "b2")] = 0
    deltas[("a3", "b3")] = -4                 # a counter reset must not invent hops
    crossed, repeated = decompose(deltas, 1)
    assert crossed == [set(hops_of_path(P1))] and repeated == [set()]


def test_decompose_marks_a_delta_beyond_the_round_as_repeated_for_every_probe():
    n = 2                                     # bursts 3 + 9; the most a link can count is 26
    deltas = _deltas(P1, Q)
    deltas[("a0", "b1")] = 3 ** (n + 1)       # 27: more than the round could have sent
    crossed, repeated = decompose(deltas, n)
    assert all(("a0", "b1") in r for r in repeated)
    assert ("a0", "b1") not in crossed[0]
    deltas[("a0", "b1")] = 3 ** (n + 1) - 1   # 26 = 2 + 2*3 + 2*9: both probes twice
    crossed, repeated = decompose(deltas, n)
    assert repeated == [{("a0", "b1")}, {("a0", "b1")}]


HOPS = [("g0", "a0"), ("a0", "b1"), ("b1", "g5"), ("a0", "b2"), ("b2", "a3"), ("a3", "g12")]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, ROUND).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.lists(st.integers(0, 2), min_size=n, max_size=n),
             min_size=len(HOPS), max_size=len(HOPS)),
    st.lists(st.integers(0, 2), min_size=len(HOPS), max_size=len(HOPS)))))
def test_decompose_recovers_every_crossing_count_despite_noise(case):
    n, counts, noise = case
    sizes = burst_sizes(n)
    deltas = {hop: noise[h] + sum(c * s for c, s in zip(counts[h], sizes))
              for h, hop in enumerate(HOPS)}
    crossed, repeated = decompose(deltas, n)
    for k in range(n):
        assert crossed[k] == {hop for h, hop in enumerate(HOPS) if counts[h][k] == 1}
        assert repeated[k] == {hop for h, hop in enumerate(HOPS) if counts[h][k] == 2}


# -- walk ---------------------------------------------------------------------------------------

def test_walk_follows_a_chain_to_its_end():
    assert walk("g0", set(hops_of_path(P1))) == list(P1)
    assert walk("a0", set(hops_of_path(P1))) == ["a0", "b1", "g5"]
    assert walk("g9", set(hops_of_path(P1))) == ["g9"]


def test_walk_stops_at_a_fork():
    hops = set(hops_of_path(P1)) | {("a0", "b2"), ("b2", "g6")}
    assert walk("g0", hops) == ["g0", "a0"]


def test_walk_stops_before_repeating_a_node():
    hops = {("g0", "a0"), ("a0", "b1"), ("b1", "a0")}
    assert walk("g0", hops) == ["g0", "a0", "b1"]


# -- judge --------------------------------------------------------------------------------------

def test_judge_accepts_an_exact_match():
    res = judge("g0->g5", [P1], set(hops_of_path(P1)), set())
    assert res.ok and res.path == P1 and res.message == ""


def test_judge_accepts_the_second_candidate():
    l1 = ("g0", "l0", "s0", "l1", "g1")
    l2 = ("g0", "l0", "s1", "l1", "g1")
    res = judge("ecmp", [list(l1), list(l2)], set(hops_of_path(l2)), set())
    assert res.ok and res.path == l2


def test_judge_names_the_first_wrong_hop():
    wrong = ("g0", "a0", "b2", "g6")
    res = judge("g0->g5", [P1], set(hops_of_path(wrong)), set())
    assert not res.ok and res.path is None
    assert "first wrong hop a0->b2" in res.message
    assert res.message.startswith("g0->g5: computed g0-a0-b1-g5")


def test_judge_names_a_wrong_hop_after_following_another_candidates_prefix():
    wrong = ("g0", "b0", "a2", "g9")          # starts like P2, then leaves it
    res = judge("p", [P1, P2], set(hops_of_path(wrong)), set())
    assert not res.ok and "first wrong hop b0->a2" in res.message


def test_judge_reports_where_packets_were_lost():
    res = judge("g0->g5", [P1], {("g0", "a0"), ("a0", "b1")}, set())
    assert not res.ok
    assert "lost at b1" in res.message
    assert "stopped after g0-a0-b1" in res.message
    nothing = judge("g0->g5", [P1], set(), set())
    assert not nothing.ok and "lost at g0" in nothing.message


def test_judge_lists_extra_links_crossed():
    crossed = set(hops_of_path(P1)) | {("b3", "a2")}
    res = judge("g0->g5", [P1], crossed, set())
    assert not res.ok
    assert "crossed g0-a0-b1-g5 plus b3->a2" in res.message


def test_judge_reports_repeated_hops_even_on_the_right_path():
    res = judge("g0->g5", [P1], set(hops_of_path(P1)), {("a0", "b1")})
    assert not res.ok and res.path is None
    assert "a0->b1 more than once" in res.message
