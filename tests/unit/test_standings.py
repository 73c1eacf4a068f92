"""Where each fabric wins and loses (testbed.analysis.verdict_table): verdicts only from faithful
runs whose paired interval separates, the kind of comparison, and the public claims."""
import pytest

from testbed.analysis import verdict_marks as marks
from testbed.analysis import verdict_table as st
from testbed.analysis.claims import claims
from testbed.analysis.compare import comparison
from testbed.analysis.verdict_table import budget, standings, table


def summary(run, builder, policy, ttft, fct99, *, gpus=16, port_gbps=12800.0,
            faithful=True, util=0.5, slo=None, hops=None):
    """A run summary with one FCT p99 and TTFT p99 per repetition (seeds 1, 2, ...)."""
    per_rep = [{"seed": k + 1, "fct_ms": {"p50": 10.0, "p99": f}, "ttft_ms": {"p99": t}}
               for k, (t, f) in enumerate(zip(ttft, fct99))]
    return {"run": run, "scenario": "s", "placement": "cross-rail", "fabric": run,
            "builder": builder, "policy": policy, "repetitions": len(ttft),
            "cost": {"switches": 8, "switch_ports": 64, "switch_port_gbps": port_gbps,
                     "gpus": gpus},
            "transfers_verified": 10, "fct_ms": {"p50": 10.0, "p99": max(fct99)},
            "ttft_ms": {"p99": max(ttft)}, "requests_per_s": 1.0,
            "slo_throughput_per_s": slo, "link_util": {"max": util, "mean": util / 4},
            "per_rep": per_rep, "fidelity": {"faithful": faithful, "reasons": []},
            "hops_mean": hops}


def rank(*runs):
    groups = comparison(list(runs))
    by_name = {r["run"]: r for r in runs}
    rows = standings(groups, by_name)
    return rows, claims(rows, by_name, groups)


def row(rows, run, metric):
    return next(r for r in rows if r["run"] == run and r["metric"] == metric)


ZCUBE_TTFT = [100.0, 110.0, 120.0, 105.0, 115.0]


def test_a_separated_faithful_interval_names_the_winner_with_its_load_and_budget():
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50, 52, 51, 49, 50], util=0.53)
    r = summary("roft", "roft", "ecmp", [t * 1.25 for t in ZCUBE_TTFT],
                [50, 53, 50, 49, 51], port_gbps=19200.0, util=0.81)
    rows, _ = rank(z, r)
    ttft = row(rows, "roft", "TTFT p99 ms")
    assert ttft["winner"] == "zcube" and ttft["verdict"] == "reference lower"
    assert ttft["ratio"] == pytest.approx(1.25) and ttft["lo"] <= 1.25 <= ttft["hi"]
    assert (ttft["util_max_ref"], ttft["util_max_run"]) == (0.53, 0.81)
    assert ttft["budget"] == "equal GPUs, 1.50x the switch ports"
    # 0.98-1.02 crosses the 1% margin: no winner, and not level either
    assert row(rows, "roft", "FCT p99 ms")["winner"] == ""
    assert row(rows, "roft", "FCT p99 ms")["verdict"] == "not separated"
    assert row(rows, "roft", "FCT p99 ms")["margin"] == 0.01
    head, body = table(rows)
    assert len(head) == len(body[0]) and any("zcube lower" in b for b in body)


def test_no_winner_from_a_run_that_was_not_faithful_or_from_one_repetition():
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50] * 5)
    bad = summary("roft", "roft", "ecmp", [t * 2 for t in ZCUBE_TTFT], [100] * 5,
                  faithful=False)
    rows, said = rank(z, bad)
    assert all(r["winner"] == "" and r["verdict"].endswith("not faithful") for r in rows)
    assert any("TTFT P99 -40.6%" in s and "not faithful" in s for s in said)
    one = rank(summary("zcube", "zcube", "zcube", [100.0], [50.0]),
               summary("roft", "roft", "ecmp", [200.0], [90.0]))[0]
    assert all(r["verdict"] == "no verdict: one repetition, no interval" for r in one)


