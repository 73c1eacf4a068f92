"""``zcube run`` on the model backend, ``compare``, ``report`` and ``crossval`` (pure)."""
import csv
import json

import pytest

from testbed.analysis.compare import comparison, load_runs
from testbed.analysis.crossval import crossval, to_html, to_text
from testbed.cli.main import main
from testbed.core import metrics
from testbed.core.metrics import spread

SCENARIO = """\
name: small
backend: model
repetitions: 3
fabrics:
  - {name: zc, builder: zcube, params: {n: 4, gpus_per_server: 4}, policy: zcube}
  - {name: rf, builder: roft, params: {servers: 4, gpus_per_server: 4}, policy: ecmp}
deployment: {placements: [aligned, cross-rail]}
workload: {arrivals: poisson, rate: 6, count: 10, input_tokens: 4096}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    (d / "s.yaml").write_text(SCENARIO)
    assert main(["run", str(d / "s.yaml"), "-o", str(d / "out"), "--export",
                 str(d / "htsim")]) == 0
    return d / "out", d / "htsim"


def _csv(p):
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


def test_run_writes_each_run_with_counts_that_agree(results):
    out, _ = results
    runs = json.loads((out / "run.json").read_text())["runs"]
    assert runs == ["zc-aligned", "zc-cross-rail", "rf-aligned", "rf-cross-rail"]
    arrivals = {}
    for run in runs:
        s = json.loads((out / run / "summary.json").read_text())
        rows = _csv(out / run / "transfers.csv")
        assert len(rows) == s["transfers_total"] == s["transfers_verified"]
        assert sum(int(r["bytes"]) for r in rows) == s["bytes_total"]
        reqs = _csv(out / run / "requests.csv")
        assert len(reqs) == s["requests_total"] == 30
        arrivals[run] = [(r["rep"], r["arrival_s"]) for r in reqs]
        assert [p["seed"] for p in s["per_rep"]] == [1, 2, 3]
        assert s["spread"]["ttft_p99_ms"]["n"] == 3
        assert s["scale"] == {"link": 100 / 400000, "size": 100 / 400000, "time_dilation": 1.0,
                              "extra_dilation": 1.0, "emulated_mbps": 100}
    assert len({tuple(v) for v in arrivals.values()}) == 1      # same requests everywhere


def test_same_seed_reproduces_the_same_requests_and_results(results, tmp_path):
    out, _ = results
    (tmp_path / "s.yaml").write_text(SCENARIO)
    assert main(["run", str(tmp_path / "s.yaml"), "-o", str(tmp_path / "again"),
                 "--no-report"]) == 0
    for run in ("zc-aligned", "rf-cross-rail"):
        assert _csv(out / run / "transfers.csv") == _csv(tmp_path / "again" / run / "transfers.csv")


def test_compare_groups_by_placement_with_ratios_to_the_first(results, capsys):
    out, _ = results
    groups = comparison(load_runs([str(out)]))
    assert [g["placement"] for g in groups] == ["aligned", "cross-rail"]
    g = groups[1]
    assert g["runs"] == ["zc-cross-rail", "rf-cross-rail"]
    rows = {r["metric"]: r for r in g["rows"]}
    zc = json.loads((out / "zc-cross-rail" / "summary.json").read_text())
    rf = json.loads((out / "rf-cross-rail" / "summary.json").read_text())
    # three repetitions: the mean of the per-repetition P99s, with its interval
    want = [zc["spread"]["fct_p99_ms"]["mean"], rf["spread"]["fct_p99_ms"]["mean"]]
    assert rows["FCT p99 ms"]["values"] == want
    assert rows["FCT p99 ms"]["estimators"] == ["mean_of_reps", "mean_of_reps"]
    assert rows["FCT p99 ms"]["ratios"][1] == pytest.approx(want[1] / want[0])
    assert rows["switch port Tb/s"]["ratios"][1] == pytest.approx(1.5)
    assert rows["TTFT p99 ms"]["ci95"][0] == zc["spread"]["ttft_p99_ms"]["ci95"]
    # the same requests on both fabrics, seed by seed: the paired ratio and its interval
    per_seed = [(a["fct_ms"]["p99"], b["fct_ms"]["p99"]) for a, b in zip(zc["per_rep"],
                                                                            rf["per_rep"])]
    paired = rows["FCT p99 ms"]["paired"][1]
    assert paired == dict(metrics.paired_ratio(*zip(*per_seed)), margin=0.01)
    assert paired["n"] == 3
    assert rows["FCT p99 ms"]["paired"][0] is None and "paired" not in rows["switches"]
    assert main(["compare", str(out / "zc-aligned"), str(out / "rf-aligned")]) == 0
    text = capsys.readouterr().out
    assert "paired over 3 repetitions (same requests): FCT p50 ms rf-aligned/zc-aligned" in text
    assert "rf-aligned/zc-aligned" in text
    assert ("(± is the 95% confidence half-width of the mean over 3 repetitions; values are "
            "means of per-repetition figures; a ratio is run / zc-aligned)") in text
    assert main(["compare", str(out), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "placement,metric,run,fabric,value,ci95,ratio_to_first,estimator,folder"
    assert len(lines) == 1 + 2 * 2 * 11
    assert {line.rsplit(",", 1)[1] for line in lines[1:]} == {str(out)}


@pytest.fixture(scope="module")
def reseeded(results):
    """The same scenario again over other seeds, in a second output folder."""
    out, _ = results
    again = out.parent / "out-101"
    assert main(["run", str(out.parent / "s.yaml"), "--seed", "101", "-o", str(again),
                 "--no-report"]) == 0
    return out, again


def test_compare_of_two_folders_sets_them_side_by_side_each_against_its_own_first(
        reseeded, capsys):
    out, again = reseeded
    groups = comparison(load_runs([str(out), str(again)]))
    assert [(g["placement"], g["folder"]) for g in groups] == [
        ("aligned", str(out)), ("aligned", str(again)),
        ("cross-rail", str(out)), ("cross-rail", str(again))]
    for g in groups:              # every folder's runs have ratios and paired lines
        fct = next(r for r in g["rows"] if r["metric"] == "FCT p99 ms")
        assert g["runs"][0].startswith("zc") and fct["ratios"][1] is not None
        assert fct["paired"][1]["n"] == 3
    assert main(["compare", str(out), str(again)]) == 0
    text = capsys.readouterr().out
    head = text.splitlines()[0].split()
    assert head == ["placement:", "aligned", "zc-aligned", "(out)", "rf-aligned", "(out)",
                    "zc-aligned", "(out-101)", "rf-aligned", "(out-101)",
                    "rf-aligned/zc-aligned", "(out)", "rf-aligned/zc-aligned", "(out-101)"]
    for folder in ("out", "out-101"):
        assert (f"paired over 3 repetitions (same requests): FCT p99 ms "
                f"rf-cross-rail/zc-cross-rail ({folder}) ") in text
    assert "zc-aligned/zc-aligned" not in text
    assert ("values are means of per-repetition figures; a ratio is run / zc-aligned of "
            "the same folder)") in text
    assert main(["compare", str(out), str(again), "--format", "csv"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert {r["folder"] for r in rows} == {str(out), str(again)}
    assert len({(r["folder"], r["placement"], r["metric"], r["run"]) for r in rows}) == len(rows)


def test_run_folders_of_one_output_folder_compare_as_one_and_of_two_side_by_side(
        reseeded, capsys):
    out, again = reseeded
    one = comparison(load_runs([str(out / "zc-aligned"), str(out / "rf-aligned")]))
    assert [(g["runs"], g["folder"]) for g in one] == [(["zc-aligned", "rf-aligned"], str(out))]
    assert main(["compare", str(out / "rf-aligned"), str(again / "rf-aligned")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[2:] == ["rf-aligned", "(out)", "rf-aligned", "(out-101)"]
    assert lines[-1] == ("(± is the 95% confidence half-width of the mean over 3 "
                         "repetitions; values are means of per-repetition figures)")


def test_folders_of_one_name_are_labelled_with_their_paths(tmp_path):
    from testbed.analysis.compare import folder_labels
    groups = [{"folder": str(tmp_path / "x" / "model")}, {"folder": str(tmp_path / "y" / "model")}]
    assert folder_labels(groups) == {g["folder"]: g["folder"] for g in groups}
    assert folder_labels(groups[:1]) == {groups[0]["folder"]: ""}


def test_report_embeds_every_plot_and_the_tables(results):
    out, _ = results
    html = (out / "report.html").read_text()
    plots = ["fct-cdf", "ttft-cdf", "hops"] + [f"{k}-{r}" for k in ("fabric", "heatmap")
                                               for r in ("zc-aligned", "zc-cross-rail",
                                                         "rf-aligned", "rf-cross-rail")]
    for p in plots:
        assert (out / "plots" / f"{p}.png").stat().st_size > 1000
        assert (out / "plots" / f"{p}.svg").is_file()
    assert html.count("data:image/png;base64,") == len(plots)
    for text in ("What the numbers say", "placement aligned", "placement cross-rail",
                 "Spread across repetitions", "Cost", "Scale", "Machine and software",
                 "switch-port Gb/s", "rf-cross-rail/zc-cross-rail"):
        assert text in html, text
    assert "<script" not in html                      # self-contained, static


def test_htsim_export_holds_each_runs_transfers(results):
    out, htsim = results
    for run in ("zc-aligned", "rf-cross-rail"):
        lines = (htsim / f"{run}.cm").read_text().splitlines()
        first_rep = [r for r in _csv(out / run / "transfers.csv") if r["rep"] == "0"]
        assert lines[0] == "Nodes 16" and lines[1] == f"Connections {len(first_rep)}"
        assert (sum(int(ln.split()[-1]) for ln in lines[2:])
                == sum(int(r["bytes"]) for r in first_rep))


def test_spread_is_a_t_interval():
    s = spread([10.0, 12.0, 14.0])
    assert (s["n"], s["mean"], s["sd"], s["min"], s["max"]) == (3, 12.0, 2.0, 10.0, 14.0)
    assert s["ci95"] == pytest.approx(4.303 * 2 / 3 ** 0.5, abs=1e-3)
    assert spread([5.0])["ci95"] is None and spread([None]) is None


def test_crossval_errors_and_ratios():
    emu = {"z": {"fabric": "zcube", "placement": "a", "fct_ms": {"p50": 20.0, "p99": 40.0}},
           "r": {"fabric": "roft", "placement": "a", "fct_ms": {"p50": 10.0, "p99": 30.0}}}
    model = {"z": {"fct_ms": {"p50": 18.0, "p99": 36.0}},
             "r": {"fct_ms": {"p50": 11.0, "p99": 33.0}}}
    doc = crossval({"emulation": emu, "model": model})
    assert doc["reference"] == "emulation" and doc["backends"] == ["emulation", "model"]
    assert [r["model_error_p99"] for r in doc["runs"]] == [-0.1, 0.1]
    ratio = doc["ratios"][0]
    assert (ratio["emulation_p99"], ratio["model_p99"]) == (0.75, round(33 / 36, 4))
    assert ratio["model_error_p99"] == round((33 / 36) / 0.75 - 1, 4)
    assert doc["p99_within_15pct"] and not doc["ratio_within_10pct"]
    assert doc["within"] == {"model": {"p99_within_15pct": True,
                                       "ratio_within_10pct": False}}


def test_a_crossval_ratio_is_over_the_seeds_both_runs_carried():
    """A fabric that carried the first seeds only is set against the others' figures over
    those seeds, on every backend; each run's own row keeps its own figure."""
    def run(p99s, **kw):
        reps = [{"seed": k + 1, "fct_ms": {"p50": 10.0, "p99": v}} for k, v in enumerate(p99s)]
        return {"placement": "a", "fct_ms": {"p50": 10.0, "p99": max(p99s)},
                "repetitions": len(p99s), "per_rep": reps,
                "spread": {"fct_p99_ms": {"n": len(p99s), "mean": sum(p99s) / len(p99s),
                                          "ci95": 1.0},
                           "fct_p50_ms": {"n": len(p99s), "mean": 10.0, "ci95": 0.0}},
                **kw}
    emu = {"z": run([40.0, 40.0, 80.0, 80.0]), "s": run([60.0, 60.0])}
    model = {"z": run([30.0, 30.0, 90.0, 90.0]), "s": run([36.0, 36.0])}
    doc = crossval({"emulation": emu, "model": model})
    assert [r["emulation_p99_ms"] for r in doc["runs"]] == [60.0, 60.0]   # its own mean
    ratio = doc["ratios"][0]
    assert (ratio["emulation_p99"], ratio["model_p99"]) == (1.5, 1.2)     # seeds 1-2 only
    assert ratio["model_error_p99"] == -0.2 and ratio["emulation_p50"] == 1.0
    # the same seeds on both: each run's own figure, as before
    same = crossval({"emulation": {"z": run([40.0, 80.0]), "s": run([60.0, 60.0])}})
    assert same["ratios"][0]["emulation_p99"] == 1.0


