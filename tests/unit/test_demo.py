"""``zcube demo`` on the model backend (what runs without root): the teaching demo and
``--full``, the same scenarios, files and tables as on the emulation."""
import csv
import json

from testbed.cli.main import main


def test_full_demo_on_the_model_writes_costs_routes_runs_and_the_report(tmp_path, capsys):
    junit = tmp_path / "junit.xml"
    code = main(["demo", "--full", "--backend", "model", "-o", str(tmp_path),
                 "--junit-xml", str(junit)])
    out = capsys.readouterr().out
    assert code == 0
    # a JUnit suite per scenario run: per run, all transfers verified and faithful
    from junitparser import JUnitXml
    suites = {s.name: s for s in JUnitXml.fromfile(str(junit))}
    assert list(suites) == ["demo", "cross-rail", "cross-rail (cross-rail-model)"]
    assert [s.tests for s in suites.values()] == [4, 6, 6]
    assert all(s.failures == s.errors == s.skipped == 0 for s in suites.values())
    names = {p.name for p in tmp_path.iterdir()}
    assert {"cost.json", "routes.json", "run.json", "report.html", "plots", "zcube", "roft",
            "cross-rail"} <= names
    crossed = {p.name for p in (tmp_path / "cross-rail").iterdir()}
    assert {"run.json", "report.html", "zcube", "roft", "roft-spray"} <= crossed
    costs = json.loads((tmp_path / "cost.json").read_text())
    assert costs[0]["switch_port_gbps"] / costs[1]["switch_port_gbps"] == 2 / 3
    routes = json.loads((tmp_path / "routes.json").read_text())
    assert all(r["ok"] for r in routes.values()) and len(routes) == 8
    assert "switch-port Gb/s (sum)       12,800    19,200  0.667" in out
    assert "placement: aligned" in out and "placement: cross-rail" in out
    assert f"report: {tmp_path}/report.html" in out
    assert f"report: {tmp_path}/cross-rail/report.html" in out
    # both scenarios' verdicts in one table, then the public claims, each claim once
    tail_at = out.index("Where each fabric wins and loses")
    tail = out[tail_at:]
    assert "demo        aligned" in tail and "roft-spray (spray:4) / zcube" in tail
    assert tail.count("switch and optics capex -33%:") == 1
    assert "TTFT P99 -40.6%: cross-rail, cross-rail, roft (ecmp;" in tail
    # the aligned case's FCT winner comes from switches crossed at light load, and says so
    assert "roft lower (light load)" in tail and "(light load: demo aligned (" in tail
    assert "cross-rail  cross-rail" in tail and "zcube lower (light load)" not in tail
    html = (tmp_path / "cross-rail" / "report.html").read_text()
    assert "Where each fabric wins and loses" in html and "The public claims" in html
    assert ("10 repetition(s) each (seeds 1, 2, 3, 4, 5, 6, 7, 8, 9, 10; roft-spray the first "
            "6)") in html
    with open(tmp_path / "cross-rail" / "standings.csv") as f:
        ranked = list(csv.DictReader(f))
    assert {(r["run"], r["metric"]) for r in ranked} == {
        (run, m) for run in ("roft", "roft-spray")
        for m in ("FCT p50 ms", "FCT p99 ms", "TTFT p99 ms")}
    for run in ("zcube", "roft"):
        s = json.loads((tmp_path / run / "summary.json").read_text())
        assert s["backend"] == "model" and s["repetitions"] == 10 and s["placement"] == "aligned"
        assert s["transfers_verified"] == s["transfers_total"] == 10 * 96
        # 5/s run and missed, 4/s read from the first repetition and met: 3/s not run
        assert s["slo_throughput_per_s"] == 4 and s["sweep"]["not_run"] == [3]
        assert [p["rate_per_s"] for p in s["sweep"]["points"]] == [4, 5]
    s = json.loads((tmp_path / "cross-rail" / "roft-spray" / "summary.json").read_text())
    assert s["placement"] == "cross-rail" and s["policy"] == "spray:4"
    # the spraying Clos carries the first six of the crossed case's ten draws
    assert s["repetitions"] == 6 and [r["seed"] for r in s["per_rep"]] == [1, 2, 3, 4, 5, 6]
    assert json.loads((tmp_path / "cross-rail" / "roft" / "summary.json").read_text())[
        "repetitions"] == 10
    assert "placements cross-rail, 10 repetitions (roft-spray 6), NIC 40 Mb/s" in out
    assert s["transfers_verified"] == s["transfers_total"]
    # the crossed case again on the model over 400 ECMP draws, after the demo's five and
    # before the closing table, with whether the five-draw intervals hold its ratios
    s = json.loads((tmp_path / "cross-rail-model" / "roft" / "summary.json").read_text())
    assert s["backend"] == "model" and s["repetitions"] == 400 and s["policy"] == "ecmp"
    many = out[out.index("over 400 ECMP draws (the run above had 10 repetitions (roft-spray "
                         "6)"):tail_at]
    assert "paired over 400 repetitions (same requests): FCT p99 ms roft/zcube" in many
    assert "roft-spray/zcube" in many
    assert "(the model run above, 10 draws (roft-spray 6): the same verdict in " in many
    assert " of 6 pairs; its intervals hold the model's ratio in " in many


