"""The flow-level model's kept-open connections: with ``pool`` the transfers posted on one
(source address, destination address) connection are sent one after another, as
``traffic.kvpool`` sends them; with ``tcp-per-transfer`` they share from the start."""
from types import SimpleNamespace

import pytest

from controller.routing import RouteTable
from testbed.model.simulate import DEFAULT_EFFICIENCY, DEFAULT_HOP_BYTES, simulate
from topologies import roft, zcube
from traffic.arrivals import poisson
from traffic.models import get_model
from traffic.placement import deploy
from traffic.types import Scale, Transfer
from traffic.workload import build_workload

MBPS = 100.0
SIZE = 1_000_000
ROFT_SERIAL_S = SIZE * 8 / (MBPS * 1e6 * DEFAULT_EFFICIENCY)   # one port pairing at 100 Mb/s
ROFT_DELAY_S = 3 * DEFAULT_HOP_BYTES * 8 / (MBPS * 1e6)        # g0 -> g5: three switches


def work(*transfers):
    return SimpleNamespace(transfers=list(transfers))


def roft_table():
    return RouteTable(roft(4, 4), "ecmp")


def alone_fct_ms(table, t, **kw):
    return simulate(table, work(t), MBPS, **kw).rows[0]["fct_ms"]


# -- one pairing, two transfers ------------------------------------------------------------------

def test_pool_sends_the_second_transfer_on_a_pairing_after_the_first():
    table = roft_table()
    a, b = Transfer(0, "g0", "g5", SIZE, 0.0), Transfer(1, "g0", "g5", SIZE, 0.001)
    alone = alone_fct_ms(table, a)
    assert alone == pytest.approx((ROFT_DELAY_S + ROFT_SERIAL_S) * 1000, abs=1e-3)
    r1, r2 = simulate(table, work(a, b), MBPS, transport="pool").rows
    assert r1["fct_ms"] == pytest.approx(alone, rel=0.01)           # as if alone
    assert r2["end_s"] - r1["end_s"] == pytest.approx(ROFT_SERIAL_S, rel=1e-4)  # it waited
    # posted at 1 ms, its bytes follow the first's on the wire: no delay of its own
    assert r2["start_s"] == r2["ready_s"] == 0.001
    assert r2["first_byte_s"] == pytest.approx(r1["end_s"], abs=2e-6)
    assert r2["fct_ms"] == pytest.approx((r2["end_s"] - 0.001) * 1000, abs=2e-3)


def test_tcp_per_transfer_shares_the_port_between_transfers_on_a_pairing():
    table = roft_table()
    a, b = Transfer(0, "g0", "g5", SIZE, 0.0), Transfer(1, "g0", "g5", SIZE, 0.001)
    alone = alone_fct_ms(table, a, transport="tcp-per-transfer")
    r1, r2 = simulate(table, work(a, b), MBPS, transport="tcp-per-transfer").rows
    assert r1["fct_ms"] > 1.8 * alone                               # half the port most of the way
    # both run at half the rate while both are on: the first has 1 ms of full rate ahead,
    # so it finishes 1 ms (of full-rate bytes) before the second
    assert r2["end_s"] - r1["end_s"] == pytest.approx(0.001, abs=1e-5)
    assert r2["first_byte_s"] == pytest.approx(0.001 + ROFT_DELAY_S, abs=2e-6)


def test_a_transfer_posted_on_an_idle_connection_pays_its_delay_and_does_not_wait():
    table = roft_table()
    lat = 0.01
    a = Transfer(0, "g0", "g5", SIZE, 0.0)
    alone = alone_fct_ms(table, a, latency_s=lat)
    end1 = (lat + ROFT_DELAY_S + ROFT_SERIAL_S)
    # well after the first is done, and posted 5 ms before it is done: its bytes would only
    # arrive after the first's last ones anyway, so it starts after its own delay either way
    for ready in (end1 + 0.05, end1 - 0.005):
        b = Transfer(1, "g0", "g5", SIZE, round(ready, 6))
        r1, r2 = simulate(table, work(a, b), MBPS, latency_s=lat).rows
        assert r1["fct_ms"] == pytest.approx(alone, abs=1e-3)
        assert r2["fct_ms"] == pytest.approx(alone, abs=2e-3)
        assert r2["first_byte_s"] == pytest.approx(b.ready_s + lat + ROFT_DELAY_S, abs=2e-6)


