"""The fidelity record: thresholds, verdicts and how compare and the report use them."""
import contextlib
import re
import time

from testbed.analysis.compare import comparison, to_text
from testbed.analysis.report_findings import findings
from testbed.core import fidelity

GOOD = {"datapath": {"p50": 0.2, "p99": 0.5, "max": 0.6}, "machine_idle": {"mean": 0.5,
                                                                           "min": 0.3},
        "window_s": 0.1, "isolated": {"p50": 1.02, "p99": 1.1, "n": 10, "kinds": []}}


def rows(late_ms):
    return [{"ready_s": 1.0, "start_s": 1.0 + x / 1000} for x in late_ms]


def test_a_run_inside_every_threshold_is_faithful():
    rec = fidelity.record(rows([0.1, 0.3, 0.5]), [GOOD])
    assert rec["faithful"] and rec["reasons"] == []
    assert rec["lateness_ms"]["max"] == 0.5 and rec["thresholds"] == fidelity.THRESHOLDS


def test_each_threshold_alone_makes_a_run_unfaithful_and_says_why():
    late = fidelity.record(rows([0.1, 9.0]), [GOOD])
    assert not late["faithful"] and "late" in late["reasons"][0]
    busy = fidelity.record(rows([0.1]), [dict(GOOD, datapath={"p50": 0.9, "p99": 0.97,
                                                              "max": 1.0})])
    assert not busy["faithful"] and "datapath" in busy["reasons"][0]
    for iso, word in (({"p50": 0.8, "p99": 0.9}, "median"), ({"p50": 1.0, "p99": 1.6}, "P99")):
        rec = fidelity.record(rows([0.1]), [dict(GOOD, isolated=iso)])
        assert not rec["faithful"] and word in rec["reasons"][0], rec["reasons"]


def test_the_worst_repetition_decides_and_the_model_has_no_record():
    worse = dict(GOOD, datapath={"p50": 0.5, "p99": 0.95, "max": 1.0})
    assert fidelity.record(rows([0.1]), [GOOD, worse])["datapath"]["p99"] == 0.95
    assert fidelity.record(rows([0.1]), [None]) is None
    assert "not measured" in fidelity.judge(None, None, None)["reasons"][0]


def loss(sent, got, dropped, judged=True):
    return {"sent_packets": sent, "received_packets": got, "queue_drops": dropped,
            "lost_in_emulator": max(0, sent - got - dropped),
            "lost_share": max(0, sent - got - dropped) / sent, "judged": judged}


def test_packets_lost_outside_the_queues_make_a_run_unfaithful_unless_faults_were_asked():
    clean = fidelity.record(rows([0.1]), [dict(GOOD, loss=loss(10_000, 9_990, 10))])
    assert clean["faithful"] and clean["loss"]["lost_in_emulator"] == 0
    lossy = fidelity.record(rows([0.1]), [dict(GOOD, loss=loss(10_000, 9_950, 10))])
    assert not lossy["faithful"] and "lost 40 of 10000 packets" in lossy["reasons"][0]
    # a run that fails a cable on purpose loses packets for real: recorded, not judged
    faults = fidelity.record(rows([0.1]), [dict(GOOD, loss=loss(10_000, 9_000, 0, False))])
    assert faults["faithful"] and faults["loss"]["lost_in_emulator"] == 1000
    # the worst judged repetition is the one kept
    both = fidelity.record(rows([0.1]), [dict(GOOD, loss=loss(100, 100, 0)),
                                         dict(GOOD, loss=loss(100, 90, 0))])
    assert both["loss"]["lost_in_emulator"] == 10 and not both["faithful"]
    assert "lost in the emulator 10 of 100 packets" in fidelity.one_line(both)


def test_the_live_views_server_is_judged_only_when_it_ran_and_its_busiest_share_counts():
    quiet = fidelity.record(rows([0.1]), [GOOD])
    assert quiet["faithful"] and "web_cpu_share" not in quiet
    assert "live view" not in fidelity.one_line(quiet)
    light = fidelity.record(rows([0.1]), [dict(GOOD, web_cpu_s=0.02, web_cpu_share=0.004),
                                          dict(GOOD, web_cpu_s=0.03, web_cpu_share=0.01)])
    assert light["faithful"] and light["web_cpu_s"] == 0.05
    assert light["web_cpu_share"] == 0.01 and "live view 0.01 of a core" in \
        fidelity.one_line(light)
    busy = fidelity.record(rows([0.1]), [dict(GOOD, web_cpu_s=0.02, web_cpu_share=0.004),
                                         dict(GOOD, web_cpu_s=1.5, web_cpu_share=0.3)])
    assert not busy["faithful"]
    assert busy["reasons"] == ["the live view's server took 30% of a core during the "
                               "workload > 5%"]


