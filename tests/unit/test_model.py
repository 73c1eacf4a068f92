"""The flow-level model backend (pure): max-min sharing, conservation, routing as emulated."""
from types import SimpleNamespace

import pytest

from controller.flows import path_addresses
from controller.pairings import flows_for
from controller.routing import RouteTable
from testbed.core.records import ROW_FIELDS
from testbed.emulation.link_sampler import FIELDS, LinkSampler
from testbed.model.simulate import (
    DEFAULT_EFFICIENCY,
    DEFAULT_HOP_BYTES,
    DEFAULT_LATENCY_S,
    directed_capacity,
    ecmp_choice,
    ecmp_salt,
    max_min_share,
    simulate,
)
from topologies import roft, zcube
from traffic.arrivals import poisson
from traffic.models import get_model
from traffic.placement import deploy
from traffic.types import Scale, Transfer
from traffic.workload import build_workload

MBPS = 100.0


def work(*transfers):
    return SimpleNamespace(transfers=list(transfers))


def goodput_bps(mbps, eff=DEFAULT_EFFICIENCY):
    return mbps * 1e6 / 8 * eff


def kv_workload(fab, placement="cross-rail", count=12, seed=1):
    f = MBPS / (fab.nic_gbps * 1000)
    return build_workload(poisson(8, count=count, seed=seed, input_tokens=8192),
                          deploy(fab, 4, 4, placement=placement), get_model("llama3-70b"),
                          scale=Scale(f, f))


# -- max-min fair sharing, worked by hand ------------------------------------------------------

def test_two_flows_sharing_one_link_get_half_each():
    assert max_min_share({"f1": ["L"], "f2": ["L"]}, {"L": 10.0}) == {"f1": 5.0, "f2": 5.0}


def test_flow_over_two_bottlenecks_gets_the_smaller_share_and_leftover_goes_to_others():
    # B (4) is shared by f1 and f3: 2 each.  f1 also crosses A (10), leaving 8 for f2.
    rates = max_min_share({"f1": ["A", "B"], "f2": ["A"], "f3": ["B"]}, {"A": 10.0, "B": 4.0})
    assert rates == pytest.approx({"f1": 2.0, "f2": 8.0, "f3": 2.0})


def test_parking_lot():
    # f0 crosses L1, L2, L3 (capacity 1 each); f1..f3 one link each: all get 1/2.
    flows = {"f0": [1, 2, 3], "f1": [1], "f2": [2], "f3": [3]}
    assert max_min_share(flows, {1: 1.0, 2: 1.0, 3: 1.0}) == pytest.approx(
        dict.fromkeys(flows, 0.5))


def test_three_levels_fill_in_order():
    # L1 (3) is shared by a, b, c and is the first bottleneck at 1 each (L3 offers a 1.5);
    # d then gets what c leaves on L2: 9.
    rates = max_min_share({"a": ["L1", "L3"], "b": ["L1"], "c": ["L1", "L2"], "d": ["L2"]},
                          {"L1": 3.0, "L2": 10.0, "L3": 1.5})
    assert rates == pytest.approx({"a": 1.0, "b": 1.0, "c": 1.0, "d": 9.0})
    # with L3 at 0.5, a is frozen first at 0.5 and b, c share the rest of L1: 1.25 each
    rates = max_min_share({"a": ["L1", "L3"], "b": ["L1"], "c": ["L1", "L2"], "d": ["L2"]},
                          {"L1": 3.0, "L2": 10.0, "L3": 0.5})
    assert rates == pytest.approx({"a": 0.5, "b": 1.25, "c": 1.25, "d": 8.75})


def test_capacity_is_scaled_per_direction_and_parallel_cables_add():
    fab = zcube(4, 4, parallel=2)
    cap = directed_capacity(fab, MBPS)
    assert cap[("g0", "a0")] == cap[("a0", "g0")] == 50.0         # one NIC port: half the NIC
    assert cap[("a0", "b1")] == cap[("b1", "a0")] == 100.0        # two 50 Mb/s cables
    assert len(cap) == 2 * (2 * 16) + 2 * 16                      # host hops + A<->B pairs
    sampler = LinkSampler(SimpleNamespace(fabric=fab, link_mbps=MBPS))  # thread not started
    assert list(cap.items()) == list(sampler.capacity.items())      # same hops, same order


