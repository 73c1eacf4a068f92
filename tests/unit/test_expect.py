"""Expectations (testbed/analysis/expect.py, checks.py, junit.py): the grammar and its one-line
refusals, judging over hand-made summaries, verdict() against the comparison's own paired
verdicts, the not-faithful rule, the exit statuses, and end to end on the model backend
with the JUnit file read back by junitparser."""
import json

import pytest
from junitparser import JUnitXml

from testbed.analysis.checks import ERROR, FAIL, NOT_JUDGED, PASS, check_lines, judge
from testbed.analysis.compare import comparison, paired_lines, paired_of
from testbed.analysis.expect import ExpectError, Figure, Verdict, evaluate, parse
from testbed.cli.main import main
from testbed.core.verdict import words
from testbed.experiment.pipeline import (
    EXIT_BAD_INPUT,
    EXIT_EXPECT_FAILED,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_JUDGED,
    EXIT_OK,
    most_serious,
)

RUNS = {"zcube": "cross-rail", "roft": "cross-rail", "roft-spray": "cross-rail"}


# --- the grammar -----------------------------------------------------------------------------
@pytest.mark.parametrize("text,reads", [
    ("transfers_verified[zcube] == transfers_total[zcube]",
     [Figure("transfers_verified", "zcube"), Figure("transfers_total", "zcube")]),
    ("fct_ms.p99[roft] / fct_ms.p99[zcube] > 1.2",
     [Figure("fct_ms.p99", "roft"), Figure("fct_ms.p99", "zcube")]),
    ("ttft_ms.p99[zcube] < 500", [Figure("ttft_ms.p99", "zcube")]),
    ("(fct_ms.p50[roft] - fct_ms.p50[zcube]) * 2 + 1 >= -3",
     [Figure("fct_ms.p50", "roft"), Figure("fct_ms.p50", "zcube")]),
    ("1 < link_util.max[ roft-spray ] <= 2", [Figure("link_util.max", "roft-spray")]),
    ("faithful[roft]", [Figure("faithful", "roft")]),
    ("faithful[roft] == true and not faithful[zcube] != True",
     [Figure("faithful", "roft"), Figure("faithful", "zcube")]),
    ('verdict(fct_ms.p99, roft, zcube) == "zcube lower"',
     [Verdict("fct_ms.p99", "roft", "zcube")]),
    ("verdict(ttft_ms.p99, roft-spray, zcube) != 'level' or fct_ms.p99['zcube'] < 1",
     [Verdict("ttft_ms.p99", "roft-spray", "zcube"), Figure("fct_ms.p99", "zcube")]),
])
def test_the_forms_of_the_grammar_parse_with_the_figures_they_read(text, reads):
    assert parse(text, RUNS).reads == reads


@pytest.mark.parametrize("text,said", [
    ("fct_ms.p99[rof] < 1", "no run 'rof' (runs: zcube, roft, roft-spray)"),
    ("fct_ms.p99 < 1", "fct_ms.p99: a figure names its run, as fct_ms.p99[zcube]"),
    ("fct_ms.p99[zcube]", "not a check: compare it with something"),
    ("fct_ms.p99[zcube] <", "not an expression (invalid syntax)"),
    ("", "an empty expectation"),
    ("x" * 1001, "longer than 1,000 characters"),
    ('__import__("os").system("true")', "the one call is verdict(figure, run, reference)"),
    ("fct_ms.p99[zcube].__class__ == 1", "not a figure"),
    ("[1] == 1", "is not part of an expectation"),
    ("lambda: 1", "is not part of an expectation"),
    ("fct_ms.p99[zcube] ** 2 > 1", "arithmetic is + - * / only"),
    ("fct_ms.p99[zcube] if 1 else 2", "is not part of an expectation"),
    ('fct_ms.p99[zcube] < "a"', "compares a number with a string"),
    ("faithful[zcube] < true", "a true/false is compared with == or !="),
    ("faithful[zcube] + 1 > 1", "arithmetic between numbers only"),
    ("not fct_ms.p99[zcube]", "'not' takes a check"),
    ("fidelity.faithful[zcube]", "write faithful[zcube]"),
    ('verdict(fct_ms.p999, roft, zcube) == "level"', "fct_ms.p999 has no paired verdict"),
    ('verdict(fct_ms.p99, zcube, zcube) == "level"', "zcube against itself"),
    ('verdict(fct_ms.p99, roft) == "level"', "the one call is verdict"),
    ('verdict(fct_ms.p99, roft, zcube) == "zcube lowr"',
     'verdict(fct_ms.p99, roft, zcube) is never \'zcube lowr\' (it is one of "roft lower", '
     '"zcube lower", "level", "not separated")'),
    ('verdict(fct_ms.p99, roft, zcube) < "level"', "a string is compared with == or !="),
    ('"a" == "a"', "compares two strings"),
])
def test_what_is_outside_the_grammar_is_refused_in_one_line(text, said):
    with pytest.raises(ExpectError) as err:
        parse(text, RUNS)
    assert said in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("--expect: ")