def summary(run, faithful, fct):
    rec = {"faithful": faithful, "reasons": [] if faithful else ["transfers started late"]}
    return {"run": run, "placement": "x", "fabric": run, "repetitions": 1,
            "cost": {"switches": 8, "switch_ports": 64, "switch_port_gbps": 12800},
            "transfers_verified": 10, "fct_ms": {"p50": fct, "p99": 2 * fct},
            "ttft_ms": {"p99": 100.0}, "fidelity": rec}


def test_compare_marks_unfaithful_runs_and_the_report_names_no_winner():
    runs = [summary("zc", True, 10.0), summary("rf", False, 30.0)]
    groups = comparison(runs)
    text = to_text(groups)
    assert "faithful" in text and "NOT FAITHFUL rf: transfers started late" in text
    said = " ".join(findings(groups, {r["run"]: r for r in runs}))
    assert "No winner is named" in said and "wins" not in said
    assert "did not keep up" in said and "host" not in said
    runs[1]["fidelity"]["machine_steal"] = {"mean": 0.1, "max": 0.42}    # the host held it back
    said = " ".join(findings(comparison(runs), {r["run"]: r for r in runs}))
    assert "No winner is named" in said and "did not keep up" not in said
    assert "the machine's host was busy: the hypervisor took up to 42% of the CPUs" in said
    runs[1]["fidelity"]["reasons"].append("the machine's host was busy; repeat when quieter")
    text = to_text(comparison(runs))
    assert "NOT FAITHFUL rf: transfers started late; the machine's host was busy; repeat " \
        "when quieter\n" in text and "more cores" not in text
    fair = [summary("zc", True, 10.0), summary("rf", True, 30.0)]
    # one repetition has no interval: the one rule names no winner, and says what would
    said = " ".join(findings(comparison(fair), {r["run"]: r for r in fair}))
    assert "No verdict on FCT p50 between zc and rf (10.00 vs 30.00 ms)" in said, said
    assert "--repetitions" in said and "lower" not in said


def with_reps(run, fcts, ttfts):
    """A faithful run of three repetitions (seeds 1-3) with these per-repetition figures."""
    doc = summary(run, True, sum(fcts) / 3)
    doc["repetitions"] = 3
    doc["per_rep"] = [{"seed": k + 1, "fct_ms": {"p50": f, "p99": 2 * f}, "ttft_ms": {"p99": t}}
                      for k, (f, t) in enumerate(zip(fcts, ttfts))]
    return doc


def test_the_report_judges_from_the_ratio_paired_by_seed():
    # seed to seed the FCTs move by 2x, but rf is 20% faster in every repetition
    runs = [with_reps("zc", [10.0, 20.0, 15.0], [100.0, 200.0, 150.0]),
            with_reps("rf", [8.0, 16.1, 12.0], [100.2, 199.0, 150.5])]
    said = " ".join(findings(comparison(runs), {r["run"]: r for r in runs}))
    assert "rf is lower on FCT p50" in said and "paired ratio rf/zc 0.80" in said, said
    assert "equivalence margin 1.0%" in said, said
    # TTFT 100.2/199.0/150.5 against 100/200/150: within 1% of 1, but the interval of three
    # reaches past the margin
    assert "zc and rf are not separated on TTFT p99" in said, said
    # the same TTFT in every repetition: level
    same = [with_reps("zc", [10.0, 20.0, 15.0], [100.0, 200.0, 150.0]),
            with_reps("rf", [8.0, 16.1, 12.0], [100.1, 200.2, 150.1])]
    said = " ".join(findings(comparison(same), {r["run"]: r for r in same}))
    assert "zc and rf are level on TTFT p99" in said, said
    mixed = [with_reps("zc", [10.0, 20.0, 15.0], [100.0, 200.0, 150.0]),
             with_reps("rf", [8.0, 24.0, 15.0], [100.0, 200.0, 150.0])]
    said = " ".join(findings(comparison(mixed), {r["run"]: r for r in mixed}))
    assert "zc and rf are not separated on FCT p50" in said, said
    # 0.8, 1.2, 1.0: about 1.0 with a wide spread, so no practical count settles it
    assert "no number of repetitions up to 1,000 would settle it" in said, said
    # 0.8, 0.9, 0.85 against 1: about 0.85, a winner in a few more repetitions
    wide = [with_reps("zc", [10.0, 20.0, 15.0], [100.0, 200.0, 150.0]),
            with_reps("rf", [8.0, 19.0, 12.0], [100.0, 200.0, 150.0])]
    said = " ".join(findings(comparison(wide), {r["run"]: r for r in wide}))
    assert re.search(r"about \d+ repetitions would settle it if the ratio and its spread "
                     r"stayed as measured \(--repetitions \d+\)", said), said