# -- isolated transfers ---------------------------------------------------------------------------

# g0 -> g5 crosses two switches at 50 Mb/s per ZCube port, three at 100 Mb/s on ROFT
@pytest.mark.parametrize("fab,policy,store_s", [
    (zcube(4, 4), "zcube", 2 * DEFAULT_HOP_BYTES * 8 / 50e6),
    (roft(4, 4), "ecmp", 3 * DEFAULT_HOP_BYTES * 8 / 100e6)])
def test_isolated_transfer_takes_size_over_rate_over_efficiency_plus_delays(fab, policy, store_s):
    size = 1_000_000
    res = simulate(RouteTable(fab, policy), work(Transfer(0, "g0", "g5", size, 0.25)), MBPS)
    row = res.rows[0]
    delay = DEFAULT_LATENCY_S + store_s
    want_s = size * 8 / (MBPS * 1e6 * DEFAULT_EFFICIENCY) + delay
    assert row["fct_ms"] == pytest.approx(want_s * 1000, abs=1e-3)
    assert row["start_s"] == row["ready_s"] == 0.25
    assert row["first_byte_s"] == pytest.approx(0.25 + delay)
    assert row["end_s"] == pytest.approx(0.25 + want_s, abs=1e-6)
    assert set(row) == set(ROW_FIELDS)
    assert row["bytes_received"] == size and row["verified"] is True and row["status"] == "ok"


def test_efficiency_and_latency_are_parameters():
    res = simulate(RouteTable(roft(4, 4), "ecmp"), work(Transfer(0, "g0", "g5", 125_000, 0.0)),
                   MBPS, efficiency=0.5, hop_bytes=0, latency_s=0.01)
    assert res.rows[0]["fct_ms"] == pytest.approx(10 + 20)      # 1 Mb at 50 Mb/s + 10 ms
    with pytest.raises(ValueError, match="efficiency"):
        simulate(RouteTable(roft(4, 4)), work(), MBPS, efficiency=1.5)
    with pytest.raises(ValueError, match="hop_bytes"):
        simulate(RouteTable(roft(4, 4)), work(), MBPS, hop_bytes=-1)
    with pytest.raises(ValueError, match="latency_s"):
        simulate(RouteTable(roft(4, 4)), work(), MBPS, hop_bytes=0, latency_s=-1)
    with pytest.raises(ValueError, match="link_mbps"):
        simulate(RouteTable(roft(4, 4)), work(), 0)


def test_incast_shares_the_last_hop_and_leftover_goes_to_the_other_flow():
    # g0, g1, g2 -> g5 share g5's downlink: a third each.  g0 -> g6 shares g0's uplink with
    # g0 -> g5 and gets the two thirds it leaves; it finishes at 1.5 S/r, the others at 3 S/r.
    size = 500_000
    res = simulate(RouteTable(roft(4, 4), "ecmp"),
                   work(*(Transfer(k, s, d, size, 0.0) for k, (s, d) in
                          enumerate([("g0", "g5"), ("g1", "g5"), ("g2", "g5"), ("g0", "g6")]))),
                   MBPS, hop_bytes=0, latency_s=0.0)
    one = size / goodput_bps(MBPS) * 1000
    assert [r["fct_ms"] for r in res.rows] == pytest.approx([3 * one] * 3 + [1.5 * one],
                                                            abs=1e-3)


def test_a_flow_speeds_up_when_the_one_it_shared_with_leaves():
    # two flows into g5, the second half the size: both at r/2 until the short one is done
    # (after 2*S2/r), then the long one alone at r: total (S1 + S2) / r.
    s1, s2 = 400_000, 200_000
    res = simulate(RouteTable(roft(4, 4), "ecmp"),
                   work(Transfer(0, "g0", "g5", s1, 0.0), Transfer(1, "g1", "g5", s2, 0.0)),
                   MBPS, hop_bytes=0, latency_s=0.0)
    r = goodput_bps(MBPS)
    assert res.rows[1]["fct_ms"] == pytest.approx(2 * s2 / r * 1000, abs=1e-3)
    assert res.rows[0]["fct_ms"] == pytest.approx((s1 + s2) / r * 1000, abs=1e-3)