def test_runs_of_other_placements_have_no_paired_verdict_and_names_say_the_placement():
    runs = {"zcube-aligned": "aligned", "roft-aligned": "aligned",
            "zcube-cross-rail": "cross-rail", "roft-cross-rail": "cross-rail"}
    assert parse('verdict(fct_ms.p99, roft-cross-rail, zcube-cross-rail) == "level"', runs)
    with pytest.raises(ExpectError, match="in different placements"):
        parse('verdict(fct_ms.p99, roft-aligned, zcube-cross-rail) == "level"', runs)
    with pytest.raises(ExpectError, match="a run is <fabric>-<placement>"):
        parse("fct_ms.p99[roft] < 1", runs)


def test_a_scenario_names_its_runs_fabric_dash_placement_with_several_placements():
    from testbed.experiment.scenario import from_dict
    doc = {"name": "x", "backend": "model",
           "fabrics": [{"name": "zcube", "builder": "zcube", "params": {"n": 4}},
                       {"name": "roft", "builder": "roft"}],
           "deployment": {"placements": ["aligned", "cross-rail"]},
           "workload": {"count": 4}}
    sc = from_dict(doc)
    assert [n for _, _, n in sc.run_names()] == [
        "zcube-aligned", "zcube-cross-rail", "roft-aligned", "roft-cross-rail"]
    assert sc.expect == []
    assert from_dict(dict(doc, expect="faithful[roft-aligned]")).expect == [
        "faithful[roft-aligned]"]


def test_a_bad_expectation_in_a_file_names_the_file_line_and_entry(tmp_path):
    path = tmp_path / "my.yaml"
    path.write_text("name: mine\nbackend: model\nfabrics:\n"
                    "  - {name: zcube, builder: zcube, params: {n: 4}}\n"
                    "workload: {count: 4}\nexpect:\n  - faithful[zcube]\n"
                    "  - fct_ms.p99[roft] < 3\n")
    from testbed.analysis.expect import parse_all
    from testbed.experiment.scenario import load
    with pytest.raises(ExpectError) as err:
        parse_all(load(str(path)), ["faithful[zcube]"])
    assert str(err.value) == (f"{path}:8: expect[1]: 'fct_ms.p99[roft] < 3': no run 'roft' "
                              "(runs: zcube)")


def test_evaluation_is_python_arithmetic_on_the_values_read():
    exp = parse("(fct_ms.p99[roft] - 1) / fct_ms.p99[zcube] > 1.2 and not faithful[roft]",
                RUNS)
    values = {Figure("fct_ms.p99", "roft"): 26.0, Figure("fct_ms.p99", "zcube"): 20.0,
              Figure("faithful", "roft"): False}
    assert evaluate(exp, values) is True
    assert evaluate(exp, {**values, Figure("fct_ms.p99", "roft"): 24.0}) is False


# --- judging over hand-made summaries --------------------------------------------------------
def summary(run, p99s=(10.0, 11.0, 12.0, 10.5), faithful=None, backend="model", **more):
    """A run's summary.json as load_runs reads it: per-repetition FCT and TTFT P99."""
    doc = {"run": run, "placement": "cross-rail", "backend": backend,
           "transfers_total": 96, "transfers_verified": 96,
           "fct_ms": {"p50": 5.0, "p99": max(p99s)}, "ttft_ms": {"p99": 2 * max(p99s)},
           "slo_throughput_per_s": None, "cost": {"switches": 8}, "repetitions": len(p99s),
           "per_rep": [{"seed": k + 1, "fct_ms": {"p50": 5.0, "p99": v},
                        "ttft_ms": {"p99": 2 * v}} for k, v in enumerate(p99s)],
           "fidelity": None if faithful is None else {
               "faithful": faithful, "reasons": [] if faithful else ["the datapath fell "
                                                                      "behind"]}}
    doc.update(more)
    return doc


def judged(text, runs):
    return judge(parse(text, {r["run"]: r["placement"] for r in runs}), runs)