def test_demo_emulation_needs_root_or_says_so(monkeypatch, capsys):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["demo", "-o", "/nonexistent/demo"]) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and err.count("\n") == 1


def test_a_crossed_verdict_against_ecmp_left_open_points_to_the_many_draw_scenario():
    from testbed.cli.demo import draws_hint
    row = {"scenario": "cross-rail", "policy": "ecmp", "verdict": "not separated",
           "metric": "TTFT p99 ms", "n": 5}
    hint = draws_hint([row, dict(row, policy="spray:4"), dict(row, scenario="demo")])
    assert "TTFT p99 ms against ECMP not separated over 5 repetitions" in hint
    assert "zcube run cross-rail-draws" in hint
    assert draws_hint([dict(row, verdict="run lower"), dict(row, scenario="demo")]) is None


def test_the_few_draws_intervals_against_the_models_ratios():
    from testbed.cli.demo import held_lines

    def group(ratios, lo=None, hi=None):
        rows = [{"metric": m, "paired": [None, {"n": n, "ratio": r, "lo": lo and lo[k],
                                                "hi": hi and hi[k]}]}
                for k, (m, r, n) in enumerate(ratios)]
        return {"runs": ["zcube", "roft"], "rows": rows}
    model = group([("FCT p99 ms", 1.89, 200), ("TTFT p99 ms", 1.22, 200)], [1.8, 1.2],
                  [1.97, 1.24])
    five = group([("FCT p99 ms", 2.05, 5), ("TTFT p99 ms", 1.40, 5)], [1.87, 1.30], [2.24, 1.5])
    assert held_lines(model, five, "emulation") == [
        "(the emulation run above, 5 draws: the same verdict in 2 of 2 pairs; its intervals "
        "hold the model's ratio in 1 of 2, not in TTFT p99 ms roft/zcube 1.400 (1.300-1.500) "
        "against 1.220)"]
    # an interval across 1 gives no verdict where the model's narrow one does
    assert held_lines(model, group([("FCT p99 ms", 1.9, 5)], [0.9], [3.0]), "ns3") == [
        "(the ns3 run above, 5 draws: the same verdict in 0 of 1 pairs; its intervals hold "
        "the model's ratio in 1 of 1)"]
    assert held_lines(model, None, "emulation") == []
    assert held_lines(model, dict(five, runs=["zcube", "roft-spray"]), "emulation") == []


def test_teaching_demo_tells_the_story_in_order_within_sixty_lines(tmp_path, capsys):
    code = main(["demo", "--backend", "model", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert len(lines) <= 60
    assert max(len(line) for line in lines if str(tmp_path) not in line) <= 100
    # the fabrics, the crossed case, the aligned counter-case, spraying, where to look next
    at = [out.index(f"\n{k}. ") for k in range(1, 6)]
    assert at == sorted(at)
    assert "switch-port Gb/s (sum)      12,800    19,200       0.667" in out
    crossed, aligned, spray = (out[at[1]:at[2]], out[at[2]:at[3]], out[at[3]:at[4]])
    for part, run in ((crossed, "ROFT-ECMP"), (aligned, "ROFT-ECMP"), (spray, "ROFT-spray")):
        for figure in ("FCT p50 ", "FCT P99 ", "TTFT P99"):
            assert f"  {figure} {run} / ZCube " in part
    assert "(light load: " in aligned
    assert f"{tmp_path}/cross-rail/report.html" in out and f"{tmp_path}/demo/report.html" in out
    # the scenarios at their loads, fewer repetitions and requests, the sweep left out
    s = json.loads((tmp_path / "cross-rail" / "roft" / "summary.json").read_text())
    assert s["repetitions"] == 3 and s["policy"] == "ecmp"
    assert not (tmp_path / "cross-rail" / "roft-spray").exists()
    s = json.loads((tmp_path / "demo" / "zcube" / "summary.json").read_text())
    assert s["repetitions"] == 3 and s["transfers_total"] == 3 * 12 * 4
    assert "sweep" not in s or not s["sweep"]
    s = json.loads((tmp_path / "cross-rail-model" / "roft-spray" / "summary.json").read_text())
    assert s["repetitions"] == 200
    text = (tmp_path / "cross-rail" / "zcube" / "scenario.yaml").read_text()
    assert "rate: 8" in text and "input_tokens: 32768" in text
    log = (tmp_path / "demo.log").read_text()
    assert "transfers verified" in log and "[zcube]" not in out