def test_same_ready_time_goes_in_workload_order_then_each_pairing_on_its_own():
    # ZCube stripes over P1 and P2: two connections per GPU pair, each serialised on its own
    table = RouteTable(zcube(4, 4), "zcube")
    half_s = SIZE / 2 * 8 / (50e6 * DEFAULT_EFFICIENCY)               # half the bytes, 50 Mb/s
    big, small = Transfer(7, "g0", "g5", SIZE, 0.2), Transfer(3, "g0", "g5", SIZE // 10, 0.2)
    rb, rs = simulate(table, work(big, small), MBPS).rows
    assert rb["fct_ms"] == pytest.approx(alone_fct_ms(table, big), abs=1e-3)
    assert rs["end_s"] - rb["end_s"] == pytest.approx(half_s / 10, rel=1e-3)
    rs, rb = simulate(table, work(small, big), MBPS).rows           # the other way round
    assert rs["fct_ms"] == pytest.approx(alone_fct_ms(table, small), abs=1e-3)
    assert rb["end_s"] - rs["end_s"] == pytest.approx(half_s, rel=1e-3)


def test_zero_byte_subflows_queued_behind_a_transfer_finish_with_it():
    # 1-byte transfers: P1 sends the byte, P2 nothing; both wait behind the big one
    table = RouteTable(zcube(4, 4), "zcube")
    big = Transfer(0, "g0", "g5", SIZE, 0.0)
    tiny = [Transfer(k, "g0", "g5", 1, 0.001 * k) for k in (1, 2, 3)]
    res = simulate(table, work(big, *tiny), MBPS)
    end = res.rows[0]["end_s"]
    one_byte_s = 8 / (50e6 * DEFAULT_EFFICIENCY)
    for k, row in enumerate(res.rows[1:], 1):
        assert row["end_s"] == pytest.approx(end + k * one_byte_s, abs=2e-6)
    assert res.events == 2 * sum(r["pairings"] for r in res.rows)


# -- different connections -------------------------------------------------------------------

def test_transfers_on_different_pairings_are_not_serialised():
    table = roft_table()
    a, b = Transfer(0, "g0", "g5", SIZE, 0.0), Transfer(1, "g2", "g7", SIZE, 0.001)
    assert not set(simulate(table, work(a), MBPS).link_bytes()) & set(
        simulate(table, work(b), MBPS).link_bytes())                 # no link in common
    rows = simulate(table, work(a, b), MBPS).rows
    assert [r["fct_ms"] for r in rows] == pytest.approx(
        [alone_fct_ms(table, a), alone_fct_ms(table, b)], rel=1e-6)


def test_one_source_to_two_destinations_is_two_connections_that_share():
    # g0 -> g5 and g0 -> g6 share g0's uplink, each on its own connection: half each
    table = roft_table()
    a, b = Transfer(0, "g0", "g5", SIZE, 0.0), Transfer(1, "g0", "g6", SIZE, 0.0)
    r1, r2 = simulate(table, work(a, b), MBPS, hop_bytes=0).rows
    assert r1["fct_ms"] == r2["fct_ms"] == pytest.approx(2 * ROFT_SERIAL_S * 1000, abs=1e-3)


# -- a whole workload ---------------------------------------------------------------------------

def kv_workload(fab, count=12, seed=1):
    f = MBPS / (fab.nic_gbps * 1000)
    return build_workload(poisson(8, count=count, seed=seed, input_tokens=8192),
                          deploy(fab, 4, 4, placement="cross-rail"), get_model("llama3-70b"),
                          scale=Scale(f, f))


@pytest.mark.parametrize("fab,policy", [(zcube(4, 4), "zcube"), (roft(4, 4), "ecmp")])
def test_fifo_keeps_rows_and_bytes(fab, policy):
    table = RouteTable(fab, policy)
    w = kv_workload(fab)
    pool = simulate(table, w, MBPS, transport="pool")
    own = simulate(table, w, MBPS, transport="tcp-per-transfer")
    for res in (pool, own):
        assert len(res.rows) == len(w.transfers)
        assert [(r["request"], r["chunk"], r["bytes_received"]) for r in res.rows] == \
            [(t.request, t.chunk, t.bytes) for t in w.transfers]
        assert all(r["verified"] is True and r["status"] == "ok" for r in res.rows)
        assert all(r["end_s"] >= r["first_byte_s"] >= r["start_s"] == r["ready_s"]
                   for r in res.rows)
        up = sum(b for (a, _), b in res.link_bytes().items() if fab.is_host(a))
        down = sum(b for (_, d), b in res.link_bytes().items() if fab.is_host(d))
        assert up == down == w.bytes_total
        assert res.events == 2 * sum(r["pairings"] for r in res.rows)


def test_transfers_on_one_connection_never_overlap():
    # ROFT has one pairing per GPU pair; with no delay a transfer's bytes start when it is
    # posted or, if the one before it on its connection is still sending, when that one ends
    # (while sharing links with other connections' transfers)
    import random
    rng = random.Random(5)
    pairs = [("g0", "g5"), ("g0", "g6"), ("g1", "g5"), ("g2", "g7"), ("g4", "g0")]
    w = work(*(Transfer(k, *rng.choice(pairs), rng.randint(5, 50) * 10_000,
                        round(rng.uniform(0, 0.5), 4)) for k in range(60)))
    rows = simulate(roft_table(), w, MBPS, hop_bytes=0).rows
    by_pair: dict = {}
    for r in rows:
        by_pair.setdefault((r["src"], r["dst"]), []).append(r)
    waited = 0
    for pair_rows in by_pair.values():
        pair_rows.sort(key=lambda r: r["ready_s"])
        for prev, nxt in zip(pair_rows, pair_rows[1:]):
            assert nxt["first_byte_s"] == pytest.approx(max(nxt["ready_s"], prev["end_s"]),
                                                        abs=2e-6)
            waited += prev["end_s"] > nxt["ready_s"]
    assert waited                                    # the workload does queue transfers