def test_hand_made_summaries_pass_fail_and_show_what_they_read():
    runs = [summary("zcube"), summary("roft", (20.0, 22.0, 25.0, 21.0))]
    o = judged("transfers_verified[zcube] == transfers_total[zcube]", runs)
    assert o.status == PASS and o.read == [("transfers_verified[zcube]", "96"),
                                           ("transfers_total[zcube]", "96")]
    assert judged("fct_ms.p99[roft] / fct_ms.p99[zcube] > 1.2", runs).status == PASS
    o = judged("ttft_ms.p99[zcube] < 20", runs)
    assert o.status == FAIL and o.read == [("ttft_ms.p99[zcube]", "24")]
    assert judged("faithful[roft] and faithful[zcube]", runs).status == PASS


def test_no_value_and_division_by_zero_are_not_judged_and_unknown_paths_are_errors():
    runs = [summary("zcube", transfers_lost=0), summary("roft")]
    o = judged("slo_throughput_per_s[zcube] > 1", runs)
    assert o.status == NOT_JUDGED and o.reason == "slo_throughput_per_s[zcube] has no value"
    o = judged("fct_ms.p99[roft] / transfers_lost[zcube] > 1", runs)
    assert o.status == NOT_JUDGED and o.reason == "division by zero"
    o = judged("fct_ms.p98[zcube] > 1", runs)
    assert o.status == ERROR and o.reason == (
        "--expect: 'fct_ms.p98[zcube] > 1': zcube's summary.json has no fct_ms.p98 "
        "(fct_ms has p50, p99)")
    assert "is a section (switches)" in judged("cost[zcube] > 1", runs).reason
    assert "is not a number ('cross-rail')" in judged("placement[zcube] > 1", runs).reason
    o = judge(parse("fct_ms.p99[roft] > 1", RUNS), [summary("zcube")])
    assert o.status == NOT_JUDGED and o.reason == "no results of roft"


def test_a_timed_figure_of_a_run_not_faithful_is_not_judged():
    runs = [summary("zcube", faithful=True, backend="emulation"),
            summary("roft", (20.0, 22.0, 25.0, 21.0), faithful=False, backend="emulation")]
    o = judged("fct_ms.p99[roft] > 1", runs)
    assert o.status == NOT_JUDGED and o.reason == "roft not faithful"
    assert o.read == [("fct_ms.p99[roft]", "25")]            # shown, not judged
    assert judged("fct_ms.p99[zcube] > 1", runs).status == PASS  # the faithful run's own
    assert judged("faithful[roft]", runs).status == FAIL
    assert judged("not faithful[roft]", runs).status == PASS
    assert judged("faithful[roft] and fct_ms.p99[roft] > 1", runs).status == NOT_JUDGED
    # counts are no emulator's pace: judged on a run that was not faithful too
    assert judged("transfers_verified[roft] == transfers_total[roft]", runs).status == PASS
    assert judged("transfers_verified[roft] / fct_ms.p99[roft] > 0", runs).status == NOT_JUDGED
    o = judged('verdict(fct_ms.p99, roft, zcube) == "zcube lower"', runs)
    assert o.status == NOT_JUDGED and o.reason == "roft not faithful"
    lines = check_lines([judged("fct_ms.p99[roft] > 1", runs)])
    assert lines[0] == "Checks (1 expectation: 0 pass, 0 FAIL, 1 not judged):"
    assert lines[-1].endswith("not judged (roft not faithful)")


def test_a_model_run_has_no_fidelity_record_and_is_faithful():
    from testbed.analysis.checks import faithful_of
    assert faithful_of(summary("zcube")) is True
    assert faithful_of(summary("zcube", faithful=True)) is True
    assert faithful_of(summary("zcube", faithful=False)) is False


@pytest.mark.parametrize("p99s", [
    (20.0, 22.0, 25.0, 21.0),          # zcube lower
    (10.0, 11.0, 12.0, 10.5),          # level
    (5.0, 14.0, 9.0, 16.0),            # not separated
    (9.0, 10.0, 11.0, 9.5),            # roft lower
    (10.0,),                           # one seed in common: no interval
])
def test_verdict_is_the_comparisons_own_paired_verdict(p99s):
    zcube, roft = summary("zcube"), summary("roft", p99s)
    for metric, label in (("fct_ms.p99", "FCT p99 ms"), ("ttft_ms.p99", "TTFT p99 ms")):
        row = next(r for r in comparison([zcube, roft])[0]["rows"] if r["metric"] == label)
        said = words(paired_of(row, 1), "zcube", "roft")
        o = judged(f'verdict({metric}, roft, zcube) == "{said}"', [zcube, roft])
        assert o.status == PASS, (said, o.read)
        printed = paired_lines(comparison([zcube, roft])[0])
        assert all(line.endswith(said) or "would give" in line
                   for line in printed if label in line)