def test_thread_cpu_time_comes_in_nanoseconds_not_ticks():
    """The datapath monitor reads each thread's CPU time from schedstat: a thread that
    spins for 0.3 s shows about 0.3 s, at a resolution finer than /proc's 10 ms ticks."""
    import os
    import threading
    import time

    from testbed.emulation.load_monitor import _schedstat_times
    ids = {}

    def spin():
        ids["tid"] = threading.get_native_id()
        ids["before"] = _schedstat_times(os.getpid())[ids["tid"]]
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            pass
        ids["after"] = _schedstat_times(os.getpid())[ids["tid"]]
    t = threading.Thread(target=spin)
    t.start()
    t.join()
    used = ids["after"] - ids["before"]
    assert 0.15 < used < 0.35
    assert round(ids["after"] * 1e9) % 10_000_000 != 0


def span(start, end):
    return {"ready_s": start, "start_s": start, "end_s": end}


def test_transfers_in_flight_in_a_saturated_window_are_counted_summed_and_judged():
    hot = [(1.0, 1.1), (2.0, 2.1)]
    got = fidelity.saturated([span(0.5, 1.05), span(1.1, 1.9), span(1.95, 2.3),
                              span(3.0, 3.2), {"start_s": 1.0, "end_s": None}], hot)
    assert got == {"windows": 2, "transfers": 2, "of": 4}    # touching an edge is not in it
    assert fidelity.saturated([span(0.0, 1.0)], []) == {"windows": 0, "transfers": 0, "of": 1}
    rec = fidelity.record(rows([0.1]), [dict(GOOD, saturated=got),
                                        dict(GOOD, saturated={"windows": 0, "transfers": 0,
                                                              "of": 4})])
    assert rec["saturated"] == {"windows": 2, "transfers": 2, "of": 8, "share": 0.25}
    assert not rec["faithful"] and rec["reasons"] == [
        "2 of 8 transfers (25.0%) were in flight while the datapath's busiest thread ran at "
        "80% of a core or more in a 100 ms window > 1%: the FCT P99 may be the emulator's"]
    assert "in flight in a saturated datapath window 2 of 8 transfers" in fidelity.one_line(rec)
    few = {"windows": 1, "transfers": 1, "of": 100}                # one in a hundred: kept
    assert fidelity.record(rows([0.1]), [dict(GOOD, saturated=few)])["faithful"]
    two = {"windows": 1, "transfers": 2, "of": 100}
    assert not fidelity.record(rows([0.1]), [dict(GOOD, saturated=two)])["faithful"]
    assert fidelity.record(rows([0.1]), [GOOD])["saturated"] is None


def test_the_monitor_finds_the_windows_a_busy_thread_saturated():
    """A thread of this process spinning for 0.6 s loads the windows it ran in, on the
    clock the transfers' times are on (seconds from t0), and no window long after it (a
    third of a core at least: with tests running on every core beside it, the spinner does
    not always get half of one in any window)."""
    import os
    import threading
    import time

    from testbed.emulation.load_monitor import DatapathMonitor

    def spin():
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            pass
    t0 = time.time()
    with DatapathMonitor(os.getpid()) as monitor:
        time.sleep(0.25)
        began = time.time() - t0
        spinner = threading.Thread(target=spin)
        spinner.start()
        spinner.join()
        ended = time.time() - t0
        time.sleep(0.5)
    hot = monitor.hot(t0, 0.33)
    steal = monitor.summary()["machine_steal"]
    assert len(monitor.steal) == len(monitor.idle) and 0 <= steal["mean"] <= steal["max"] < 1
    assert hot and all(a < ended + 0.15 and b > began - 0.15 for a, b in hot)
    counted = fidelity.saturated([span(began, ended), span(ended + 0.3, ended + 0.45)], hot)
    assert counted["transfers"] == 1


