"""PD deployments on a fabric and the GPU pairs that carry a request's KV cache.

The property the experiments rely on (ZCUBE.md sections 1 and 3): under ``aligned`` the
prefill rank i -> decode rank i transfers stay on one rail (on ZCube: share a B switch),
under ``cross-rail`` they never do.
"""
from __future__ import annotations

import json
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies import roft, zcube
from traffic.models import get_model
from traffic.placement import PLACEMENTS, Deployment, Instance, deploy, kv_layout

FABRICS = {"zcube44": lambda: zcube(4, 4), "roft44": lambda: roft(4, 4),
           "roft84": lambda: roft(8, 4)}
LLAMA = "llama3-70b"            # GQA, 8 KV heads
GLM5 = "glm-5"                  # MLA


@lru_cache(maxsize=None)
def fab(name):
    return FABRICS[name]()


def where(fabric, gpu):
    h = fabric.host(gpu)
    return h.server, h.rank


def all_gpus(dep: Deployment):
    return [g for inst in dep.prefill + dep.decode for g in inst.gpus]


def pairs(dep):
    return [(p, d) for p in dep.prefill for d in dep.decode]


# -- placements ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["zcube44", "roft44"])
def test_aligned_puts_rank_i_on_local_rank_i_of_other_servers(name):
    f = fab(name)
    dep = deploy(f, 4, 4, placement="aligned")
    assert (len(dep.prefill), len(dep.decode)) == (2, 2)        # half the servers each
    p_servers = {where(f, g)[0] for i in dep.prefill for g in i.gpus}
    d_servers = {where(f, g)[0] for i in dep.decode for g in i.gpus}
    assert p_servers == {0, 1} and d_servers == {2, 3}          # first servers, last servers
    for p, d in pairs(dep):
        for i in range(4):
            (ps, pr), (ds, dr) = where(f, p.gpus[i]), where(f, d.gpus[i])
            assert pr == dr == i and ps != ds


@pytest.mark.parametrize("name", ["zcube44", "roft44"])
def test_cross_rail_moves_decode_ranks_by_one(name):
    f = fab(name)
    dep = deploy(f, 4, 4, placement="cross-rail")
    for p, d in pairs(dep):
        for i in range(4):
            (ps, pr), (ds, dr) = where(f, p.gpus[i]), where(f, d.gpus[i])
            assert pr == i and dr == (i + 1) % 4 and ps != ds


