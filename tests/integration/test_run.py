"""``zcube run`` on the emulation: a short two-fabric scenario end to end (root, OVS)."""
import csv
import json
import os
import time

from testbed.cli.main import main

SCENARIO = """\
name: short
link_mbps: 100
repetitions: 2
verify_sample: 40
calibration_s: 1
fabrics:
  - {name: zc, builder: zcube, params: {n: 4, gpus_per_server: 4}, policy: zcube}
  - {name: rf, builder: roft, params: {servers: 4, gpus_per_server: 4}, policy: ecmp}
deployment: {placements: [cross-rail]}
workload: {arrivals: poisson, rate: 4, count: 6, input_tokens: 4096}
"""
FILES = {"scenario.yaml", "fabric.json", "routes.txt", "transfers.csv", "links.csv",
         "requests.csv", "summary.json"}


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_run_writes_every_file_with_consistent_counts_then_compare_and_report(
        ovs, tmp_path, capsys, run_figures_match):
    old = os.umask(0)             # even under a careless umask, results are not world-writable
    try:
        _run_and_check(tmp_path, capsys, run_figures_match)
    finally:
        os.umask(old)


def _run_and_check(tmp_path, capsys, run_figures_match):
    scen = tmp_path / "short.yaml"          # rf run twice as slowly, its links at 50 Mb/s
    scen.write_text(SCENARIO.replace("policy: ecmp}", "policy: ecmp, extra_dilation: 2}")
                    + "order: mirrored\n")     # zc's seed 1, rf's 1 and 2, zc's 2 again
    out = tmp_path / "out"
    began = time.time()
    assert main(["run", str(scen), "-o", str(out)]) == 0
    ended = time.time()
    printed = capsys.readouterr().out
    assert "placement: cross-rail" in printed and "rf/zc" in printed
    requests = {}
    for run in ("zc", "rf"):
        d = out / run
        assert FILES <= {p.name for p in d.iterdir()}
        s = json.loads((d / "summary.json").read_text())
        rows = _csv(d / "transfers.csv")
        assert len(rows) == s["transfers_total"] == s["transfers_verified"] > 0
        assert sum(int(r["bytes"]) for r in rows) == s["bytes_total"]
        assert {r["rep"] for r in rows} == {"0", "1"} and {r["seed"] for r in rows} == {"1", "2"}
        assert s["repetitions"] == 2 and len(s["per_rep"]) == 2
        # each repetition's time 0 as Unix time: its rows happened inside the run, in order
        dil = s["scale"].get("time_dilation") or 1
        at = [[s["per_rep"][int(r["rep"])]["t0_unix"] + float(r[k]) * dil for r in rows
               if r["rep"] == str(rep) for k in ("start_s", "end_s")] for rep in (0, 1)]
        assert began < min(at[0]) and max(at[0]) < min(at[1]) and max(at[1]) < ended
        assert s["spread"]["fct_p50_ms"]["n"] == 2 and s["spread"]["fct_p50_ms"]["ci95"] is not None
        reqs = _csv(d / "requests.csv")
        assert len(reqs) == s["requests_total"] == 12
        assert all(r["ttft_ms"] for r in reqs)
        requests[run] = [(r["rep"], r["arrival_s"]) for r in reqs]
        # the datapath probe crossed the datapath beside every repetition and lost nothing
        probe = s["fidelity"]["probe"]
        assert probe["sent"] > 100 and probe["lost"] == 0 and 0 < probe["p50_ms"] < 2
        # and woke on its timer about as often as it sent, each wake-up's lateness kept
        assert probe["wakes"] > probe["sent"] / 2 and 0 <= probe["wake_p50_ms"] < 5
        assert all(float(r["wake_ms"]) >= 0 and r["stall_ms"] != "" for r in rows)
        assert s["fidelity"]["stalled"]["of"] == len(rows)
        # each isolated transfer with the probe beside it, when it ran, and its hosts' TCP
        iso = s["fidelity"]["isolated"]
        for kind in iso["kinds"]:
            n = len(kind["fct_over_ideal"])
            assert n == len(kind["probe_ms"]) == len(kind["wake_ms"]) == len(kind["at"]) > 0
            assert all(0 < d < 1000 for d in kind["probe_ms"])     # a datagram in each
            assert all(began < a < b < ended for a, b in kind["at"])
            assert all(r >= 0 for r in kind["retransmitted"]) and len(kind["unreceived"]) == n
            assert all(0 < f < 1000 * (b - a) for f, (a, b) in zip(kind["first_byte_ms"],
                                                                   kind["at"]))
            assert all(0 <= g < 1000 * (b - a) for g, (a, b) in zip(kind["gap_ms"], kind["at"]))
        assert iso["stalled"] >= 0 and iso["probe_max_ms"] > 0
        # each sender said its congestion window as the transfer started and ended
        assert all(c > 0 for k in iso["kinds"] for c in k["cwnd"] + k["cwnd_end"])
        assert all(int(r["cwnd"]) > 0 and int(r["cwnd_end"]) > 0 for r in rows)
        assert s["fidelity"]["probing"]["of"] == len(rows)
        assert s["verify"]["ok"] and s["calibration"]["aggregate_mbps"] > 0
        assert s["calibration"]["seconds"] == 1                  # the scenario's calibration_s
        links = _csv(d / "links.csv")
        assert {r["rep"] for r in links} == {"0", "1"}
        # the same windows in the undilated system's time on both fabrics, whatever their pace
        # (each window ends at a multiple of 0.5 s but the last, cut short when the run ends)
        ends = sorted({float(r["t_s"]) for r in links if r["rep"] == "0"})[:-1]
        assert ends and all(t > 0.4 and abs(t / 0.5 - round(t / 0.5)) < 0.1 for t in ends), ends
        slower = 2 if run == "rf" else 1
        assert (s["scale"]["extra_dilation"], s["scale"]["emulated_mbps"]) == (slower,
                                                                                100 / slower)
        assert s["calibration"]["aggregate_mbps"] < 16 * 100 / slower
        for key in ("fct_ms", "slowdown", "ttft_ms", "link_util", "scale"):
            assert s[key], key
    assert requests["zc"] == requests["rf"]            # the same requests on both fabrics
    t0 = {run: [r["t0_unix"] for r in json.loads((out / run / "summary.json").read_text())[
        "per_rep"]] for run in ("zc", "rf")}
    assert t0["zc"][0] < t0["rf"][0] < t0["rf"][1] < t0["zc"][1], t0    # mirrored halves
    assert json.loads((out / "zc" / "summary.json").read_text())["sessions"] == 2
    bytes_total = {run: json.loads((out / run / "summary.json").read_text())["bytes_total"]
                   for run in ("zc", "rf")}
    assert bytes_total["zc"] == bytes_total["rf"]      # and the same KV bytes, rf's undilated
    netns = os.listdir("/var/run/netns") if os.path.isdir("/var/run/netns") else []
    assert not [n for n in netns if n.startswith("zcdprobe")]      # the probe's path is gone
    hops = {run: {r["hops"] for r in _csv(out / run / "transfers.csv")} for run in ("zc", "rf")}
    assert hops["zc"] == {"2.0"}                        # ZCube: every path crosses two switches
    html = (out / "report.html").read_text()
    for name in ("fct-cdf", "ttft-cdf", "hops", "heatmap-zc", "heatmap-rf", "fabric-zc"):
        assert ((out / "plots" / f"{name}.png").is_file()
                and (out / "plots" / f"{name}.svg").is_file())
    assert html.count("data:image/png;base64,") == 7 and "placement cross-rail" in html
    assert "What the numbers say" in html and "Machine and software" in html

    for run in ("zc", "rf"):                  # summary.json holds numpy's and scipy's figures
        run_figures_match(out / run)
    loose = [str(p) for p in out.rglob("*") if p.stat().st_mode & 0o002]
    assert not loose, f"world-writable results: {loose}"

    assert main(["compare", str(out / "zc"), str(out / "rf"), "--format", "json"]) == 0
    groups = json.loads(capsys.readouterr().out)
    fct = next(r for r in groups[0]["rows"] if r["metric"] == "FCT p99 ms")
    zc = json.loads((out / "zc" / "summary.json").read_text())
    rf = json.loads((out / "rf" / "summary.json").read_text())
    # two repetitions: the value shown is the mean of the per-repetition P99s, with the
    # interval of that mean (not the pooled P99 beside another estimator's interval)
    want = [s["spread"]["fct_p99_ms"] for s in (zc, rf)]
    assert fct["values"] == [w["mean"] for w in want] and fct["ci95"] == [w["ci95"] for w in want]
    assert fct["estimators"] == ["mean_of_reps", "mean_of_reps"]
    assert abs(fct["ratios"][1] - want[1]["mean"] / want[0]["mean"]) < 1e-9