@pytest.mark.parametrize("factor, says", [
    (1 / (1 - 0.406), "reproduced"),                  # the claim's own ratio
    (1.25, "ZCube lower, by less than claimed"),
    (1.0, "not reproduced: not separated"),     # -1.0% to +0.8%: crosses the 1% margin
    (0.8, "contradicted: the Clos is lower here"),
])
def test_the_ttft_claim_is_judged_from_the_paired_interval(factor, says):
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50] * 5)
    jitter = [1.0, 1.01, 0.99, 1.0, 1.005]
    r = summary("roft", "roft", "ecmp", [t * factor * j for t, j in zip(ZCUBE_TTFT, jitter)],
                [50] * 5, port_gbps=19200.0)
    _, said = rank(z, r)
    ttft = [s for s in said if s.startswith("TTFT P99 -40.6%")]
    assert len(ttft) == 1 and f"; {says}." in ttft[0]
    cost = [s for s in said if s.startswith("switch and optics capex")]
    assert cost and "0.667x" in cost[0] and "not measured" in cost[0]


def test_a_difference_within_the_margin_names_no_winner():
    # the Clos's TTFT about 1% lower, a little spread: the interval leaves 1 but not the 1%
    # margin, so no winner; 0.3% lower with no spread is level
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50, 52, 51, 49, 50], util=0.5)
    jitter = [0.99, 0.994, 0.986, 0.99, 0.992]
    r = summary("roft", "roft", "ecmp", [t * j for t, j in zip(ZCUBE_TTFT, jitter)],
                [50, 53, 50, 49, 51], util=0.5)
    rows, said = rank(z, r)
    ttft = row(rows, "roft", "TTFT p99 ms")
    assert ttft["hi"] < 1 and (ttft["winner"], ttft["verdict"]) == ("", "not separated")
    claim = [s for s in said if s.startswith("TTFT P99 -40.6%")]
    assert claim and claim[0].endswith("not reproduced: not separated.")
    near = summary("roft", "roft", "ecmp", [t * 0.997 for t in ZCUBE_TTFT], [50] * 5, util=0.5)
    assert row(rank(z, near)[0], "roft", "TTFT p99 ms")["verdict"] == "level"
    # 10% lower: a winner, and the table states the margin it was judged with
    far = summary("roft", "roft", "ecmp", [t * 0.9 for t in ZCUBE_TTFT], [50] * 5, util=0.5)
    far_rows = rank(z, far)[0]
    assert row(far_rows, "roft", "TTFT p99 ms")["winner"] == "roft"
    head, body = table(far_rows)
    assert "margin" in head and any("1.0%" in b for b in body)
    assert marks.notes(far_rows) == []


def test_a_spraying_or_smaller_clos_is_not_taken_for_the_claims_baseline():
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50] * 5)
    spray = summary("roft-spray", "roft", "spray:4", [t * 1.7 for t in ZCUBE_TTFT], [50] * 5)
    small = summary("roft-8", "roft", "ecmp", [t * 1.7 for t in ZCUBE_TTFT], [50] * 5, gpus=8)
    rows, said = rank(z, spray, small)
    assert row(rows, "roft-spray", "TTFT p99 ms")["winner"] == "zcube"
    assert not [s for s in said if s.startswith("TTFT P99")]
    assert row(rows, "roft-8", "TTFT p99 ms")["budget"].startswith("8 GPUs against 16")


def test_budget_says_equal_cost_within_two_percent():
    a = {"cost": {"gpus": 16, "switch_port_gbps": 12800.0}}
    assert budget(a, {"cost": {"gpus": 16, "switch_port_gbps": 12900.0}}) == \
        "equal GPUs, equal cost"
    assert budget(a, {"cost": {"gpus": 16, "switch_port_gbps": 19200.0}}) == \
        "equal GPUs, 1.50x the switch ports"


def test_the_throughput_claim_needs_a_sweep():
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50] * 5, slo=4.6)
    r = summary("roft", "roft", "ecmp", ZCUBE_TTFT, [50] * 5, slo=4.0)
    said = rank(z, r)[1]
    assert any("inference throughput +15%" in s and "1.150x roft's" in s for s in said)
    said = rank(summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50] * 5),
                summary("roft", "roft", "ecmp", ZCUBE_TTFT, [50] * 5))[1]
    assert any("inference throughput +15%: not measured here" in s for s in said)


def test_no_throughput_figure_from_a_run_that_was_not_faithful():
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50] * 5, slo=4.6)
    r = summary("roft", "roft", "ecmp", ZCUBE_TTFT, [50] * 5, slo=4.0, faithful=False)
    said = [s for s in rank(z, r)[1] if s.startswith("inference throughput")]
    assert said == ["inference throughput +15%: s, cross-rail, roft: no verdict: a run was not "
                    "faithful."]


