"""Time dilation: the emulation carries a slower copy of the workload and reports it back in
the undilated system's units."""
import json

import pytest

from testbed.cli.main import main
from topologies import zcube
from traffic.arrivals import poisson
from traffic.models import get_model
from traffic.placement import deploy
from traffic.types import Scale
from traffic.workload import build_workload, dilate


def work():
    return build_workload(poisson(4, count=6, seed=3, input_tokens=4096),
                          deploy(zcube(4, 4), 4, 4, placement="cross-rail"),
                          get_model("llama3-70b"), scale=Scale.equal(2.5e-4))


def test_dilate_makes_transfers_bigger_and_later_at_the_same_load():
    w, slow = work(), dilate(work(), 3)
    assert [t.bytes * 3 for t in w.transfers] == pytest.approx([t.bytes for t in slow.transfers],
                                                               abs=1)
    assert [t.ready_s * 3 for t in w.transfers] == pytest.approx(
        [t.ready_s for t in slow.transfers])
    assert [s.request.arrival_s * 3 for s in w.schedule] == pytest.approx(
        [s.request.arrival_s for s in slow.schedule])
    assert slow.scale.time_dilation == 3 and w.scale.time_dilation == 1
    assert dilate(w, 1) is w


SCENARIO = """
name: dil
backend: model
time_dilation: {d}
fabrics: [{{name: zc, builder: zcube, params: {{n: 4, gpus_per_server: 4}}}}]
deployment: {{placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: 4, count: 12, input_tokens: 8192}}
"""


def run(tmp_path, d):
    path = tmp_path / f"d{d}.yaml"
    path.write_text(SCENARIO.format(d=d))
    assert main(["run", str(path), "-o", str(tmp_path / f"o{d}"), "--no-report"]) == 0
    return json.loads((tmp_path / f"o{d}" / "zc" / "summary.json").read_text())


def test_a_dilated_run_reports_undilated_bytes_and_times(tmp_path):
    plain, slow = run(tmp_path, 1), run(tmp_path, 2)
    assert slow["scale"]["time_dilation"] == 2 and plain["scale"]["time_dilation"] == 1
    assert slow["bytes_total"] == plain["bytes_total"]
    # fixed per-switch delays weigh half as much once divided back: close, not equal
    assert slow["fct_ms"]["p50"] == pytest.approx(plain["fct_ms"]["p50"], rel=0.15)
    assert slow["ttft_ms"]["p50"] == pytest.approx(plain["ttft_ms"]["p50"], rel=0.05)


def test_time_dilation_is_bounded(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(SCENARIO.format(d=0.5))
    assert main(["run", str(path)]) == 2
    assert "time_dilation: must be from 1 to 100" in capsys.readouterr().err


def test_a_dilated_faults_transfer_figures_come_back_undilated_and_its_control_plane_as_measured():
    from testbed.experiment.repetitions import _undilate_fault
    f = {"t_s": 2.0, "at_s": 2.0, "late_s": 0.002, "since_injection_s": 0.05,
         "agents_told_s": 0.04, "first_byte_after_ms": {"p50": 80.0, "max": 120.0},
         "fct_ms_before": {"n": 10, "p50": 100.0, "p99": 140.0}, "fct_ms_during": None}
    out = _undilate_fault(f, 2)
    assert (out["t_s"], out["at_s"], out["late_s"]) == (1.0, 1.0, 0.001)
    assert out["first_byte_after_ms"] == {"p50": 40.0, "max": 60.0}
    assert out["fct_ms_before"] == {"n": 10, "p50": 50.0, "p99": 70.0}
    assert out["fct_ms_during"] is None
    assert (out["since_injection_s"], out["agents_told_s"]) == (0.05, 0.04)