def test_the_hypervisors_steal_is_recorded_from_the_worst_window_not_judged():
    calm, stolen = {"mean": 0.0, "max": 0.001}, {"mean": 0.01, "max": 0.12}
    rec = fidelity.record(rows([0.1]), [dict(GOOD, machine_steal=calm),
                                        dict(GOOD, machine_steal=stolen)])
    assert rec["machine_steal"] == stolen and rec["faithful"]
    assert "machine idle 0.5 (steal max 0.12)," in fidelity.one_line(rec)
    assert fidelity.record(rows([0.1]), [GOOD])["machine_steal"] is None


def test_a_run_not_faithful_names_the_hypervisors_steal_when_it_was_high():
    stolen = dict(GOOD, machine_steal={"mean": 0.01, "max": 0.27})
    late = fidelity.record(rows([0.1, 9.0]), [stolen])
    assert not late["faithful"] and len(late["reasons"]) == 2
    assert late["reasons"][1].startswith("the hypervisor took up to 27% of the CPUs")
    assert fidelity.record(rows([0.1]), [stolen])["reasons"] == []      # faithful: no note
    calm = fidelity.record(rows([0.1, 9.0]), [dict(GOOD, machine_steal={"mean": 0.0,
                                                                         "max": 0.1})])
    assert len(calm["reasons"]) == 1


def test_a_repetition_is_held_back_by_the_host_when_unfaithful_with_steal_noted():
    stolen = dict(GOOD, machine_steal={"mean": 0.01, "max": 0.27})
    busy = fidelity.held_back(rows([0.1, 9.0]), stolen)
    assert busy["cause"] == "host" and busy["steal_max"] == 0.27
    assert "late" in busy["reasons"][0] and "host was busy" in fidelity.held_back_text(busy)
    assert fidelity.held_back(rows([0.1]), stolen) is None                 # faithful
    assert fidelity.held_back(rows([0.1, 9.0]), None) is None              # not measured
    hot = dict(stolen, datapath={"p50": 0.5, "p99": 0.95, "max": 0.99})
    assert fidelity.held_back(rows([0.1]), hot)["cause"] == "host"         # any reason


def test_a_repetition_late_alone_without_steal_is_held_back_by_the_machine():
    calm = dict(GOOD, machine_steal={"mean": 0.0, "max": 0.1})
    late = fidelity.held_back(rows([0.1, 9.0]), calm)
    assert late["cause"] == "late" and late["steal_max"] == 0.1
    assert len(late["reasons"]) == 1 and late["reasons"][0].startswith(fidelity.LATE)
    assert "the datapath kept up" in fidelity.held_back_text(late)
    # late while the datapath fell behind, or with isolated transfers off: the emulator's
    hot = dict(calm, datapath={"p50": 0.5, "p99": 0.95, "max": 0.99})
    assert fidelity.held_back(rows([0.1, 9.0]), hot) is None
    slow = dict(calm, isolated={"p50": 1.3, "p99": 1.4})
    assert fidelity.held_back(rows([0.1, 9.0]), slow) is None
    assert fidelity.held_back(rows([0.1]), hot) is None                    # not late at all


class Session:
    """Runs the same work each time; the emulator's records come from ``lateness``,
    one list per run (the last repeated), the hypervisor taking ``steal`` of the CPUs in
    a window throughout."""

    def __init__(self, *lateness, steal=0.3):
        self.lateness, self.runs, self.remeasured = list(lateness), 0, 0
        self.steal = steal

    def remeasure(self):
        self.remeasured += 1

    def run(self, work, faults=None):
        from testbed.core.backend import WorkloadResult
        late = self.lateness[min(self.runs, len(self.lateness) - 1)]
        self.runs += 1
        return WorkloadResult(rows(late), [], None, None,
                              dict(GOOD, machine_steal={"mean": 0.02, "max": self.steal}))


