"""``zcube up --kv`` flags and ``zcube workload`` flags are a scenario: built, validated and
carried exactly as a scenario file is (no second implementation of requests, workloads,
sweeps or writing)."""
import csv

import pytest

from testbed.cli.common import fabric_from_args
from testbed.cli.main import main, make_parser
from testbed.cli.up import scenario_from_flags
from testbed.experiment.runner import requests_for, workload_for
from testbed.experiment.scenario import dumps, loads

UP = ["up", "zcube", "--n", "4", "--kv", "--count", "20", "--rate", "5", "--placement",
      "cross-rail"]


def flags_scenario(argv):
    args = make_parser().parse_args(argv)
    return scenario_from_flags(args, fabric_from_args(args))


def transfers(sc):
    reqs, _ = requests_for(sc, sc.seed)
    work = workload_for(sc, sc.fabrics[0].build(), sc.placements[0], sc.seed, reqs)
    return [(t.request, t.src, t.dst, t.bytes, round(t.ready_s, 9)) for t in work.transfers]


def test_up_flags_make_a_scenario_with_the_scenario_files_defaults():
    sc = flags_scenario(UP)
    blank = loads("name: x\nfabrics: [{name: zcube, builder: zcube, params: {n: 4}}]\n"
                  "workload: {count: 20}\n")
    assert (sc.seed, sc.link_mbps, sc.repetitions) == (blank.seed, blank.link_mbps, 1)
    assert sc.workload.arrivals == blank.workload.arrivals == "poisson"
    assert sc.workload.input_tokens == blank.workload.input_tokens
    assert (sc.workload.rate, sc.workload.count, sc.placements) == (5.0, 20, ["cross-rail"])
    assert sc.model.name == blank.model.name


def test_the_saved_scenario_carries_the_same_requests_as_the_flags():
    sc = flags_scenario(UP)
    again = loads(dumps(sc), "saved.yaml")
    assert transfers(again) == transfers(sc) and len(transfers(sc)) == 80


def test_sweep_and_background_flags_become_scenario_keys():
    sc = flags_scenario(["up", "roft", "--servers", "4", "--sweep", "4,1", "--slo-ms", "900",
                         "--background", "permutation", "--background-mbps", "3"])
    assert sc.sweep.rates == [1.0, 4.0] and sc.sweep.slo_ttft_ms == 900
    assert sc.sweep.every_rate                           # every rate named is carried
    assert sc.workload.count == 40                       # a sweep's default request count
    assert (sc.background.pattern, sc.background.mbps) == ("permutation", 3.0)


@pytest.mark.parametrize("argv,says", [
    (["--rate", "-1"], "--rate"),
    (["--prefill-tp", "0"], "--prefill-tp"),
    (["--model", "nope"], "--model"),
])
def test_bad_flags_name_the_flag_in_one_line(capsys, argv, says):
    code = main(["up", "zcube", "--n", "4", "--kv", "--count", "3", *argv,
                 "--save-scenario", "/nonexistent/never-written.yaml"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err, err


def test_zcube_workload_and_the_pipeline_build_the_same_transfers(tmp_path, capsys):
    path = tmp_path / "t.csv"
    argv = ["zcube", "--n", "4", "--count", "12", "--rate", "3", "--placement", "cross-rail"]
    assert main(["workload", *argv, "-o", str(path)]) == 0
    rows = [(int(r["request"]), r["src"], r["dst"], int(r["bytes"]), round(float(r["ready_s"]), 6))
            for r in csv.DictReader(path.open())]
    sc = flags_scenario(["up", *argv, "--kv"])
    assert rows == [(a, b, c, d, round(e, 6)) for a, b, c, d, e in transfers(sc)]
