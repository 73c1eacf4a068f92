"""Every runaway input the issue found ends in one line and exit 2 before anything starts,
in a process whose memory is capped (testbed/experiment/scenario/limits.py, checks.py)."""
import json
import os
import re
import subprocess
import sys

import pytest

from testbed.experiment.scenario import ScenarioError, limits, loads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAD = """name: bounds
backend: model
fabrics: [{name: z, builder: zcube, params: {n: 4, gpus_per_server: 4}}]
"""
CAP = 2 << 30                               # bytes of address space the CLI may take


# the CLI in a process of its own that caps its own address space first (no preexec_fn:
# fork() in a process that has loaded eventlet warns)
CAPPED = ("import resource, runpy, sys; "
          f"resource.setrlimit(resource.RLIMIT_AS, ({CAP}, {CAP})); "
          "sys.argv[0] = 'zcube'; runpy.run_module('testbed.cli', run_name='__main__')")


def zcube(tmp_path, *argv, text=None):
    if text is not None:
        (tmp_path / "s.yaml").write_text(HEAD + text)
    return subprocess.run([sys.executable, "-c", CAPPED, *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))


@pytest.mark.parametrize("text, key, says", [
    ("workload: {count: 100000000000}\n", "workload.count", "must be at most 1,000,000"),
    ("workload: {count: 5}\nrepetitions: 1000000000\n", "repetitions", "at most 1,000"),
    ("workload: {count: 5, input_tokens: 10000000000000}\n", "workload.input_tokens",
     "at most 10,000,000"),
    ("workload: {count: 5, rate: 0.000001}\n", "workload.count", "at most 86,400 s"),
    ("workload: {duration_s: 80000, rate: 90000}\n", "workload.duration_s",
     "at most 1,000,000"),
    ("workload: {count: 5}\nmodel: {preset: llama3-70b, prefill_tokens_per_s: 0.001}\n",
     "workload.input_tokens", "to prefill or to move"),
    ("workload: {count: 5}\nlink_mbps: 0.01\n", "link_mbps", "from 1 to 1,600,000"),
])
def test_runaway_values_are_one_line_and_exit_2_before_anything_starts(tmp_path, text, key,
                                                                       says):
    got = zcube(tmp_path, "run", "s.yaml", "-o", "out", text=text)
    assert got.returncode == 2, got.stderr
    assert got.stderr.count("\n") == 1 and "Traceback" not in got.stderr, got.stderr
    assert re.search(rf"s\.yaml:[45]: {re.escape(key)}: ", got.stderr), got.stderr
    assert says in got.stderr, got.stderr
    assert not (tmp_path / "out").exists()


def test_a_scenario_that_would_outgrow_the_memory_available_is_refused(monkeypatch):
    monkeypatch.setattr(limits, "available_bytes", lambda: 1 << 30)
    with pytest.raises(ScenarioError) as err:
        loads(HEAD + "workload: {count: 20000, rate: 100}\nrepetitions: 4\n", "s.yaml")
    assert str(err.value).startswith("s.yaml:4: workload: on fabrics[0] (z): 20,000 requests "
                                     "x 4 repetition(s) x 1 placement(s) x 4 transfers would "
                                     "hold about 3.2 GiB; this machine has 1.0 GiB available")
    # a fifth of it fits (80% of what is available)
    loads(HEAD + "workload: {count: 4000, rate: 100}\nrepetitions: 4\n", "s.yaml")


def test_the_limits_are_in_the_help():
    from testbed.experiment.scenario import describe
    text = describe()
    for line in ("count  number of requests (trace: at most this many) (at most 1,000,000)",
                 "input_tokens  poisson/bursty: prompt tokens per request (default 8192, at "
                 "most 10,000,000)",
                 "faults: (list)  elements taken down during each run, on every backend (at most "
                 "1,000 items)"):
        assert line in text