def test_late_starts_that_come_back_stop_running_again_for_the_rest_of_the_session():
    from testbed.experiment.repetitions import run_with_retries
    stopped, told = {}, []
    first = Session([9.0], [0.1], steal=0.0)               # late, then on time: no stop
    assert len(run_with_retries(first, None, None, 1, 2, told.append, stopped=stopped)[1]) == 1
    assert first.runs == 2 and stopped == {}
    again = Session([9.0], steal=0.0)                      # late twice: stops after one more
    got, aside = run_with_retries(again, None, None, 1, 2, told.append, stopped=stopped,
                                  tag={"rep": 1})
    assert again.runs == 2 and len(aside) == 1 and again.remeasured == 1
    assert stopped == {"late": [{"rep": 1, "cause": "late", "how": "late again"}]}
    assert told[-1].endswith("not run again for late starts")
    later = Session([9.0], steal=0.0)                      # kept as run
    got, aside = run_with_retries(later, None, None, 1, 2, told.append, stopped=stopped,
                                  tag={"rep": 2})
    assert later.runs == 1 and aside == [] and not fidelity.record(
        got.rows, [got.fidelity])["faithful"]
    assert stopped["late"][-1] == {"rep": 2, "cause": "late", "how": "not run again"}
    host = Session([9.0], [0.1], steal=0.3)                # the hypervisor's: still run again
    assert len(run_with_retries(host, None, None, 1, 2, told.append, stopped=stopped)[1]) == 1
    assert host.runs == 2 and len(stopped["late"]) == 2


def test_a_repetition_held_back_by_the_host_is_run_again_and_the_last_kept():
    from testbed.experiment.repetitions import run_with_retries
    told = []
    got, aside = run_with_retries(Session([9.0], [0.1]), None, None, 1, 2, told.append)
    assert fidelity.record(got.rows, [got.fidelity])["faithful"]
    assert len(aside) == 1 and aside[0]["steal_max"] == 0.3 and len(told) == 1
    assert "up to 30% of the CPUs" in told[0]
    sess = Session([9.0])                                  # never better: kept after 2 more
    got, aside = run_with_retries(sess, None, None, 1, 2, told.append)
    assert sess.runs == 3 and len(aside) == 2 and sess.remeasured == 2
    assert not fidelity.record(got.rows, [got.fidelity])["faithful"]
    sess = Session([9.0])
    assert run_with_retries(sess, None, None, 1, 0, told.append)[1] == [] and sess.runs == 1
    assert "1 repetition(s) run again (1 host busy)" in fidelity.one_line(
        dict(fidelity.record(rows([0.1]), [GOOD]), set_aside=[{}]))
    assert "3 repetition(s) run again (1 host busy, 2 started late)" in fidelity.one_line(
        dict(fidelity.record(rows([0.1]), [GOOD]), set_aside=[
            {"cause": "late"}, {"cause": "host"}, {"cause": "late"}]))


def test_a_repetition_late_without_steal_is_run_again_once_by_default():
    from testbed.experiment.repetitions import run_with_retries
    told = []
    sess = Session([9.0], [0.1])
    sess.steal = 0.05
    got, aside = run_with_retries(sess, None, None, 1, 1, told.append)
    assert fidelity.record(got.rows, [got.fidelity])["faithful"] and sess.runs == 2
    assert [a["cause"] for a in aside] == ["late"] and "started late" in told[0]
    sess = Session([9.0])                                # late again: kept, and says so
    sess.steal = 0.05
    got, aside = run_with_retries(sess, None, None, 1, 1, told.append)
    assert sess.runs == 2 and len(aside) == 1
    assert not fidelity.record(got.rows, [got.fidelity])["faithful"]


def test_the_reports_fidelity_table_counts_the_repetitions_run_again():
    from testbed.analysis.report import _fidelity_rows
    rec = dict(fidelity.record(rows([0.1]), [GOOD]), set_aside=[{"rep": 2}])
    [row] = _fidelity_rows({"zc": {"fidelity": rec}, "model": {"fidelity": None}})
    assert row[0] == "zc" and row[-2] == 1 and row[-1] == "-"
    [row] = _fidelity_rows({"zc": {"fidelity": fidelity.record(rows([0.1]), [GOOD])}})
    assert row[-2] == 0                                   # a record from before the key