def test_crossval_with_three_backends_judges_each_against_the_first_on_faithful_runs():
    good, bad = {"faithful": True, "reasons": []}, {"faithful": False, "reasons": ["late"]}
    emu = {"z": {"fabric": "zcube", "placement": "a", "fct_ms": {"p50": 20.0, "p99": 40.0},
                 "fidelity": good},
           "r": {"fabric": "roft", "placement": "a", "fct_ms": {"p50": 10.0, "p99": 30.0},
                 "fidelity": good},
           "s": {"fabric": "roft", "placement": "a", "fct_ms": {"p50": 10.0, "p99": 90.0},
                 "fidelity": bad}}
    ns3 = {"z": {"fct_ms": {"p50": 19.0, "p99": 42.0}}, "r": {"fct_ms": {"p50": 10.0,
                                                                         "p99": 31.0}},
           "s": {"fct_ms": {"p50": 10.0, "p99": 30.0}}}
    model = {"z": {"fct_ms": {"p50": 15.0, "p99": 30.0}}, "r": {"fct_ms": {"p50": 9.0,
                                                                           "p99": 29.0}},
             "s": {"fct_ms": {"p50": 9.0, "p99": 29.0}}}
    doc = crossval({"emulation": emu, "ns3": ns3, "model": model})
    z, r, s = doc["runs"]
    assert (z["ns3_error_p99"], z["model_error_p99"]) == (0.05, -0.25)
    assert s["faithful"] is False and s["ns3_error_p99"] == round(30 / 90 - 1, 4)
    # the unfaithful run is shown but judged by nobody: ns3 within, the model not
    assert doc["within"]["ns3"] == {"p99_within_15pct": True, "ratio_within_10pct": True}
    assert doc["within"]["model"]["p99_within_15pct"] is False
    assert [x["faithful"] for x in doc["ratios"]] == [True, False]
    text = to_text(doc)
    assert "emulation against ns3, model" in text and "s (not faithful)" in text
    assert "emu p99  ns3 p99  error  model p99  error" in " ".join(text.split("|"))
    assert "ns3: P99 FCT within 15% of the emulation for every run: yes" in text
    assert "model: P99 FCT within 15% of the emulation for every run: no" in text
    page = to_html(doc, "x")
    assert "ns3, model against emulation" in page and 'href="ns3/report.html"' in page
    # nothing faithful: nothing judged, and not called within
    none = crossval({"emulation": {"s": emu["s"]}, "ns3": {"s": ns3["s"]}})
    assert none["within"]["ns3"]["p99_within_15pct"] is None
    assert not none["p99_within_15pct"] and "not judged" in to_text(none)
