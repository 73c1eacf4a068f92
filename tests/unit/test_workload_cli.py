"""``zcube workload``: the PD workload a fabric would carry, and its bad inputs."""
import csv
import json

import pytest

from testbed.cli.main import main


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def summary(capsys, *argv):
    code, out, err = run(capsys, "workload", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_gqa_aligned_traffic_stays_on_a_rail_and_cross_rail_never_does(capsys):
    common = ("zcube", "--n", "4", "--model", "llama3-70b", "--arrivals", "trace",
              "--duration", "30")
    aligned = summary(capsys, *common, "--placement", "aligned")
    cross = summary(capsys, *common, "--placement", "cross-rail")
    assert aligned["same_switch_bytes_share"] == 1.0
    assert cross["same_switch_bytes_share"] == 0.0
    assert aligned["bytes_total"] == cross["bytes_total"] > 0
    assert aligned["requests"] == cross["requests"] == 87        # first 30 s of the trace


def test_kv_bytes_are_scaled_by_the_link_factor(capsys):
    common = ("roft", "--servers", "4", "--arrivals", "poisson", "--count", "20")
    slow = summary(capsys, *common, "--link-mbps", "100")
    fast = summary(capsys, *common, "--link-mbps", "200")
    assert slow["scale"] == {"link": 100 / 400_000, "size": 100 / 400_000,
                             "time_dilation": 1.0}
    assert fast["bytes_total"] == pytest.approx(2 * slow["bytes_total"], rel=1e-4)


def test_transfers_csv_has_one_row_per_transfer(capsys, tmp_path):
    path = tmp_path / "t.csv"
    code, _, _ = run(capsys, "workload", "zcube", "--arrivals", "poisson", "--count", "10",
                     "-o", str(path))
    rows = list(csv.DictReader(path.open()))
    assert code == 0 and len(rows) == 40              # 10 requests x 4 ranks (TP4 -> TP4)
    assert {r["request"] for r in rows} == {str(i) for i in range(10)}
    assert all(int(r["bytes"]) > 0 for r in rows)


@pytest.mark.parametrize("argv,names", [
    (["--model", "nope"], "unknown model 'nope'"),
    (["--arrivals", "poisson"], "--count or --duration"),
    (["--trace", "/no/such.jsonl"], "no such file: /no/such.jsonl"),
    (["--trace", "/"], "--trace: / is a folder, not a trace file"),
    (["--placement", "diagonal"], "--placement"),
    (["--prefill-tp", "0"], "--prefill-tp"),
    (["--link-mbps", "0"], "--link-mbps"),
    (["--arrivals", "poisson", "--rate", "-1", "--count", "3"], "rate"),
])
def test_bad_workload_input_is_one_line_exit_2(capsys, argv, names):
    code, out, err = run(capsys, "workload", "zcube", *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and names in err


def test_a_trace_with_a_line_that_is_not_utf8_replays_the_rest_and_says_so(capsys, tmp_path):
    good = [json.dumps({"timestamp": 100 * i, "input_length": 4096, "output_length": 10})
            for i in range(4)]
    f = tmp_path / "t.jsonl"
    f.write_bytes(("\n".join(good[:2]) + "\n").encode() + b'{"timestamp": 250\xff}\n'
                  + ("\n".join(good[2:]) + "\n").encode())
    code, out, err = run(capsys, "workload", "zcube", "--trace", str(f))
    assert code == 0, err
    assert "requests 4 (trace; 1 trace lines not replayed)" in out, out
    assert "1 trace line(s) not replayed (line 3: not UTF-8 text (byte 18))" in out, out