# --- exit statuses ---------------------------------------------------------------------------
def test_the_most_serious_status_wins():
    assert (EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_EXPECT_FAILED, EXIT_NOT_JUDGED,
            EXIT_INTERRUPTED) == (0, 1, 2, 3, 4, 130)
    assert most_serious(EXIT_OK, EXIT_NOT_JUDGED, EXIT_EXPECT_FAILED) == EXIT_EXPECT_FAILED
    assert most_serious(EXIT_EXPECT_FAILED, EXIT_FAILED) == EXIT_FAILED
    assert most_serious(EXIT_FAILED, EXIT_BAD_INPUT) == EXIT_BAD_INPUT
    assert most_serious(EXIT_BAD_INPUT, EXIT_INTERRUPTED) == EXIT_INTERRUPTED
    assert most_serious(EXIT_OK) == EXIT_OK


# --- end to end on the model -----------------------------------------------------------------
def zrun(tmp_path, capsys, *flags):
    out = tmp_path / "out"
    code = main(["run", "cross-rail", "--backend", "model", "--repetitions", "3",
                 "--fabrics", "zcube,roft", "--no-report", "-o", str(out), *flags])
    got = capsys.readouterr()
    return code, got.out, got.err, out


def test_an_expectation_that_holds_exits_0(tmp_path, capsys):
    code, out, _, _ = zrun(tmp_path, capsys, "--expect",
                           "transfers_verified[roft] == transfers_total[roft]", "--expect",
                           'verdict(fct_ms.p99, roft, zcube) == "zcube lower"')
    assert code == EXIT_OK
    assert "Checks (2 expectations: 2 pass, 0 FAIL):" in out
    assert out.index("paired over 3 repetitions") < out.index("Checks (")


def test_a_failed_expectation_exits_3_and_one_not_judged_exits_4(tmp_path, capsys):
    code, out, _, _ = zrun(tmp_path, capsys, "--expect", "ttft_ms.p99[zcube] < 1")
    assert code == EXIT_EXPECT_FAILED
    table = out[out.index("Checks ("):].splitlines()
    assert table[0] == "Checks (1 expectation: 0 pass, 1 FAIL):"
    assert table[1].split() == ["expectation", "read", "result"]
    assert table[3].startswith("ttft_ms.p99[zcube] < 1  ttft_ms.p99[zcube] ")
    assert table[3].endswith("FAIL")
    code, out, _, _ = zrun(tmp_path, capsys, "--expect", "slo_throughput_per_s[zcube] > 1")
    assert code == EXIT_NOT_JUDGED and "not judged (slo_throughput_per_s[zcube] has no " \
        "value)" in out


def test_a_bad_expectation_exits_2_in_one_line_before_anything_runs(tmp_path, capsys):
    code, out, err, folder = zrun(tmp_path, capsys, "--expect", "fct_ms.p99[roft-spray] < 3")
    assert code == EXIT_BAD_INPUT and not folder.exists() and out == ""
    assert err == ("zcube run: error: --expect: 'fct_ms.p99[roft-spray] < 3': no run "
                   "'roft-spray' (runs: zcube, roft)\n")
    code, _, err, folder = zrun(tmp_path, capsys, "--expect", "fct_ms.p99[zcube] <")
    assert code == EXIT_BAD_INPUT and not folder.exists() and err.count("\n") == 1
    code, _, err, folder = zrun(tmp_path, capsys, "--junit-xml", str(tmp_path))
    assert code == EXIT_BAD_INPUT and not folder.exists() and "is a folder" in err


def test_a_path_the_summaries_lack_exits_2_after_the_table_and_the_junit_file(tmp_path,
                                                                              capsys):
    junit = tmp_path / "j" / "junit.xml"
    code, out, err, _ = zrun(tmp_path, capsys, "--expect", "fct_ms.p98[zcube] > 0",
                             "--expect", "faithful[zcube]", "--junit-xml", str(junit))
    assert code == EXIT_BAD_INPUT and "Checks (2 expectations: 1 pass, 0 FAIL, 1 error):" in out
    assert err.splitlines()[-1] == (
        "zcube run: error: --expect: 'fct_ms.p98[zcube] > 0': zcube's summary.json has no "
        "fct_ms.p98 (fct_ms has p50, p99, p999, mean)")
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (6, 0, 1, 0)


