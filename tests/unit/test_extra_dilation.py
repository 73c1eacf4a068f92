"""A fabric carried slower than the others (``extra_dilation``): the same bytes on slower
links, later times, and figures in the same units as the other fabrics'."""
import json

import pytest

from testbed.cli.main import main
from testbed.core.backend import WorkloadResult
from testbed.experiment.repetitions import run_dilated
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


def test_dilate_can_grow_bytes_less_than_it_stretches_times():
    w = work()
    slow = dilate(w, 6, bytes_factor=2)
    assert [t.bytes * 2 for t in w.transfers] == pytest.approx(
        [t.bytes for t in slow.transfers], abs=1)
    assert [t.ready_s * 6 for t in w.transfers] == pytest.approx(
        [t.ready_s for t in slow.transfers])
    assert [s.kv_bytes * 2 for s in w.schedule] == pytest.approx(
        [s.kv_bytes for s in slow.schedule], abs=1)
    assert slow.scale.time_dilation == 6
    assert dilate(w, 1, bytes_factor=1) is w
    with pytest.raises(ValueError, match="greater than 0"):
        dilate(w, 2, bytes_factor=0)


class Recorder:
    """Takes what it is given and answers as links of ``1 / slower`` the rate would: every
    transfer takes its bytes over a fixed rate, starting at its ready time."""

    def __init__(self, bytes_per_s: float):
        self.rate, self.given = bytes_per_s, None

    def run(self, work, faults=None):
        self.given = (work, faults)
        rows = [{"bytes": t.bytes, "bytes_received": t.bytes, "ready_s": t.ready_s,
                 "start_s": t.ready_s, "end_s": t.ready_s + t.bytes / self.rate,
                 "fct_ms": 1000 * t.bytes / self.rate} for t in work.transfers]
        links = [{"t_s": 1.0, "src": "g0", "dst": "a0", "bytes": 8000, "mbps": 1, "util": 0.5}]
        return WorkloadResult(rows, links, {"max": 0.5}, None)


def test_carry_slower_again_gives_the_same_figures_back_from_the_same_bytes():
    w = work()
    plain, slow = Recorder(1e6), Recorder(1e6 / 3)       # links 3 times slower
    a = run_dilated(plain, w, None, 2)
    b = run_dilated(slow, w, [{"at_s": 1.0, "duration_s": 0.5}], 2, extra=3)
    # the same bytes crossed both sessions' links; the slow one's times 3 times later
    assert [t.bytes for t in slow.given[0].transfers] == [t.bytes for t in
                                                         plain.given[0].transfers]
    assert [t.ready_s for t in slow.given[0].transfers] == pytest.approx(
        [3 * t.ready_s for t in plain.given[0].transfers])
    assert slow.given[1] == [{"at_s": 6.0, "duration_s": 3.0}]
    # and back in the undilated system's units, the same on both
    for x, y, t in zip(a.rows, b.rows, w.transfers):
        assert x["bytes"] == y["bytes"] == t.bytes
        assert y["bytes_received"] == pytest.approx(t.bytes, abs=1)
        assert y["fct_ms"] == pytest.approx(x["fct_ms"], abs=0.002)
        assert y["end_s"] == pytest.approx(x["end_s"], abs=1e-5)
    assert b.links[0]["t_s"] == pytest.approx(1 / 6, abs=1e-4) and b.links[0]["bytes"] == 4000
    assert a.links[0]["t_s"] == pytest.approx(1 / 2)


SCENARIO = """
name: xd
backend: model
time_dilation: {d}
link_mbps: {r}
fabrics:
  - {{name: zc, builder: zcube, params: {{n: 4, gpus_per_server: 4}}}}
  - {{name: zs, builder: zcube, params: {{n: 4, gpus_per_server: 4}}, extra_dilation: {x}}}
deployment: {{placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: 4, count: 8, input_tokens: 8192}}
"""


def test_the_model_carries_a_slower_fabric_as_the_others(tmp_path):
    path = tmp_path / "xd.yaml"
    path.write_text(SCENARIO.format(d=2, r=100, x=4))
    assert main(["run", str(path), "-o", str(tmp_path / "o"), "--no-report"]) == 0
    zc, zs = (json.loads((tmp_path / "o" / n / "summary.json").read_text())
              for n in ("zc", "zs"))
    assert zs["scale"]["extra_dilation"] == 1 and zs["scale"]["emulated_mbps"] == 100
    assert zs["scale"]["time_dilation"] == zc["scale"]["time_dilation"] == 2
    assert zs["fct_ms"] == zc["fct_ms"] and zs["ttft_ms"] == zc["ttft_ms"]


def test_the_slower_fabric_is_known_to_the_emulation_alone():
    from testbed.experiment.scenario import FabricSpec
    spec = FabricSpec(name="x", builder="roft", extra_dilation=2.5)
    assert spec.slower_on("emulation") == 2.5
    assert spec.slower_on("model") == spec.slower_on("ns3") == 1
    assert FabricSpec(name="y", builder="roft").extra_dilation == 1


@pytest.mark.parametrize("d, r, x, said", [
    (2, 100, 0.5, "extra_dilation: must be at least 1, got 0.5"),
    (2, 100, 60, "60 x time_dilation 2 is over 100"),
    (1, 1.5, 2, "its links would run at 0.75 Mb/s, under 1"),
])
def test_extra_dilation_is_bounded(tmp_path, capsys, d, r, x, said):
    path = tmp_path / "bad.yaml"
    path.write_text(SCENARIO.format(d=d, r=r, x=x))
    assert main(["run", str(path), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