def test_crossval_runs_both_backends_and_reports_the_model_error(ovs, tmp_path, capsys):
    scen = tmp_path / "short.yaml"
    scen.write_text(SCENARIO.replace("repetitions: 2", "repetitions: 1"))
    out = tmp_path / "cv"
    assert main(["crossval", str(scen), "-o", str(out), "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "emulation against model" in printed and "rf/zc" in printed
    doc = json.loads((out / "crossval.json").read_text())
    assert [r["run"] for r in doc["runs"]] == ["zc", "rf"]
    for r in doc["runs"]:
        emu = json.loads((out / "emulation" / r["run"] / "summary.json").read_text())
        mod = json.loads((out / "model" / r["run"] / "summary.json").read_text())
        assert emu["backend"] == "emulation" and mod["backend"] == "model"
        assert emu["transfers_total"] == mod["transfers_total"] == emu["transfers_verified"]
        assert r["emulation_p99_ms"] == emu["fct_ms"]["p99"]
        assert r["model_error_p99"] == round(mod["fct_ms"]["p99"] / emu["fct_ms"]["p99"] - 1,
                                             4)
    assert doc["ratios"][0]["run"] == "rf" and doc["ratios"][0]["reference"] == "zc"
    page = (out / "crossval.html").read_text()
    assert "Ratios between fabrics" in page and "rf/zc" in page


def test_run_with_faults_records_each_fault_and_loses_nothing(ovs, tmp_path):
    scen = tmp_path / "faults.yaml"
    scen.write_text(SCENARIO.replace("repetitions: 2", "repetitions: 1").replace(
        "count: 6, input_tokens: 4096", "count: 8, input_tokens: 8192")
        + "model: {preset: llama3-70b, prefill_tokens_per_s: 200000}\n"
        + "faults:\n  - {at_s: 0.3, element: 'random:switch', duration_s: 1}\n"
        + "  - {at_s: 1.5, element: 'g5:0'}\n")
    out = tmp_path / "out"
    # the report's fault section is the same for every backend: test_ns3_faults.py reads it
    assert main(["run", str(scen), "-o", str(out), "--no-report"]) == 0
    for run in ("zc", "rf"):
        s = json.loads((out / run / "summary.json").read_text())
        downs = [f for f in s["faults"] if f["action"] == "down"]
        assert [f["element"] == "g5:0" for f in downs] == [False, True]
        assert all(f["since_injection_s"] < 5 for f in downs)
        assert s["transfers_lost"] == 0
        # every transfer completes verified unless the fault cut its GPU off (ROFT's g5)
        cut = sum(f["transfers_cut_off"] for f in downs)
        assert s["transfers_verified"] + cut == s["transfers_total"]
        if run == "zc":
            assert cut == 0