# -- routing as the emulation does it -------------------------------------------------------

def test_zcube_stripes_over_p1_and_p2():
    fab = zcube(4, 4)
    res = simulate(RouteTable(fab, "zcube"), work(Transfer(0, "g0", "g5", 1001, 0.0)), MBPS)
    got = res.link_bytes()
    # P1: g0 -> a0 -> b1 -> g5 sends the odd byte (flows_for order); P2: g0 -> b0 -> a1 -> g5
    p1 = {("g0", "a0"): 501, ("a0", "b1"): 501, ("b1", "g5"): 501}
    p2 = {("g0", "b0"): 500, ("b0", "a1"): 500, ("a1", "g5"): 500}
    assert got == {**p1, **p2}
    assert res.rows[0]["pairings"] == 2


def test_split_over_pairings_matches_flows_for():
    fab = zcube(4, 4)
    table = RouteTable(fab, "zcube")
    for size in (1, 2, 7, 1000, 1001):
        res = simulate(table, work(Transfer(0, "g3", "g9", size, 0.0)), MBPS)
        by_src_port = {}
        for (a, b), n in res.link_bytes().items():
            if a == "g3":
                by_src_port[fab.host("g3").ports[fab.host_port_toward("g3", b)].ip] = n
        want = {f["src"]: f["bytes"] for f in flows_for(table, "g3", "g9", size) if f["bytes"]}
        assert by_src_port == want


def test_zcube_short_uses_the_one_switch_shortcut_at_half_the_nic():
    fab = zcube(4, 4)
    res = simulate(RouteTable(fab, "zcube-short"), work(Transfer(0, "g0", "g4", 125_000, 0.0)),
                   MBPS, hop_bytes=0, latency_s=0.0)
    assert res.link_bytes() == {("g0", "b0"): 125_000, ("b0", "g4"): 125_000}
    assert res.rows[0]["fct_ms"] == pytest.approx(1e6 / (50e6 * DEFAULT_EFFICIENCY) * 1000,
                                                  abs=1e-3)


def test_ecmp_flow_stays_on_one_path_chosen_by_a_fixed_hash():
    fab = roft(4, 4)
    table = RouteTable(fab, "ecmp")
    paths = table.paths("g0", "g5")
    assert len(paths) == 4                                      # one per spine
    spines_used = set()
    for req in range(8):
        res = simulate(table, work(Transfer(req, "g0", "g5", 100_000, 0.0, chunk=0)), MBPS,
                       transport="tcp-per-transfer")
        used = {hop for hop in res.link_bytes() if hop[0].startswith("s") or hop[1].startswith("s")}
        spine = {h for hop in used for h in hop if h.startswith("s")}
        assert len(spine) == 1 and len(used) == 2                 # l0 -> sX -> l1, one path
        w = work(Transfer(req, "g0", "g5", 100_000, 0.0, chunk=0))
        want = paths[ecmp_choice(f"{ecmp_salt(w)}g0>g5>{req}>0>0", len(paths))]
        assert used == {(want[1], want[2]), (want[2], want[3])}
        spines_used |= spine
    assert len(spines_used) > 1                                 # different connections spread


def test_with_kept_open_connections_ecmp_pins_a_pairing_for_the_workload():
    table = RouteTable(roft(4, 4), "ecmp")
    paths = table.paths("g0", "g5")
    spines = set()
    for seed in range(6):                      # each workload draws its own path ...
        w = work(*(Transfer(req, "g0", "g5", 100_000 + seed, 0.2 * req, chunk=0)
                   for req in range(8)))
        want = paths[ecmp_choice(f"{ecmp_salt(w)}g0>g5>0", len(paths))]
        res = simulate(table, w, MBPS)
        used = {hop for hop in res.link_bytes() if hop[0].startswith("s") or hop[1].startswith("s")}
        assert used == {(want[1], want[2]), (want[2], want[3])}   # ... for all its transfers
        spines.add(want[2])
    assert len(spines) > 1


def test_every_subflow_follows_a_path_of_its_own_pairing():
    fab = zcube(4, 4)
    table = RouteTable(fab, "zcube")
    res = simulate(table, work(Transfer(0, "g2", "g13", 10_000, 0.0)), MBPS)
    hops = set(res.link_bytes())
    for p in table.paths("g2", "g13"):
        assert {(p[i], p[i + 1]) for i in range(len(p) - 1)} <= hops
        assert path_addresses(fab, p)[2] in (0, 1)