@pytest.mark.parametrize("util, hops, marked", [
    ((0.06, 0.05), (2.0, 1.0), True),        # the demo's aligned case: nothing contends
    ((0.56, 0.78), (2.0, 3.0), False),       # crossed under load: contention can explain it
    ((0.06, 0.05), (2.0, 2.0), False),       # the same switches crossed: nothing to blame
    ((0.06, 0.05), (None, 1.0), False),      # not measured: no claim either way
])
def test_an_fct_winner_at_light_load_across_switch_counts_is_marked(util, hops, marked):
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50, 52, 51, 49, 50], util=util[0],
                hops=hops[0])
    r = summary("roft", "roft", "ecmp", ZCUBE_TTFT, [40, 41, 40, 39, 42], util=util[1],
                hops=hops[1])
    rows, _ = rank(z, r)
    fct = row(rows, "roft", "FCT p99 ms")
    assert fct["winner"] == "roft"               # the measured verdict stands either way
    assert fct["note"] == ("light load" if marked else "")
    assert row(rows, "roft", "TTFT p99 ms")["note"] == ""       # level: nothing to mark
    body = table(rows)[1]
    assert any("roft lower (light load)" in b for b in body) is marked
    note = marks.light_note(rows)
    assert (note is not None) is marked
    if marked:
        assert "2.00 on zcube" in note and "1.00 switches per transfer on roft" in note
        assert "nanoseconds" in note


def test_the_reports_switches_sentence_blames_contention_only_under_load():
    light = st.switches_sentence({"zcube": 2.0, "roft": 1.0}, [0.06, 0.05])
    busy = st.switches_sentence({"zcube": 2.0, "roft": 3.0}, [0.56, 0.78])
    assert "zcube 2.00, roft 1.00" in light and "not the fabric" in light
    assert "fewer shared links" in busy and "not the fabric" not in busy


@pytest.mark.parametrize("backend, large, policy, marked", [
    ("emulation", True, "spray:4", True),     # the demo's spraying Clos
    ("emulation", False, "spray:4", False),   # segments capped: sub-flows interleave finely
    ("ns3", True, "spray:4", False),          # one-MTU packets
    ("emulation", True, "ecmp", False),       # a pinned connection is not sprayed
])
def test_an_fct_verdict_against_spraying_in_64kb_segments_is_marked(backend, large, policy,
                                                                   marked, tmp_path):
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50, 52, 51, 49, 50])
    r = summary("roft-spray", "roft", policy, ZCUBE_TTFT, [65, 66, 64, 67, 65])
    for s in (z, r):
        s.update(backend=backend, large_segments=large)
    rows, _ = rank(z, r)
    fct = row(rows, "roft-spray", "FCT p99 ms")
    assert fct["winner"] == "zcube"               # the measured verdict stands either way
    assert fct["note"] == ("64 KB segments" if marked else "")
    assert row(rows, "roft-spray", "TTFT p99 ms")["note"] == ""
    assert any("zcube lower (64 KB segments)" in b for b in table(rows)[1]) is marked
    note = marks.segments_note(rows)
    assert (note is not None) is marked and marks.light_note(rows) is None
    if marked:
        assert "s cross-rail roft-spray / zcube" in note and "13% longer" in note
        part = st.report_part(comparison([z, r]), {"zcube": z, "roft-spray": r},
                              str(tmp_path))
        assert part["standings"]["note"] == note


def test_both_notes_on_one_winner_are_kept_apart():
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50, 52, 51, 49, 50], util=0.05, hops=2.0)
    r = summary("roft-spray", "roft", "spray:4", ZCUBE_TTFT, [65, 66, 64, 67, 65], util=0.06,
                hops=1.0)
    r.update(backend="emulation", large_segments=True)
    rows, _ = rank(z, r)
    assert row(rows, "roft-spray", "FCT p99 ms")["note"] == "light load; 64 KB segments"
    assert marks.light_note(rows) and marks.segments_note(rows)


