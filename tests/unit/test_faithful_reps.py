"""``zcube compare --faithful-reps``: a comparison over the seeds every run carried
faithfully, paired by seed, with figures and intervals over those seeds alone."""
import json
import math

import pytest

from testbed.analysis.compare import comparison, paired_of, to_text
from testbed.analysis.faithful import faithful_reps, note
from testbed.cli import main
from testbed.core import metrics
from testbed.errors import UsageError


def _rep(seed, p99, faithful):
    fid = None if faithful is None else {"faithful": faithful,
                                         "reasons": [] if faithful else ["late"]}
    return {"seed": seed, "fct_ms": {"p50": p99 / 2, "p99": p99}, "ttft_ms": {"p99": 10 * p99},
            "requests_per_s": 1.0, "link_util": {"max": 0.5, "mean": 0.1, "jain": 0.9},
            "fidelity": fid}


def _run(name, p99s, faithful, placement="cross-rail"):
    per_rep = [_rep(seed, p, f) for seed, p, f in zip(range(1, len(p99s) + 1), p99s, faithful)]
    whole = None if None in faithful else all(faithful)
    return {"run": name, "fabric": name.split("-")[0], "placement": placement,
            "repetitions": len(per_rep), "per_rep": per_rep,
            "fct_ms": {"p50": 1.0, "p99": 2.0}, "ttft_ms": {"p99": 20.0},
            "cost": {"switches": 8, "switch_ports": 64, "switch_port_gbps": 12800},
            "transfers_verified": 96 * len(per_rep),
            "fidelity": None if whole is None else {"faithful": whole,
                                                    "reasons": [] if whole else ["late"]}}


def test_only_the_seeds_every_run_carried_faithfully_are_compared_and_paired():
    zc = _run("zcube-x", [10, 11, 12, 13, 14], [True, True, False, True, True])
    rf = _run("roft-x", [20, 99, 24, 26, 28], [True, False, True, True, True])
    cut = faithful_reps([zc, rf])
    assert [r["faithful_reps"]["seeds"] for r in cut] == [[1, 4, 5], [1, 4, 5]]
    assert [r["repetitions"] for r in cut] == [3, 3]
    assert [r["fidelity"]["faithful"] for r in cut] == [True, True]
    assert [r["faithful_reps"]["whole_run"]["faithful"] for r in cut] == [False, False]
    assert cut[1]["spread"]["fct_p99_ms"]["mean"] == pytest.approx((20 + 26 + 28) / 3, abs=1e-3)
    g, = comparison(cut)
    p99 = next(r for r in g["rows"] if r["metric"] == "FCT p99 ms")
    assert p99["values"] == [pytest.approx(37 / 3, abs=1e-3), pytest.approx(74 / 3, abs=1e-3)]
    assert paired_of(p99, 1)["n"] == 3
    assert paired_of(p99, 1)["ratio"] == pytest.approx(2.0)          # 99 and 24 left out
    assert g["faithful"] == [True, True] and set(g["faithful_reps"]) == {"zcube-x", "roft-x"}
    assert "NOT FAITHFUL" not in to_text([g])
    words = note(cut)
    assert "zcube-x 3 of 5 (the whole run not faithful)" in words
    # the input is left as it was: the whole runs can still be compared beside the cut
    assert len(zc["per_rep"]) == 5 and zc["fidelity"]["faithful"] is False
    whole = paired_of(next(r for r in comparison([zc, rf])[0]["rows"]
                           if r["metric"] == "FCT p99 ms"), 1)
    assert whole["n"] == 5
    assert whole["ratio"] == pytest.approx(math.exp(sum(
        math.log(b / a) for a, b in zip([10, 11, 12, 13, 14], [20, 99, 24, 26, 28])) / 5),
        abs=1e-4)


def test_placements_are_cut_apart_and_unmeasured_repetitions_are_kept():
    runs = [_run("zcube-a", [10, 10, 10], [True, False, True], "aligned"),
            _run("roft-a", [9, 9, 9], [True, True, True], "aligned"),
            _run("zcube-m", [10, 12, 14], [None, None, None]),        # the model: no record
            _run("roft-m", [20, 24, 28], [None, None, None])]
    cut = {r["run"]: r for r in faithful_reps(runs)}
    assert cut["roft-a"]["faithful_reps"]["seeds"] == [1, 3]
    assert cut["roft-m"]["faithful_reps"]["seeds"] == [1, 2, 3]
    assert cut["roft-m"]["fidelity"] is None
    assert metrics.paired_verdict(paired_of(next(
        r for r in comparison([cut["zcube-m"], cut["roft-m"]])[0]["rows"]
        if r["metric"] == "FCT p99 ms"), 1)) == "ref"                 # roft higher


def test_fewer_than_two_seeds_kept_is_a_usage_error():
    runs = [_run("zcube-x", [10, 11, 12], [True, False, False]),
            _run("roft-x", [20, 22, 24], [True, True, True])]
    with pytest.raises(UsageError, match="only 1 seed"):
        faithful_reps(runs)


def test_compare_faithful_reps_from_the_command_line(tmp_path, capsys):
    for r in (_run("zcube-x", [10, 11, 12, 13], [True, True, False, True]),
              _run("roft-x", [20, 22, 24, 26], [True, True, True, True])):
        (tmp_path / r["run"]).mkdir()
        (tmp_path / r["run"] / "summary.json").write_text(json.dumps(r))
    dirs = [str(tmp_path / "zcube-x"), str(tmp_path / "roft-x")]
    assert main(["compare", *dirs]) == 0
    out = capsys.readouterr().out
    assert "NOT FAITHFUL zcube-x" in out and "paired over 4 repetitions" in out
    assert main(["compare", *dirs, "--faithful-reps"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("(faithful repetitions only") and "zcube-x 3 of 4" in out
    assert "paired over 3 repetitions" in out and "NOT FAITHFUL" not in out
    assert main(["compare", *dirs, "--faithful-reps", "--format", "json"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)[0]["faithful_reps"]["zcube-x"]["kept"] == 3
    assert "faithful repetitions only" in got.err
