"""link_mbps: auto, the emulated rate picked from the emulator's forwarding ceiling."""
import json
from types import SimpleNamespace

import pytest

from controller.routing import RouteTable
from testbed.cli.main import main
from testbed.core.backend import RunError
from testbed.experiment import autorate
from testbed.experiment.runner import run_scenario
from testbed.experiment.scenario import ScenarioError, loads
from testbed.model.backend import ModelBackend
from topologies import roft, zcube
from traffic.types import Transfer

SCENARIO = """
name: auto
backend: model
link_mbps: {rate}
time_dilation: {d}
fabrics:
  - {{name: zc, builder: zcube, params: {{n: 4, gpus_per_server: 4}}, policy: zcube}}
  - {{name: rf, builder: roft, params: {{servers: 4, gpus_per_server: 4}}, policy: ecmp}}
deployment: {{placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: 4, count: 12, input_tokens: 8192}}
"""


def one_transfer(fabric, src, dst, size, ready=0.0):
    return SimpleNamespace(transfers=[Transfer(0, src, dst, size, ready)])


def test_round_down_keeps_two_figures():
    assert autorate.round_down(137.9) == 130
    assert autorate.round_down(8.74) == 8.7
    assert autorate.round_down(1000) == 1000
    assert autorate.round_down(0) == 0


def test_one_transfer_offers_its_port_rate_times_the_switches_it_crosses():
    fab = roft(4, 4)
    table = RouteTable(fab, "ecmp")
    hosts = [h.name for h in fab.hosts]
    src = hosts[0]
    far = next(d for d in hosts[1:] if len(table.paths(src, d)[0]) - 2 == 3)
    near = next(d for d in hosts[1:] if len(table.paths(src, d)[0]) - 2 == 1)
    # 1.25 MB at 100 Mb/s lasts 0.1 s: one whole window at the port's rate
    for dst, switches in ((near, 1), (far, 3)):
        peak = autorate.peak_switch_mbps(table, one_transfer(fab, src, dst, 1_250_000), 100)
        assert peak == pytest.approx(100 * switches, rel=1e-6)
    # half in one window and half in the next: the peak is half as high
    w = one_transfer(fab, src, near, 1_250_000, ready=0.05)
    assert autorate.peak_switch_mbps(table, w, 100) == pytest.approx(50, rel=1e-6)


def test_a_zcube_transfer_striped_over_two_ports_offers_the_nic_rate():
    fab = zcube(4, 4)
    table = RouteTable(fab, "zcube")
    src, dst = fab.hosts[0].name, fab.hosts[-1].name
    hops = sum(len(p) - 2 for p in table.paths(src, dst)) / len(table.paths(src, dst))
    peak = autorate.peak_switch_mbps(table, one_transfer(fab, src, dst, 1_250_000), 100)
    assert peak == pytest.approx(100 * hops, rel=1e-6)


def test_the_rate_is_the_one_the_tightest_fabric_allows():
    choice = autorate.choose({"a": {"ceiling": 1000, "per_mbps": 2.0},
                              "b": {"ceiling": 600, "per_mbps": 2.0}})
    assert choice["binding"] == "b" and choice["link_mbps"] == 75      # 0.25 * 600 / 2
    assert choice["fabrics"]["a"]["fits_mbps"] == 125
    # background takes its share first; nothing left means no rate
    assert autorate.choose({"b": {"ceiling": 600, "per_mbps": 2.0}}, 100, 0.5)["link_mbps"] == 100
    assert autorate.choose({"b": {"ceiling": 600, "per_mbps": 2.0}}, 400)["link_mbps"] is None
    # a load too small to bind stops at the rate the ceiling was measured at
    assert autorate.choose({"b": {"ceiling": 600, "per_mbps": 0.01}})["link_mbps"] == 1000


class Ceiling:
    """The model backend, with a forwarding ceiling as the emulation would measure."""
    name = "model"

    def __init__(self, ceiling):
        self.ceiling, self.asked = ceiling, []

    def forwarding_ceiling(self, fabric, policy, options):
        self.asked.append((fabric.kind, options.link_mbps))
        return self.ceiling

    def session(self, fabric, policy, options):
        return ModelBackend().session(fabric, policy, options)