# -- balance, conservation, determinism -----------------------------------------------------

def test_zcube_all_to_all_loads_every_fabric_link_equally():
    fab = zcube(4, 4)
    names = [h.name for h in fab.hosts]
    size = 20_000
    w = work(*(Transfer(k, s, d, size, 0.0) for k, (s, d) in
               enumerate((s, d) for s in names for d in names if s != d)))
    res = simulate(RouteTable(fab, "zcube"), w, MBPS)
    got = res.link_bytes()
    fabric_hops = [hop for link in fab.switch_links()
                   for hop in ((link.a, link.b), (link.b, link.a))]
    assert len(fabric_hops) == 32
    # A[i] -> B[j] sends P1 of the 4 x 4 - 1 pairs from A[i]'s GPUs to B[j]'s GPUs
    assert {got[h] for h in fabric_hops} == {15 * size // 2}
    assert len({got[("g%d" % g, "a%d" % (g // 4))] for g in range(16)}) == 1
    assert len({got[("g%d" % g, "b%d" % (g % 4))] for g in range(16)}) == 1


@pytest.mark.parametrize("fab,policy", [(zcube(4, 4), "zcube"), (roft(4, 4), "ecmp")])
def test_conservation_bytes_in_equal_bytes_out_and_links_csv_adds_up(fab, policy):
    table = RouteTable(fab, policy)
    w = kv_workload(fab)
    res = simulate(table, w, MBPS, sample_s=0.1)
    assert [r["bytes_received"] for r in res.rows] == [t.bytes for t in w.transfers]
    # per directed hop: the rows of links add up to the bytes of the sub-flows crossing it
    per_hop = {}
    for row in res.links:
        per_hop[(row["src"], row["dst"])] = per_hop.get((row["src"], row["dst"]), 0) + row["bytes"]
    assert {h: b for h, b in per_hop.items() if b} == res.link_bytes()
    sent = {}
    for t in w.transfers:
        for hop, n in simulate(table, work(t), MBPS).link_bytes().items():
            sent[hop] = sent.get(hop, 0) + n
    # a transfer alone is another workload, whose ECMP draw is its own: under ecmp only the
    # GPUs' own links send the same bytes whatever the draw
    fixed = (lambda hop: True) if policy == "zcube" else (
        lambda hop: fab.is_host(hop[0]) or fab.is_host(hop[1]))
    assert ({h: n for h, n in res.link_bytes().items() if fixed(h)}
            == {h: n for h, n in sent.items() if fixed(h)})
    # what leaves the GPUs equals what enters them equals the workload's bytes
    up = sum(b for (a, _), b in res.link_bytes().items() if fab.is_host(a))
    down = sum(b for (_, d), b in res.link_bytes().items() if fab.is_host(d))
    assert up == down == w.bytes_total


def test_links_rows_cover_every_directed_hop_in_every_interval_and_integrate_rates():
    fab = roft(4, 4)
    size = 3_000_000                                   # 0.25 s at 100 Mb/s x 0.954
    lat = 0.02
    res = simulate(RouteTable(fab, "ecmp"), work(Transfer(0, "g0", "g4", size, 0.0)), MBPS,
                   sample_s=0.1, hop_bytes=0, latency_s=lat)
    hops = directed_capacity(fab, MBPS)
    assert res.intervals == 3
    assert len(res.links) == 3 * len(hops)
    assert all(set(r) == set(FIELDS) for r in res.links)
    assert [r["t_s"] for r in res.links[::len(hops)]] == [0.1, 0.2, 0.3]
    up = [r for r in res.links if (r["src"], r["dst"]) == ("g0", "l0")]
    r = goodput_bps(MBPS)
    end = lat + size / r
    want = [r * (0.1 - lat), r * 0.1, r * (end - 0.2)]
    assert [x["bytes"] for x in up] == pytest.approx(want, abs=1)
    assert sum(x["bytes"] for x in up) == size
    assert up[1]["mbps"] == pytest.approx(MBPS * DEFAULT_EFFICIENCY, abs=1e-3)
    assert up[1]["util"] == pytest.approx(DEFAULT_EFFICIENCY, abs=1e-4)
    idle = [x for x in res.links if (x["src"], x["dst"]) == ("g1", "l1")]
    assert [x["bytes"] for x in idle] == [0, 0, 0]


def test_link_summary_is_what_the_sampler_summary_makes_of_the_rows():
    for fab, policy in ((zcube(4, 4), "zcube"), (roft(4, 4), "ecmp")):
        res = simulate(RouteTable(fab, policy), kv_workload(fab), MBPS, sample_s=0.2)
        want = LinkSampler.summary(SimpleNamespace(rows=res.links))
        assert res.link_summary() == want
        assert 0 < want["mean"] <= want["max"] <= 1
    assert simulate(RouteTable(fab, policy), work(), MBPS).link_summary() is None


def test_deterministic():
    fab = roft(4, 4)
    w = kv_workload(fab, placement="random", count=16, seed=3)
    a = simulate(RouteTable(fab, "ecmp"), w, MBPS)
    b = simulate(RouteTable(fab, "ecmp"), w, MBPS)
    assert a.rows == b.rows and a.links == b.links
    assert (a.events, a.recomputations) == (b.events, b.recomputations)


def test_workload_rows_and_event_counts():
    fab = zcube(4, 4)
    w = kv_workload(fab, placement="aligned")
    res = simulate(RouteTable(fab, "zcube"), w, MBPS)
    assert len(res.rows) == len(w.transfers)
    assert [(r["request"], r["chunk"], r["src"], r["dst"]) for r in res.rows] == \
        [(t.request, t.chunk, t.src, t.dst) for t in w.transfers]
    assert all(r["pairings"] == 2 for r in res.rows)
    assert res.events == 2 * sum(r["pairings"] for r in res.rows)
    assert 0 < res.recomputations <= res.events
    for r in res.rows:
        assert r["end_s"] >= r["first_byte_s"] >= r["start_s"] == r["ready_s"]
        ideal = r["bytes"] * 8 / (MBPS * 1e6 * DEFAULT_EFFICIENCY) * 1000
        assert r["fct_ms"] >= ideal + DEFAULT_LATENCY_S * 1000 - 1e-3


def test_zero_byte_subflows_finish_when_they_start():
    res = simulate(RouteTable(zcube(4, 4), "zcube"), work(Transfer(0, "g0", "g5", 1, 0.5)),
                   MBPS, hop_bytes=0, latency_s=0.001)
    assert res.rows[0]["end_s"] == pytest.approx(0.5 + 0.001 + 8 / (50e6 * DEFAULT_EFFICIENCY),
                                                 abs=1e-6)
    assert sum(res.link_bytes().values()) == 3


def test_csv_writes_the_same_rows(tmp_path):
    import csv
    fab = zcube(4, 4)
    res = simulate(RouteTable(fab, "zcube"), kv_workload(fab, count=4), MBPS)
    path = tmp_path / "links.csv"
    res.write_links_csv(str(path))
    with open(path) as f:
        got = list(csv.DictReader(f))
    assert tuple(got[0]) == FIELDS
    assert len(got) == len(res.links)
    assert [int(r["bytes"]) for r in got] == [r["bytes"] for r in res.links]


# -- properties -----------------------------------------------------------------------------------

def test_max_min_share_is_feasible_and_every_flow_has_a_bottleneck():
    """Max-min fairness, checked by its definition on random instances: no link is over
    capacity, and every flow crosses a saturated link on which no flow gets more than it."""
    import random
    rng = random.Random(7)
    for _ in range(200):
        links = list(range(rng.randint(1, 8)))
        cap = {link: rng.choice([1.0, 2.0, 2.5, 10.0]) for link in links}
        flows = {f: rng.sample(links, rng.randint(1, len(links)))
                 for f in range(rng.randint(1, 12))}
        rate = max_min_share(flows, cap)
        load = {link: sum(rate[f] for f in flows if link in flows[f]) for link in links}
        assert all(load[link] <= cap[link] * (1 + 1e-9) for link in links)
        for f, ls in flows.items():
            assert any(load[link] >= cap[link] * (1 - 1e-9)
                       and all(rate[g] <= rate[f] * (1 + 1e-9)
                               for g in flows if link in flows[g])
                       for link in ls), (flows, cap, rate)


def test_ecmp_choice_spreads_connections_evenly():
    counts = [0] * 4
    for req in range(4000):
        counts[ecmp_choice(f"g0>g5>{req}>0>0", 4)] += 1
    assert all(900 < c < 1100 for c in counts), counts
    assert ecmp_choice("anything", 1) == 0


def _reference_fcts(table, transfers, link_mbps, eff, lat):
    """A slow reference for single-path pairings: at every event, every active flow's rate
    is recomputed over the whole fabric.  FCTs in ms, as the model rounds them."""
    cap = {h: c * 1e6 / 8 * eff for h, c in directed_capacity(table.fabric, link_mbps).items()}
    pending = []                    # [start, bytes left, hops, transfer index]
    for i, t in enumerate(transfers):
        hops = {path_addresses(table.fabric, p)[0]: [(p[k], p[k + 1]) for k in range(len(p) - 1)]
                for p in table.paths(t.src, t.dst)}
        for f in flows_for(table, t.src, t.dst, t.bytes):
            pending.append([t.ready_s + lat, float(f["bytes"]), hops[f["src"]], i])
    pending.sort(key=lambda f: f[0])
    now, end, active = 0.0, [0.0] * len(transfers), []
    while pending or active:
        rate = max_min_share({id(f): f[2] for f in active}, cap)
        t_next = min([f[0] for f in pending[:1]] + [now + f[1] / rate[id(f)] for f in active])
        for f in active:
            f[1] -= rate[id(f)] * (t_next - now)
        now = t_next
        for f in [f for f in active if f[1] <= 1e-6]:
            active.remove(f)
            end[f[3]] = max(end[f[3]], now)
        while pending and pending[0][0] <= now:
            active.append(pending.pop(0))
    return [round((e - t.ready_s) * 1000, 3) for e, t in zip(end, transfers)]


@pytest.mark.parametrize("fab,policy", [(zcube(4, 4), "zcube"), (roft(4, 4), "shortest")])
def test_incremental_recomputation_matches_a_full_recomputation(fab, policy):
    import random
    rng = random.Random(11)
    names = [h.name for h in fab.hosts]
    transfers = []
    for k in range(40):
        s, d = rng.sample(names, 2)
        transfers.append(Transfer(k, s, d, rng.randint(1, 40) * 10_000,
                                  round(rng.uniform(0, 0.3), 3)))
    table = RouteTable(fab, policy)
    res = simulate(table, work(*transfers), MBPS, efficiency=0.9, hop_bytes=0, latency_s=0.002,
                   transport="tcp-per-transfer")      # the reference shares, never queues
    assert res.recomputations > 40
    assert [r["fct_ms"] for r in res.rows] == pytest.approx(
        _reference_fcts(table, transfers, MBPS, 0.9, 0.002), abs=2e-3)


def test_the_emulators_datapath_is_one_resource_weighted_by_switches_crossed():
    # two isolated transfers on different links: alone each runs at its port rate; with a
    # datapath of 100 Mb/s x switches they share it: ZCube g0->g5 and g2->g7 cross two
    # switches each, so each sub-flow (4 of them) gets 100 / (4 * 2) Mb/s of goodput
    table = RouteTable(zcube(4, 4), "zcube")
    w = work(Transfer(0, "g0", "g5", 125_000, 0.0), Transfer(1, "g2", "g7", 125_000, 0.0))
    free = simulate(table, w, MBPS, hop_bytes=0, latency_s=0.0)
    tied = simulate(table, w, MBPS, hop_bytes=0, latency_s=0.0, datapath_mbps=100)
    each = 62_500 * 8 / (50e6 * DEFAULT_EFFICIENCY)
    assert [r["fct_ms"] for r in free.rows] == pytest.approx([each * 1000] * 2, abs=1e-3)
    assert [r["fct_ms"] for r in tied.rows] == pytest.approx([62_500 * 8 / 12.5e6 * 1000] * 2,
                                                               abs=1e-3)
    assert free.link_bytes() == tied.link_bytes()          # the datapath is not a link
    with pytest.raises(ValueError, match="datapath_mbps"):
        simulate(table, w, MBPS, datapath_mbps=0)