def test_isolated_transfers_are_measured_again_while_the_host_steals_and_the_least_kept():
    from testbed.emulation.isolated import least_stolen
    tries = iter([({"p50": 1.4}, 0.40), ({"p50": 1.2}, 0.20), ({"p50": 1.9}, 0.30)])
    got = least_stolen(lambda: next(tries), 3)
    assert got == {"p50": 1.2, "steal_max": 0.2, "tries": 3}      # by steal, not by ratio
    tries = iter([({"p50": 1.45}, 0.13), ({"p50": 1.0}, 0.05)])   # two ticks are enough
    assert least_stolen(lambda: next(tries), 3) == {"p50": 1.0, "steal_max": 0.05, "tries": 2}
    tries = iter([({"p50": 1.4}, 0.40), ({"p50": 1.3}, 0.05), ({"p50": 1.0}, 0.0)])
    assert least_stolen(lambda: next(tries), 3) == {"p50": 1.3, "steal_max": 0.05, "tries": 2}
    calls = []
    assert least_stolen(lambda: calls.append(1) or ({"p50": 1.0}, 0.05), 3)["tries"] == 1
    assert len(calls) == 1                                          # a quiet host: once


def test_the_datapath_load_of_a_run_pools_every_repetitions_windows():
    # 99 repetitions of 100 calm windows and one with 30 windows over the threshold: its own
    # p99 is 0.9, but over the run's 10,000 windows those 30 are 0.3%, under the p99
    calm = dict(GOOD, datapath={"p50": 0.3, "p99": 0.3, "max": 0.3}, busiest=[0.3] * 100)
    hot = dict(GOOD, datapath={"p50": 0.3, "p99": 0.9, "max": 0.9},
               busiest=[0.3] * 70 + [0.9] * 30)
    rec = fidelity.record(rows([0.1]), [calm] * 99 + [hot])
    assert rec["datapath"] == {"p50": 0.3, "p99": 0.3, "max": 0.9} and rec["faithful"]
    # 2% of the run's windows over it: the p99 is over, and so is the run
    hotter = dict(hot, busiest=[0.9] * 100)
    rec = fidelity.record(rows([0.1]), [calm] * 49 + [hotter])
    assert rec["datapath"]["p99"] == 0.9 and not rec["faithful"]
    assert "busiest" not in rec                              # the windows stay out of it
    # records without their windows: the worst repetition's figures, as before
    old = fidelity.record(rows([0.1]), [GOOD, dict(GOOD, datapath=hot["datapath"])])
    assert old["datapath"] == hot["datapath"] and not old["faithful"]


def test_a_run_held_back_by_the_host_is_named_and_a_calm_or_faithful_one_is_not():
    good = fidelity.record(rows([0.1]), [GOOD])
    busy = dict(good, faithful=False, reasons=["transfers started late"],
                machine_steal={"max": 0.5, "mean": 0.1})
    calm = dict(busy, machine_steal={"max": 0.05, "mean": 0.01})
    docs = [{"run": "zcube", "fidelity": busy}, {"run": "roft", "fidelity": calm},
            {"run": "roft-spray", "fidelity": good}, {"run": "model", "fidelity": None}]
    assert fidelity.runs_held_back(docs) == ["zcube (steal max 50%)"]
    assert fidelity.runs_held_back(docs[1:]) == []


def test_waiting_for_a_quiet_host_stops_at_the_first_calm_span_or_at_the_limit():
    from testbed.emulation.load_monitor import wait_quiet
    spans = iter([0.4, 0.2, 0.05, 0.6])
    assert wait_quiet(30, 600, lambda s: next(spans)) == (True, 90)
    assert wait_quiet(30, 60, lambda s: 0.3) == (False, 60)
    assert wait_quiet(30, 0, lambda s: 0.0) == (True, 30)


def test_the_watch_for_steal_wakes_every_cpu_often_and_leaves_nothing_running():
    """A hypervisor's steal shows when a CPU that has work waits for the host, so the watch
    for a quiet host runs a process per CPU that wakes every half millisecond: each wakes
    hundreds of times a second, ends itself, and is reaped."""
    import psutil

    from testbed.emulation import load_monitor
    wakes = []
    with load_monitor.cpus_waking(1.0, cpus=2) as procs:
        time.sleep(0.8)
        for proc in procs:
            wakes.append(psutil.Process(proc.pid).num_ctx_switches().voluntary)
    assert len(procs) == 2 and min(wakes) > 200, wakes
    assert all(proc.returncode == 0 for proc in procs)
    assert not [c for c in psutil.Process().children() if c.pid in {p.pid for p in procs}]