@pytest.mark.parametrize("dilation", [1, 2])
def test_auto_runs_every_fabric_at_the_rate_picked(tmp_path, dilation):
    be = Ceiling(900.0)
    summaries = run_scenario(loads(SCENARIO.format(rate="auto", d=dilation)), str(tmp_path),
                             backend=be, log=lambda msg: None)
    assert be.asked == [("zcube", 1000.0), ("roft", 1000.0)]
    rates = {s["link_mbps"] for s in summaries.values()}
    assert len(rates) == 1
    rate = rates.pop()
    choice = summaries["zc"]["scale"]["link_mbps_auto"]
    assert choice["link_mbps"] == rate and choice["share"] == autorate.SHARE
    worst = max(f["peak_switch_mbps_per_mbps"] for f in choice["fabrics"].values())
    assert rate <= autorate.SHARE * 900 / worst < rate * 1.1        # two figures, rounded down
    with open(tmp_path / "run.json") as f:
        assert json.load(f)["link_mbps"] == rate
    if dilation == 1:
        from testbed.analysis.report import build_report
        with open(build_report(str(tmp_path))) as f:
            page = f.read()
        assert "link_mbps: auto" in page and ("rf set it" in page or "zc set it" in page)


def test_the_peak_does_not_depend_on_the_rate():
    sc = loads(SCENARIO.format(rate=100, d=1))
    from testbed.experiment.runner import requests_for, workload_for
    fab = zcube(4, 4)
    table = RouteTable(fab, "zcube")
    reqs = requests_for(sc, 1)[0]
    peaks = [autorate.peak_switch_mbps(table, workload_for(sc.with_rate(r), fab, "cross-rail",
                                                           1, reqs), r) / r for r in (50, 200)]
    assert peaks[0] == pytest.approx(peaks[1], rel=1e-3)


def test_the_model_alone_cannot_pick_a_rate(tmp_path):
    with pytest.raises(RunError, match="link_mbps: auto"):
        run_scenario(loads(SCENARIO.format(rate="auto", d=1)), str(tmp_path),
                     backend="model", log=lambda msg: None)


@pytest.mark.parametrize("rate", ["fast", "0", "-5"])
def test_a_rate_that_is_not_a_number_or_auto_is_refused(rate):
    with pytest.raises(ScenarioError, match="link_mbps"):
        loads(SCENARIO.format(rate=rate, d=1))


@pytest.mark.parametrize("value", ["fast", "0", "nan"])
def test_run_refuses_a_bad_link_mbps_flag(capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "demo", "--link-mbps", value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--link-mbps" in err and "Traceback" not in err


def test_the_flag_overrides_the_scenario(tmp_path):
    out = tmp_path / "o"
    assert main(["run", "demo", "--backend", "model", "--link-mbps", "40", "-o", str(out),
                 "--no-report"]) == 0
    with open(out / "zcube" / "summary.json") as f:
        assert json.load(f)["link_mbps"] == 40


def test_flags_replace_the_dilation_and_pick_fabrics_and_the_run_says_so(tmp_path):
    out = tmp_path / "o"
    assert main(["run", "cross-rail", "--backend", "model", "--fabrics", "roft-spray,zcube",
                 "--link-mbps", "20", "--time-dilation", "4", "--repetitions", "2",
                 "-o", str(out), "--no-report"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["roft-spray", "zcube"]
    with open(out / "roft-spray" / "summary.json") as f:
        doc = json.load(f)
    assert (doc["link_mbps"], doc["scale"]["time_dilation"]) == (20, 4)
    assert doc["repetitions"] == 2
    text = (out / "roft-spray" / "scenario.yaml").read_text()
    first, rest = text.split("\n", 1)
    assert first == ("# run with --link-mbps 20 --time-dilation 4 --repetitions 2 "
                     "--fabrics zcube,roft-spray: "
                     "these replace the values below")
    assert "time_dilation: 2\n" in rest and "roft-spray" in rest