def test_junit_xml_has_a_suite_per_scenario_run_and_a_case_per_check(tmp_path, capsys):
    from testbed.experiment.pipeline import shipped
    path = tmp_path / "sc.yaml"
    with open(shipped("cross-rail")) as f:
        path.write_text(f.read() + "expect:\n  - faithful[roft]\n"
                        "  - fct_ms.p99[roft] / fct_ms.p99[zcube] > 1.2\n")
    junit = tmp_path / "junit.xml"
    code = main(["run", str(path), "--backend", "model", "--repetitions", "3", "--no-report",
                 "-o", str(tmp_path / "out"), "--junit-xml", str(junit),
                 "--expect", "ttft_ms.p99[zcube] < 1",
                 "--expect", "slo_throughput_per_s[roft-spray] > 1"])
    out = capsys.readouterr().out
    assert code == EXIT_EXPECT_FAILED and f"junit: {junit}" in out
    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert [s.name for s in suites] == ["cross-rail"]
    s = suites[0]
    # 3 runs x (verified, faithful) + 4 expectations; one failed, one not judged
    assert (s.tests, s.failures, s.errors, s.skipped) == (10, 1, 0, 1)
    cases = {(c.classname, c.name): c for c in s}
    assert {"cross-rail.zcube", "cross-rail.roft", "cross-rail.roft-spray",
            "cross-rail.expect"} == {k[0] for k in cases}
    failed = cases[("cross-rail.expect", "ttft_ms.p99[zcube] < 1")].result[0]
    assert failed.message.startswith("FAIL: ttft_ms.p99[zcube] ")
    skipped = cases[("cross-rail.expect", "slo_throughput_per_s[roft-spray] > 1")].result[0]
    assert skipped.message == "not judged: slo_throughput_per_s[roft-spray] has no value"
    assert cases[("cross-rail.zcube", "all transfers verified")].is_passed
    props = {p.name: p.value for p in s.properties()}
    assert props["backend"] == "model" and props["exit_status"] == "3"


def test_junit_cases_of_a_run_not_faithful_and_not_verified(tmp_path):
    from testbed.analysis.checks import Outcome
    from testbed.analysis.junit import suite, write_junit
    from testbed.experiment.scenario import from_dict
    sc = from_dict({"name": "hand", "fabrics": [{"name": "zcube", "builder": "zcube"},
                                                 {"name": "roft", "builder": "roft"}],
                    "workload": {"count": 2}})
    bad = summary("roft", faithful=False, backend="emulation", transfers_verified=90,
                  failed=[{"request": 3, "src": "g0", "dst": "g5", "status": "timeout"}])
    runs = {"zcube": summary("zcube", faithful=True, backend="emulation"), "roft": bad}
    exp = parse("fct_ms.p99[roft] < 100", {"zcube": "aligned", "roft": "aligned"})
    one = suite(sc, str(tmp_path), "emulation", EXIT_FAILED, runs,
                [Outcome(exp, NOT_JUDGED, [], "roft not faithful")])
    write_junit([one], str(tmp_path / "j.xml"))
    s = next(iter(JUnitXml.fromfile(str(tmp_path / "j.xml"))))
    assert (s.tests, s.failures, s.errors, s.skipped) == (5, 2, 0, 1)
    cases = {(c.classname, c.name): c for c in s}
    verified = cases[("hand.roft", "all transfers verified")].result[0]
    assert verified.message == "90 of 96 transfers verified"
    assert "request 3 g0->g5: timeout" in verified.text
    assert cases[("hand.roft", "faithful")].result[0].message == \
        "not faithful: the datapath fell behind"
    stopped = suite(sc, str(tmp_path), "emulation", EXIT_FAILED, {}, [])
    assert [c.result for c in stopped.cases] == ["error", "skipped"] * 2


def test_the_demo_writes_a_suite_per_scenario_run(tmp_path, capsys, monkeypatch):
    from testbed.cli import lesson
    monkeypatch.setattr(lesson, "MODEL_DRAWS", 3)        # the control's draws: not the point
    monkeypatch.setattr("testbed.analysis.report.build_report", lambda d: f"{d}/report.html")
    junit = tmp_path / "junit.xml"
    code = main(["demo", "--backend", "model", "-o", str(tmp_path / "demo"),
                 "--junit-xml", str(junit)])
    assert code == EXIT_OK and f"junit: {junit}" in capsys.readouterr().out
    suites = {s.name: s for s in JUnitXml.fromfile(str(junit))}
    assert list(suites) == ["cross-rail", "cross-rail (cross-rail-model)", "demo"]
    assert [suites[n].tests for n in suites] == [4, 6, 4]
    assert all(s.failures == s.errors == s.skipped == 0 for s in suites.values())
    doc = json.loads((tmp_path / "demo" / "cross-rail" / "zcube" / "summary.json").read_text())
    assert doc["repetitions"] == lesson.REPETITIONS