def test_waiting_for_a_quiet_host_watches_with_the_cpus_waking(monkeypatch):
    from testbed.emulation import load_monitor
    seen = []

    @contextlib.contextmanager
    def busy(seconds, cpus=None):
        seen.append(seconds)
        yield []
    monkeypatch.setattr(load_monitor, "cpus_waking", busy)
    quiet, waited = load_monitor.wait_quiet(0.3, 0.3)
    assert waited == 0.3 and seen and seen[0] >= 0.3


def test_transfers_in_flight_while_the_hypervisor_took_the_cpus_are_judged_and_run_again():
    """Steal stretches the transfers in flight without delaying a start: more than one in a
    hundred of them in a window the hypervisor took 15% of, and the run is not faithful,
    with the host named, so that the repetition is run again."""
    stolen = [(1.0, 1.1)]
    got = fidelity.saturated([span(0.5, 1.05), span(1.2, 1.4)], stolen)
    assert got == {"windows": 1, "transfers": 1, "of": 2}
    busy = {"mean": 0.05, "max": 0.32}
    rec = fidelity.record(rows([0.1]), [dict(GOOD, stolen=got, machine_steal=busy)])
    assert rec["stolen"] == {"windows": 1, "transfers": 1, "of": 2, "share": 0.5}
    assert not rec["faithful"] and rec["reasons"][0] == (
        "1 of 2 transfers (50.0%) were in flight while the hypervisor took 15% of the CPUs "
        "or more in a 100 ms window > 1%: the FCT P99 may be the host's")
    assert "in a stolen window 1 of 2" in fidelity.one_line(rec)
    why = fidelity.held_back(rows([0.1]), dict(GOOD, stolen=got, machine_steal=busy))
    assert why["cause"] == "host" and why["steal_max"] == 0.32
    few = {"windows": 1, "transfers": 1, "of": 100}                # one in a hundred: kept
    assert fidelity.record(rows([0.1]), [dict(GOOD, stolen=few, machine_steal=busy)])[
        "faithful"]
    assert fidelity.record(rows([0.1]), [GOOD])["stolen"] is None   # older records


def test_the_monitor_keeps_each_steal_window_on_the_transfers_clock():
    import time

    from testbed.emulation.load_monitor import DatapathMonitor
    t0 = time.time()
    with DatapathMonitor(None, window_s=0.05) as monitor:
        time.sleep(0.3)
    assert len(monitor.steal_spans) == len(monitor.steal) >= 3
    every = monitor.stolen(t0, 0.0)                                # every window reaches 0
    assert len(every) == len(monitor.steal)
    assert all(0 <= a < b < 0.5 for a, b in every)
    assert all(a1 <= a2 for (a1, _), (a2, _) in zip(every, every[1:]))
    assert monitor.stolen(t0, 1.01) == []                          # no window over 100%
    shared = monitor.steal_windows(t0)                             # with each window's share
    assert [(a, b) for a, b, _ in shared] == every
    assert [x for _, _, x in shared] == monitor.steal


def test_each_transfer_carries_the_worst_steal_of_the_windows_it_was_in_flight_in():
    from testbed.emulation.load_monitor import mark_worst
    windows = [(0.0, 0.1, 0.0), (0.1, 0.2, 0.0476), (0.2, 0.3, 0.15), (0.3, 0.4, 0.0)]
    rows = [{"start_s": 0.02, "end_s": 0.08},        # inside a calm window
            {"start_s": 0.05, "end_s": 0.15},        # reaches the one-tick window
            {"start_s": 0.15, "end_s": 0.35},        # spans it and the busier one
            {"start_s": 0.31, "end_s": 0.5},         # after them; past the last window
            {"start_s": 0.1, "end_s": None}]         # never finished
    mark_worst(rows, windows, "steal")
    assert [r["steal"] for r in rows] == [0.0, 0.0476, 0.15, 0.0, None]