@pytest.mark.parametrize("name", ["zcube44", "roft44"])
@pytest.mark.parametrize("placement", ["aligned", "cross-rail"])
def test_unequal_tp_layouts_differ(name, placement):
    f = fab(name)
    dep = deploy(f, 4, 2, placement=placement)
    assert {i.tp for i in dep.prefill} == {4} and {i.tp for i in dep.decode} == {2}
    for p, d in pairs(dep):
        rails = {(where(f, s)[1], where(f, t)[1]) for s, t, _ in kv_layout(LLAMA, p, d)}
        shift = int(placement == "cross-rail")
        # decode rank j takes the heads of prefill ranks 2j and 2j+1: one of them changes rail
        assert rails == {(pr, (pr // 2 + shift) % 4) for pr in range(4)}
        assert any(a != b for a, b in rails)


def test_aligned_multi_server_instances():
    f = fab("roft84")
    dep = deploy(f, 8, 8, placement="aligned")
    assert (len(dep.prefill), len(dep.decode)) == (2, 2)
    for inst, first in zip(dep.prefill + dep.decode, (0, 2, 4, 6)):
        assert [where(f, g) for g in inst.gpus] == [(first + i // 4, i % 4) for i in range(8)]


@pytest.mark.parametrize("name", ["zcube44", "roft44"])
def test_packed_is_consecutive(name):
    f = fab(name)
    dep = deploy(f, 4, 2, placement="packed")
    assert (len(dep.prefill), len(dep.decode)) == (2, 4)        # 8 GPUs each side
    assert all_gpus(dep) == [f"g{i}" for i in range(16)]
    for inst in dep.prefill:                                    # tp 4 fills one whole server
        assert len({where(f, g)[0] for g in inst.gpus}) == 1


def test_random_is_seeded_and_never_reuses_a_gpu():
    f = fab("zcube44")
    a, b = deploy(f, 2, 4, placement="random"), deploy(f, 2, 4, placement="random")
    assert a.to_dict() == b.to_dict()
    c = deploy(f, 2, 4, placement="random", seed=1)
    assert c.to_dict() != a.to_dict()
    for dep in (a, c):
        gpus = all_gpus(dep)
        assert len(gpus) == len(set(gpus)) == 16 and set(gpus) == {h.name for h in f.hosts}
    assert all_gpus(a) != [f"g{i}" for i in range(16)]


def test_counts_given_and_defaults_from_the_rest():
    f = fab("zcube44")
    dep = deploy(f, 4, 4, prefill_instances=3, placement="packed")
    assert (len(dep.prefill), len(dep.decode)) == (3, 1)
    dep = deploy(f, 4, 4, prefill_instances=1, decode_instances=1)
    assert [where(f, i.gpus[0])[0] for i in dep.prefill + dep.decode] == [0, 3]
    dep = deploy(f, 2, 2, decode_instances=1, placement="aligned")
    assert (len(dep.prefill), len(dep.decode)) == (3, 1)
    assert [i.index for i in dep.prefill] == [0, 1, 2]


def test_to_dict_is_json():
    dep = deploy(fab("zcube44"), 4, 2, placement="cross-rail")
    d = json.loads(json.dumps(dep.to_dict()))
    assert d["placement"] == "cross-rail"
    assert d["decode"][0] == {"role": "decode", "index": 0, "gpus": ["g9", "g10"], "tp": 2}
    assert [i["gpus"] for i in d["prefill"]] == [list(i.gpus) for i in dep.prefill]


@pytest.mark.parametrize("kwargs, field", [
    ({"prefill_tp": 0}, "prefill_tp"), ({"decode_tp": -1}, "decode_tp"),
    ({"prefill_tp": "4"}, "prefill_tp"), ({"decode_tp": True}, "decode_tp"),
    ({"placement": "spread"}, "placement"), ({"seed": -1}, "seed"),
    ({"prefill_tp": 6}, "prefill_tp"),                         # not <= 4 nor a multiple of 4
    ({"decode_tp": 6, "placement": "cross-rail"}, "decode_tp"),
    ({"prefill_tp": 12}, "prefill_tp"),                        # 3 servers > half of 4
    ({"decode_tp": 9, "placement": "packed"}, "decode_tp"),    # 9 GPUs > half of 16
    ({"prefill_instances": 0}, "prefill_instances"),
    ({"decode_instances": 2.0}, "decode_instances"),
    ({"prefill_instances": 5}, "prefill_instances"),            # 5 servers > 4
    ({"prefill_instances": 4}, "decode"),                      # leaves none for decode
    ({"prefill_instances": 2, "decode_instances": 3}, "decode_instances=3"),
    ({"prefill_instances": 3, "decode_instances": 2, "placement": "random"},
     "prefill_instances=3"),
])
def test_refusals_name_the_parameter(kwargs, field):
    args = {"prefill_tp": 4, "decode_tp": 4, **kwargs}
    with pytest.raises(ValueError, match=field):
        deploy(fab("zcube44"), **args)


def test_refusals_for_fabrics_the_layout_cannot_use():
    with pytest.raises(ValueError, match="cross-rail"):
        deploy(roft(4, 1), 1, 1, placement="cross-rail")
    with pytest.raises(ValueError, match="prefill_tp"):
        deploy(roft(1, 4), 4, 4, placement="aligned")          # one server: no other side
    assert len(all_gpus(deploy(roft(1, 4), 2, 2, placement="packed"))) == 4


def test_instance_records():
    inst = Instance("decode", 3, ["g1", "g2"])
    assert inst.gpus == ("g1", "g2") and inst.tp == 2
    assert Instance("decode", 3, ("g1", "g2"), 2) == inst
    for bad in (("train", 0, ("g1",)), ("prefill", 0, ()), ("prefill", 0, ("g1", "g1")),
                ("prefill", 0, ("g1", "g2"), 3)):
        with pytest.raises(ValueError):
            Instance(*bad)


def expected_fit(f, placement, ptp, dtp, np_, nd):
    """Whether the request fits, from the rules in the brief, not from the code."""
    gps, servers, n = f.params["gpus_per_server"], len(f.servers()), len(f.hosts)
    if placement in ("aligned", "cross-rail"):
        if any(tp > gps and tp % gps for tp in (ptp, dtp)):
            return False
        size, total = (lambda tp: max(1, tp // gps)), servers
    else:
        size, total = (lambda tp: tp), n
    if np_ is None and nd is None:
        return size(ptp) <= total // 2 and size(dtp) <= total // 2
    if np_ is None:
        return nd * size(dtp) + size(ptp) <= total
    if nd is None:
        return np_ * size(ptp) + size(dtp) <= total
    return np_ * size(ptp) + nd * size(dtp) <= total


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(["zcube44", "roft84"]), placement=st.sampled_from(PLACEMENTS),
       ptp=st.integers(1, 16), dtp=st.integers(1, 16),
       np_=st.none() | st.integers(1, 6), nd=st.none() | st.integers(1, 6),
       seed=st.integers(0, 3))
def test_no_gpu_in_two_instances(name, placement, ptp, dtp, np_, nd, seed):
    f = fab(name)
    ok = expected_fit(f, placement, ptp, dtp, np_, nd)
    try:
        dep = deploy(f, ptp, dtp, np_, nd, placement=placement, seed=seed)
    except ValueError:
        assert not ok
        return
    assert ok
    gpus = all_gpus(dep)
    assert len(gpus) == len(set(gpus)) and set(gpus) <= {h.name for h in f.hosts}
    assert all(i.tp == ptp and i.role == "prefill" for i in dep.prefill)
    assert all(i.tp == dtp and i.role == "decode" for i in dep.decode)
    assert np_ in (None, len(dep.prefill)) and nd in (None, len(dep.decode))
    if np_ is None and nd is None and ptp == dtp:                 # 1:1 GPUs by default
        assert len(dep.prefill) == len(dep.decode)


# -- KV layout ----------------------------------------------------------------------------
def inst(role, tp, prefix):
    return Instance(role, 0, tuple(f"{prefix}{i}" for i in range(tp)))


def by_rank(layout, p, d):
    return {(p.gpus.index(s), d.gpus.index(t)): frac for s, t, frac in layout}


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_gqa_equal_tp_sends_rank_i_to_rank_i(tp):
    p, d = inst("prefill", tp, "p"), inst("decode", tp, "d")
    assert by_rank(kv_layout(LLAMA, p, d), p, d) == {(i, i): 1 / tp for i in range(tp)}


def test_gqa_equal_tp_on_an_aligned_deployment():
    dep = deploy(fab("zcube44"), 4, 4, placement="aligned")
    p, d = dep.prefill[1], dep.decode[0]
    assert kv_layout(LLAMA, p, d) == [(p.gpus[i], d.gpus[i], 0.25) for i in range(4)]


def test_gqa_prefill_tp4_to_decode_tp2():
    p, d = inst("prefill", 4, "p"), inst("decode", 2, "d")
    got = by_rank(kv_layout(LLAMA, p, d), p, d)
    # decode rank j holds heads 4j..4j+3, two each on prefill ranks 2j and 2j+1
    assert got == {(0, 0): 0.25, (1, 0): 0.25, (2, 1): 0.25, (3, 1): 0.25}
    assert sum(got.values()) == 1.0


def test_gqa_prefill_tp2_to_decode_tp8():
    p, d = inst("prefill", 2, "p"), inst("decode", 8, "d")
    got = by_rank(kv_layout(LLAMA, p, d), p, d)
    assert got == {(j // 4, j): 1 / 8 for j in range(8)}


def test_gqa_more_ranks_than_kv_heads_replicates_heads():
    p, d = inst("prefill", 16, "p"), inst("decode", 16, "d")
    got = by_rank(kv_layout(LLAMA, p, d), p, d)
    assert got == {(i, i): 1 / 8 for i in range(16)}             # each head held twice
    p4 = inst("prefill", 4, "p")
    got = by_rank(kv_layout(LLAMA, p4, d), p4, d)
    assert got == {(j // 4, j): 1 / 8 for j in range(16)}
    assert sum(got.values()) == 2.0                              # decode_tp / kv_heads copies


@settings(max_examples=60, deadline=None)
@given(ptp=st.sampled_from([1, 2, 4, 8, 16, 32]), dtp=st.sampled_from([1, 2, 4, 8, 16, 32]))
def test_gqa_every_decode_rank_gets_exactly_its_shard(ptp, dtp):
    p, d = inst("prefill", ptp, "p"), inst("decode", dtp, "d")
    layout = kv_layout(LLAMA, p, d)
    assert all(frac > 0 and s != t for s, t, frac in layout)
    assert len({(s, t) for s, t, _ in layout}) == len(layout)
    for g in d.gpus:
        assert sum(fr for _, t, fr in layout if t == g) == pytest.approx(max(1 / dtp, 1 / 8))
    if ptp <= 8 and dtp <= 8:
        assert sum(fr for *_, fr in layout) == pytest.approx(1.0)


@pytest.mark.parametrize("senders", [1, 2])
def test_mla_every_decode_rank_gets_a_full_copy(senders):
    p, d = inst("prefill", 4, "p"), inst("decode", 2, "d")
    layout = kv_layout(GLM5, p, d, mla_senders=senders)
    assert {s for s, _, _ in layout} == set(p.gpus[:senders])
    assert {t for _, t, _ in layout} == set(d.gpus)
    assert all(fr == 1 / senders for *_, fr in layout)
    assert sum(fr for *_, fr in layout) == d.tp
    for g in d.gpus:
        assert sum(fr for _, t, fr in layout if t == g) == 1.0


def test_kv_layout_refusals():
    p, d = inst("prefill", 4, "p"), inst("decode", 4, "d")
    for bad in (0, 5, 1.0):
        with pytest.raises(ValueError, match="mla_senders"):
            kv_layout(GLM5, p, d, mla_senders=bad)
    with pytest.raises(ValueError, match="both"):
        kv_layout(LLAMA, p, Instance("decode", 0, ("d0", "p3")))
    with pytest.raises(ValueError, match="prefill"):
        kv_layout(LLAMA, d, p)
    with pytest.raises(ValueError, match="kv_heads"):
        kv_layout(LLAMA, inst("prefill", 3, "p"), d)
    with pytest.raises(ValueError, match="kv_heads"):
        kv_layout(LLAMA, p, inst("decode", 12, "d"))
    six = get_model({"preset": LLAMA, "name": "six-heads", "kv_heads": 6})
    assert len(kv_layout(six, inst("prefill", 3, "p"), inst("decode", 6, "d"))) == 6


# -- the rail property on real wiring -----------------------------------------------------
def shared_switches(f, a, b):
    return {s for s, _ in f.attachments(a)} & {s for s, _ in f.attachments(b)}


def test_zcube_aligned_pairs_share_a_b_switch_and_cross_rail_pairs_share_none():
    f = fab("zcube44")
    for placement in ("aligned", "cross-rail"):
        dep = deploy(f, 4, 4, placement=placement)
        for p, d in pairs(dep):
            for src, dst, _ in kv_layout(LLAMA, p, d):
                shared = shared_switches(f, src, dst)
                if placement == "aligned":
                    assert shared == {f"b{f.host(src).rank}"}
                    assert f.switch(shared.pop()).group == "B"
                else:
                    assert shared == set()                        # needs a 2-switch path


def test_roft_aligned_pairs_share_a_rail_leaf():
    f = fab("roft44")
    for placement, same in (("aligned", True), ("cross-rail", False)):
        dep = deploy(f, 4, 4, placement=placement)
        for p, d in pairs(dep):
            for src, dst, _ in kv_layout(LLAMA, p, d):
                assert bool(shared_switches(f, src, dst)) is same
