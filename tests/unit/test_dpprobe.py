"""The datapath probe: its kernel stamps, its figures, and where the record keeps them."""
import time

from testbed.core import fidelity
from traffic import delay_probe

GOOD = {"datapath": {"p50": 0.2, "p99": 0.5, "max": 0.6}, "machine_idle": {"mean": 0.5,
                                                                           "min": 0.3},
        "window_s": 0.1, "isolated": {"p50": 1.02, "p99": 1.1, "n": 10, "kinds": []}}


def test_the_kernel_stamps_each_datagram_as_it_leaves_and_as_it_arrives():
    rx = delay_probe.receiver_socket(("127.0.0.1", 0))
    tx = delay_probe.sender_socket()
    before = time.time()
    for seq in range(3):
        tx.sendto(str(seq).encode(), rx.getsockname())
    time.sleep(0.05)
    sent, got = dict(delay_probe.tx_stamps(tx)), dict(delay_probe.rx_stamps(rx))
    assert sorted(sent) == sorted(got) == [0, 1, 2]        # the stamps' ids are the payloads'
    assert all(before <= sent[q] <= got[q] < before + 1 for q in range(3))
    assert delay_probe.tx_stamps(tx) == [] and delay_probe.rx_stamps(rx) == []     # read once
    tx.close()
    rx.close()


def test_the_probes_figures_count_stalls_and_losses_on_the_transfers_clock():
    t0 = 100.0
    recs = [(100.0, 100.0003), (100.005, 100.0081), (100.010, None), (100.015, 100.0152)]
    got, spans = fidelity.probe_figures(recs, t0, 0.03812)
    assert got["sent"] == 4 and got["lost"] == 1 and got["stalls"] == 1
    assert got["cpu_share"] == 0.0381
    assert got["delays_ms"] == [0.3, 3.1, 0.2]
    assert [(round(a, 4), round(b, 4), d) for a, b, d in spans] == [(0.005, 0.0081, 3.1)]
    assert fidelity.probe_figures([], t0) == (None, [])


def test_the_record_pools_the_probe_over_repetitions_and_does_not_judge_it():
    one = {"sent": 3, "lost": 0, "stalls": 1, "delays_ms": [0.3, 0.4, 9.0], "cpu_share": 0.03}
    two = {"sent": 2, "lost": 1, "stalls": 0, "delays_ms": [0.5], "cpu_share": 0.04}
    stalled = {"windows": 1, "transfers": 5, "of": 10}
    rec = fidelity.record([{"ready_s": 1.0, "start_s": 1.0}],
                          [dict(GOOD, probe=one, stalled=stalled),
                           dict(GOOD, probe=two, stalled=dict(stalled, transfers=0))])
    assert rec["probe"] == {"sent": 5, "lost": 1, "p50_ms": 0.45, "p99_ms": 8.745,
                            "max_ms": 9.0, "stall_ms": 2.0, "stalls": 1, "cpu_share": 0.04}
    assert rec["stalled"] == {"windows": 2, "transfers": 5, "of": 20, "share": 0.25}
    assert rec["faithful"]                                   # recorded, not judged
    assert ("datapath probe p99 8.745 ms max 9.0 ms, 1 stalls over 2 ms (5 of 20 transfers "
            "in flight during one)") in fidelity.one_line(rec)
    bare = fidelity.record([{"ready_s": 1.0, "start_s": 1.0}], [GOOD])
    assert bare["probe"] is None and "datapath probe" not in fidelity.one_line(bare)


def test_each_transfer_carries_the_longest_stall_it_was_in_flight_through():
    from testbed.emulation.load_monitor import mark_worst
    recs = [(10.0, 10.0003), (10.1, 10.104), (10.2, 10.2025), (10.3, 10.3002)]
    _, stalls = fidelity.probe_figures(recs, 10.0)
    rows = [{"start_s": 0.0, "end_s": 0.05},           # before both stalls
            {"start_s": 0.05, "end_s": 0.25},          # through both: the longer counts
            {"start_s": 0.201, "end_s": 0.3},          # through the second
            {"start_s": 0.2, "end_s": None}]           # never finished
    mark_worst(rows, stalls, "stall_ms")
    assert [r["stall_ms"] for r in rows] == [0.0, 4.0, 2.5, None]
    assert fidelity.saturated(rows, stalls) == {"windows": 2, "transfers": 2, "of": 3}


def test_the_record_says_how_many_of_the_slowest_transfers_went_through_a_stall():
    ok = {"ready_s": 1.0, "start_s": 1.0}
    rows = [dict(ok, fct_ms=10.0 + i / 100, stall_ms=0.0) for i in range(198)]
    rows += [dict(ok, fct_ms=30.0, stall_ms=4.5), dict(ok, fct_ms=11.5, stall_ms=2.5)]
    stalled = {"windows": 2, "transfers": 2, "of": 200}
    rec = fidelity.record(rows, [dict(GOOD, stalled=stalled)])
    assert rec["stalled"] == {"windows": 2, "transfers": 2, "of": 200, "share": 0.01,
                              "tail": 1, "tail_of": 2}       # 30.0 went through one, 11.97 not
    assert "(2 of 200 transfers in flight during one, 1 of the slowest 2)" in fidelity.one_line(
        dict(rec, probe={"p99_ms": 0.6, "max_ms": 4.5, "stalls": 2, "stall_ms": 2.0}))
    older = fidelity.record([dict(ok, fct_ms=10.0)], [dict(GOOD, stalled=stalled)])
    assert "tail" not in older["stalled"]                     # rows without stall_ms