@pytest.mark.parametrize("tail, tail_of, marked", [
    (7, 7, True),        # ZCube's demo tail, made of datapath stalls
    (4, 7, True),        # more than half
    (3, 7, False),       # ROFT's: not most of it
    (None, None, False),  # a run made before the probe
])
def test_an_fct_p99_verdict_whose_tail_went_through_datapath_stalls_is_marked(
        tail, tail_of, marked, tmp_path):
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50, 52, 51, 49, 50])
    r = summary("roft", "roft", "ecmp", ZCUBE_TTFT, [65, 66, 64, 67, 65])
    if tail is not None:
        z["fidelity"]["stalled"] = {"windows": 9, "transfers": 20, "of": 768, "share": 0.026,
                                    "tail": tail, "tail_of": tail_of}
    rows, _ = rank(z, r)
    fct = row(rows, "roft", "FCT p99 ms")
    assert fct["winner"] == "zcube"               # the measured verdict stands either way
    assert fct["note"] == ("datapath stalls" if marked else "")
    assert st.tail_stalled(z) is marked and not st.tail_stalled(r)
    note = marks.stalls_note(rows)
    assert (note is not None) is marked
    if marked:
        assert "roft / zcube" in note and "measures the emulator more than the fabric" in note
        part = st.report_part(comparison([z, r]), {"zcube": z, "roft": r}, str(tmp_path))
        assert part["standings"]["note"] == note


def test_an_ecmp_run_takes_its_estimate_with_the_model_as_a_control_and_says_so():
    z = summary("zcube", "zcube", "zcube", ZCUBE_TTFT, [50, 52, 51, 49, 50])
    r = summary("roft", "roft", "ecmp", ZCUBE_TTFT, [50, 90, 60, 120, 55])     # not separated
    sp = summary("roft-spray", "roft", "spray:4", ZCUBE_TTFT, [50, 90, 60, 120, 55])
    # the model's runs of the same names over these seeds and more control the ECMP run
    # only: spraying keeps its plain interval, its tail not following the model's draws
    from testbed.analysis.compare import controlled
    model = [summary(name, b, pol, ZCUBE_TTFT * 2, fct * 2) for name, b, pol, fct in (
        ("zcube", "zcube", "zcube", [50, 52, 51, 49, 50]),
        ("roft", "roft", "ecmp", [50, 90, 60, 120, 55]),
        ("roft-spray", "roft", "spray:4", [50, 90, 60, 120, 55]))]
    found = controlled([z, r, sp], model)
    assert {c["run"] for c in found} == {"roft"} and len(found) == 3
    ctl = {"n": 5, "ratio": 1.6, "lo": 1.5, "hi": 1.7, "rho": 0.97}
    controls = {("cross-rail", "zcube", "roft", "FCT p99 ms"): ctl}
    groups = comparison([z, r, sp])
    runs = {"zcube": z, "roft": r, "roft-spray": sp}
    plain = {x["run"]: x for x in standings(groups, runs) if x["metric"] == "FCT p99 ms"}
    got = {x["run"]: x for x in standings(groups, runs, controls)
           if x["metric"] == "FCT p99 ms"}
    assert plain["roft"]["verdict"] == "not separated" and plain["roft"]["estimator"] == "paired"
    assert (got["roft"]["ratio"], got["roft"]["lo"], got["roft"]["hi"]) == (1.6, 1.5, 1.7)
    assert got["roft"]["winner"] == "zcube" and got["roft"]["estimator"] == "control"
    assert got["roft"]["note"] == "model as control"
    # spraying keeps its plain interval: its tail does not follow the model's draws
    assert got["roft-spray"] == plain["roft-spray"]
    note = marks.control_note(list(got.values()))
    assert "s cross-rail roft / zcube." in note and "roft-spray" not in note
    head, body = table([got["roft"]])
    assert body[0][head.index("verdict")] == "zcube lower (model as control)"
    assert marks.control_note(list(plain.values())) is None


def test_a_folders_ecmp_rows_take_the_models_runs_beside_it(tmp_path):
    import subprocess
    import sys
    few, many = tmp_path / "few", tmp_path / "many"
    for out, reps in ((few, 4), (many, 12)):
        got = subprocess.run([sys.executable, "-m", "testbed.cli", "run", "cross-rail-draws",
                              "--backend", "model", "--repetitions", str(reps), "--no-report",
                              "-o", str(out)], capture_output=True, text=True, timeout=300)
        assert got.returncode == 0, got.stderr
    rows, _ = st.of_folders([str(few)], {str(few): str(many)})
    assert {r["metric"]: r["estimator"] for r in rows} == {
        "FCT p50 ms": "control", "FCT p99 ms": "control", "TTFT p99 ms": "control"}
    # without the model's folder, or with one that holds no run: the plain ratios
    for models in (None, {str(few): str(tmp_path / "none")}):
        rows, _ = st.of_folders([str(few)], models)
        assert {r["estimator"] for r in rows} == {"paired"}
