"""BBR's round-trip probe (PROBE_RTT: a window of 4 segments) in the fidelity record: the
transfers that started or ended in it, in the isolated transfers and the workload (no root)."""
from testbed.core import fidelity
from testbed.emulation.isolated import PROBING_CWND, probing

GOOD = {"datapath": {"p50": 0.2, "p99": 0.5, "max": 0.6}, "machine_idle": {"mean": 0.5,
                                                                           "min": 0.3},
        "window_s": 0.1, "isolated": {"p50": 1.02, "p99": 1.1, "n": 10, "kinds": []}}


def rows(n):
    return [{"ready_s": 1.0, "start_s": 1.0001} for _ in range(n)]


def test_a_transfer_is_in_the_probe_when_its_window_was_4_as_it_started_or_ended():
    got = [{"cwnd": 150, "cwnd_end": 180},              # neither
           {"cwnd": PROBING_CWND, "cwnd_end": 4},      # started in it
           {"cwnd": 184, "cwnd_end": 4},               # entered it on the way
           {"cwnd": 4, "cwnd_end": 154},               # left it on the way
           {"cwnd": 10, "cwnd_end": None},             # no end said: its start counts
           {"cwnd": None, "cwnd_end": 4},              # the sender said nothing (another
           {}]                                         # transport, the model): not counted
    assert probing(got) == {"transfers": 3, "of": 5}
    assert probing([]) == {"transfers": 0, "of": 0}


def test_the_record_sums_the_repetitions_and_says_it_without_judging():
    one = dict(GOOD, probing={"transfers": 2, "of": 100})
    two = dict(GOOD, probing={"transfers": 1, "of": 50})
    rec = fidelity.record(rows(3), [one, two])
    assert rec["faithful"]                                   # recorded, not judged
    assert rec["probing"] == {"transfers": 3, "of": 150, "share": 0.02}
    assert "3 of 150 transfers at a window of 4 segments" in fidelity.one_line(rec)
    calm = fidelity.record(rows(3), [dict(GOOD, probing={"transfers": 0, "of": 9})])
    assert "window of 4" not in fidelity.one_line(calm)
    assert fidelity.record(rows(3), [GOOD])["probing"] is None         # an older record


def test_the_isolated_transfers_say_how_many_ran_in_the_probe():
    iso = dict(GOOD["isolated"], probing=2, stalled=1)
    said = fidelity.one_line(fidelity.record(rows(1), [dict(GOOD, isolated=iso)]))
    assert "p99 1.1 (1 through a datapath stall) (2 at a window of 4)" in said