def test_a_trace_reports_every_bad_line_by_number_in_summary_and_report(tmp_path):
    good = [json.dumps({"timestamp": t, "input_length": 4096, "output_length": 10})
            for t in (1000, 1400, 1200)]
    (tmp_path / "t.jsonl").write_bytes(
        b'{"timestamp": 0, "input_length": 0, "output_length": 5}\n'
        + (good[0] + "\n").encode() + b"not json\n" + b'{"timestamp": 5\xff}\n'
        + (good[1] + "\n").encode() + b'{"timestamp": 9, "input_length": "9"}\n'
        + b'{"timestamp": 9, "input_length": -3, "output_length": 5}\n'
        + (good[2] + "\n").encode())
    got = zcube(tmp_path, "run", "s.yaml", "-o", "out",
                text="workload: {arrivals: trace, trace: t.jsonl}\n")
    assert got.returncode == 0, got.stderr
    assert "5 trace line(s) not replayed (line 1: zero input_length" in got.stderr
    doc = json.loads((tmp_path / "out" / "z" / "summary.json").read_text())
    assert [(x["line"], x["reason"].split(":")[0]) for x in doc["skipped_trace_line_list"]] \
        == [(1, "zero input_length"), (3, "not JSON"), (4, "not UTF-8 text (byte 16)"),
            (6, "missing field output_length"), (7, "negative value")]
    assert (doc["skipped_trace_lines"], doc["trace_lines_out_of_order"]) == (5, 1)
    # the good lines at their own times (from the first good one), in time order
    with open(tmp_path / "out" / "z" / "requests.csv") as f:
        arrivals = sorted(float(r.split(",")[2]) for r in list(f)[1:])
    assert arrivals == pytest.approx([0.0, 0.2, 0.4])
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Trace lines not replayed" in page and "missing field output_length" in page


def test_an_unexpected_error_is_one_line_naming_a_log_file_with_the_traceback(
        monkeypatch, capsys):
    from testbed.cli import fabric as verbs
    from testbed.cli.main import main

    def broken(args):
        raise RuntimeError("a bug\nover two lines")
    monkeypatch.setattr(verbs, "cmd_cost", broken)
    assert main(["cost", "zcube"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    m = re.fullmatch(r"zcube cost: internal error: RuntimeError: a bug\\nover two lines "
                     r"\(traceback in (\S+\.log); please report it\)\n", err)
    assert m, err
    with open(m.group(1)) as f:
        logged = f.read()
    os.unlink(m.group(1))
    assert "Traceback" in logged and "RuntimeError: a bug" in logged and "broken" in logged


@pytest.mark.parametrize("argv, says", [
    (["workload", "zcube", "--count", "3", "--link-mbps", "0.5"],
     "--link-mbps must be from 1 to 1,600,000, got 0.5"),
    (["up", "zcube", "--link-mbps", "1e9"], "--link-mbps must be from 1 to 1,600,000, got 1e+09"),
    (["up", "zcube", "--trace-sample", "10000000"],
     "--trace-sample must be from 0 to 1,000,000, got 1e+07"),
    (["up", "zcube", "--slo-ms", "0"], "--slo-ms must be above 0 and at most 3,600,000, got 0"),
    (["run", "demo", "--link-mbps", "1e9"], "--link-mbps must be from 1 to 1,600,000, got 1e+09"),
    (["run", "demo", "--time-dilation", "0.5"], "--time-dilation must be from 1 to 100, got 0.5"),
    (["run", "demo", "--time-dilation", "nan"],
     "--time-dilation must be from 1 to 100, got nan"),
    (["run", "demo", "--repetitions", "0"], "--repetitions must be from 1 to 1,000, got 0"),
    (["run", "demo", "--repetitions", "1001"],
     "--repetitions must be from 1 to 1,000, got 1001"),
    (["run", "cross-rail", "--fabrics", "roft,clos"],
     "--fabrics: cross-rail has no fabric 'clos' (it has zcube, roft, roft-spray)"),
])
def test_flags_outside_their_limits_are_one_line_before_anything_starts(capsys, argv, says):
    from testbed.cli.main import main
    assert main(argv) == 2
    assert capsys.readouterr().err == f"zcube {argv[0]}: error: {says}\n"


def test_a_trace_is_read_once_for_every_repetition_and_again_when_it_changes(tmp_path,
                                                                             monkeypatch):
    from testbed.experiment.scenario import requests as scenario_requests
    from traffic import arrivals
    reads = []
    real = arrivals.read_trace
    monkeypatch.setattr(arrivals, "read_trace", lambda *a, **k: reads.append(a) or real(*a, **k))
    scenario_requests._replay.cache_clear()
    line = '{{"timestamp": {}, "input_length": 4096, "output_length": 10}}\n'
    trace = tmp_path / "t.jsonl"
    trace.write_text(line.format(0) + line.format(500))
    sc = loads(HEAD + f"workload: {{arrivals: trace, trace: {trace}}}\nrepetitions: 3\n")
    runs = [scenario_requests.requests_for(sc, seed)[0] for seed in (1, 2, 3)]
    assert len(reads) == 1 and runs[0] == runs[1] == runs[2] and len(runs[0]) == 2
    runs[0].clear()                        # a caller's list is its own
    assert len(scenario_requests.requests_for(sc, 4)[0]) == 2
    trace.write_text(line.format(0) + line.format(500) + line.format(900))
    os.utime(trace, ns=(1, 1))             # a different change time even within one tick
    assert len(scenario_requests.requests_for(sc, 1)[0]) == 3 and len(reads) == 2
