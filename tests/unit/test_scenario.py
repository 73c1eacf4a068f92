"""Scenario files: the shipped ones validate; bad ones fail naming file, line and key."""
import glob
import os

import pytest

from testbed.cli.main import main
from testbed.experiment.scenario import ScenarioError, loads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.yaml")))

GOOD = """\
name: two
fabrics:
  - {name: z, builder: zcube, params: {n: 4, gpus_per_server: 4}, policy: zcube}
  - {name: r, builder: roft, params: {servers: 4, gpus_per_server: 4}}
workload: {arrivals: poisson, rate: 4, count: 10}
"""


def test_every_shipped_scenario_validates_and_the_required_ones_exist():
    names = {os.path.basename(p)[:-5] for p in SHIPPED}
    assert {"demo", "layouts", "incast", "mooncake", "equal-cost", "zcube-policies"} <= names
    for path in SHIPPED:
        with open(path) as f:
            sc = loads(f.read(), path)
        assert len(sc.fabrics) >= 2 and sc.run_names()


def test_demo_is_zcube4_against_full_bisection_roft_aligned_then_cross_rail():
    sc = loads(open(os.path.join(ROOT, "scenarios", "demo.yaml")).read(), "demo.yaml")
    fabs = [f.build() for f in sc.fabrics]
    assert [f.label for f in fabs] == ["zcube n=4", "roft 4x4"]
    assert all(len(f.hosts) == 16 and f.nic_gbps == 400 for f in fabs)
    assert sc.placements == ["aligned"] and sc.backend == "emulation"
    assert [r[2] for r in sc.run_names()] == ["zcube", "roft"]
    # the crossed layouts come from the network-bound scenario the demo runs next, on the
    # same two fabrics and a spraying Clos
    net = loads(open(os.path.join(ROOT, "scenarios", "cross-rail.yaml")).read(), "x.yaml")
    assert net.placements == ["cross-rail"] and net.backend == "emulation"
    assert [f.build().label for f in net.fabrics] == ["zcube n=4", "roft 4x4", "roft 4x4"]


def test_defaults_fill_in():
    sc = loads(GOOD, "good.yaml")
    assert (sc.backend, sc.link_mbps, sc.seed, sc.repetitions) == ("emulation", 100.0, 1, 1)
    assert sc.deployment.placements == ["aligned"] and sc.deployment.prefill_tp == 4
    assert sc.workload.rate == 4.0 and sc.workload.count == 10
    assert sc.fabrics[1].policy is None and sc.model.name == "llama3-70b"
    assert [r[2] for r in sc.run_names()] == ["z", "r"]


@pytest.mark.parametrize("text, where", [
    (GOOD.replace("name: two", "name: two\nfabrik: 1"), "bad.yaml:2: fabrik: unknown key"),
    (GOOD.replace("policy: zcube", "polcy: zcube"), "bad.yaml:3: fabrics[0].polcy: unknown key"),
    (GOOD.replace("rate: 4", "rate: fast"), "bad.yaml:5: workload.rate: expected a number"),
    (GOOD.replace("count: 10", "count: 2.5"), "bad.yaml:5: workload.count: expected a whole"),
    (GOOD.replace("builder: roft", "builder: torus"),
     "bad.yaml:4: fabrics[1].builder: expected one of"),
    (GOOD.replace("n: 4, gpus", "n: 5, gpus"),
     "bad.yaml:3: fabrics[0].params: gpus_per_server=4 must divide n=5"),
    (GOOD.replace("n: 4, gpus", "m: 4, gpus"),
     "bad.yaml:3: fabrics[0].params: got an unexpected keyword"),
    (GOOD.replace("policy: zcube", "policy: nonsense"), "bad.yaml:3: fabrics[0].policy:"),
    (GOOD.replace("name: r,", "name: z,"), "bad.yaml:4: fabrics[1].name: 'z' is already"),
    (GOOD.replace("name: r,", "name: 'a b',"),
     "bad.yaml:4: fabrics[1].name: 'a b' is not a usable name"),
    (GOOD + "repetitions: 0\n", "bad.yaml:6: repetitions: must be at least 1"),
    (GOOD + "link_mbps: -5\n", "bad.yaml:6: link_mbps: must be 0 or more"),
    (GOOD + "seed: true\n", "bad.yaml:6: seed: expected a whole number"),
    (GOOD + "backend: htsim\n", "bad.yaml:6: backend: expected one of emulation, model, ns3"),
    (GOOD + "model: gpt-9\n", "bad.yaml:6: model: unknown model 'gpt-9'"),
    (GOOD + "model: {preset: glm-5, layerz: 3}\n", "bad.yaml:6: model: unknown model field"),
    (GOOD + "deployment: {placements: [aligned, sideways]}\n",
     "bad.yaml:6: deployment.placements[1]"),
    (GOOD + "deployment: {prefill_tp: 32}\n", "bad.yaml:6: deployment: on fabrics[0] (z)"),
    (GOOD + "sweep: {rates: [1, 2]}\n", "bad.yaml:6: sweep: missing required key 'slo_ttft_ms'"),
    (GOOD + "sweep: {rates: [0, 2], slo_ttft_ms: 100}\n", "bad.yaml:6: sweep.rates: rates must be"),
    (GOOD + "workload: {arrivals: poisson}\n", "bad.yaml:6: workload: given twice"),
    (GOOD.replace("workload: {arrivals: poisson, rate: 4, count: 10}",
                  "workload: {arrivals: poisson}"),
     "bad.yaml:5: workload: give count or duration_s"),
    (GOOD.replace("workload: {arrivals: poisson, rate: 4, count: 10}",
                  "workload: {arrivals: trace, trace: nothere.jsonl}"),
     "bad.yaml:5: workload.trace: no such file"),
    (GOOD.replace("workload: {arrivals: poisson, rate: 4, count: 10}",
                  "workload: {arrivals: trace, trace: /}"),
     "bad.yaml:5: workload.trace: / is a folder, not a trace file"),
    (GOOD + "faults:\n  - {at_s: 1, element: a0-b9}\n",
     "bad.yaml:7: faults[0].element: on fabrics[0] (z): a0-b9: no node named 'b9'"),
    (GOOD + "faults:\n  - {at_s: 1, element: 'random:cable'}\n",
     "bad.yaml:7: faults[0].element: random"),
    (GOOD + "faults:\n  - {element: a2}\n", "bad.yaml:7: faults[0]: missing required key 'at_s'"),
    (GOOD + "faults:\n  - {at_s: 1, element: a2, for: 3}\n",
     "bad.yaml:7: faults[0].for: unknown key"),
    ("name: x\n", "bad.yaml:1: scenario: missing required key 'fabrics'"),
    ("", "bad.yaml:1: scenario: the file is empty"),
    ("- 1\n- 2\n", "bad.yaml:1: scenario: expected a mapping"),
    ("name: [x\n", "bad.yaml:2: not valid YAML"),
    ("name: x\nfabrics: []\n", "bad.yaml:2: fabrics: must not be empty"),
    ("name: x\nfabrics: {a: 1}\n", "bad.yaml:2: fabrics: expected a list"),
])
def test_bad_scenarios_name_file_line_and_key(text, where):
    with pytest.raises(ScenarioError) as err:
        loads(text, "bad.yaml")
    assert str(err.value).startswith(where), str(err.value)
    assert "\n" not in str(err.value)


def test_faults_name_elements_of_every_fabric_or_random_ones():
    sc = loads(GOOD + "faults:\n  - {at_s: 1.5, element: 'random:switch', duration_s: 2}\n"
                      "  - {at_s: 2, element: 'g3:0'}\n", "f.yaml")
    assert [f.model_dump() for f in sc.faults] == [
        {"at_s": 1.5, "element": "random:switch", "duration_s": 2.0},
        {"at_s": 2.0, "element": "g3:0", "duration_s": None}]
    from testbed.experiment.fault_schedule import resolve
    fab = sc.fabrics[1].build()
    one, two = resolve(fab, sc.faults, 1), resolve(fab, sc.faults, 1)
    assert one == two and one[0]["element"] in {s.name for s in fab.switches}
    assert {resolve(fab, sc.faults, k)[0]["element"] for k in range(20)} == \
        {s.name for s in fab.switches}                  # seeded, and covers every switch


def test_trace_paths_are_relative_to_the_scenario_file(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 10, '
                                      '"output_length": 1, "hash_ids": []}\n')
    text = GOOD.replace("workload: {arrivals: poisson, rate: 4, count: 10}",
                        "workload: {arrivals: trace, trace: t.jsonl}")
    sc = loads(text, str(tmp_path / "s.yaml"))
    assert sc.workload.trace == str(tmp_path / "t.jsonl")


def test_cli_run_refuses_a_bad_scenario_in_one_line_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("rate: 4", "rate: -1"))
    assert main(["run", str(bad), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "workload.rate" in err and ":5:" in err
    assert not (tmp_path / "out").exists()                      # nothing started or written
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "no such scenario file" in capsys.readouterr().err


def test_cli_compare_and_report_refuse_folders_without_results(tmp_path, capsys):
    assert main(["compare", str(tmp_path)]) == 2
    assert "no results here" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "no such results folder" in capsys.readouterr().err


def test_run_creates_missing_output_folders_but_refuses_a_file(tmp_path, capsys):
    from testbed.errors import UsageError
    from testbed.experiment.pipeline import prepare_out as _prepare_out
    _prepare_out(str(tmp_path / "a" / "b" / "c"))               # parents get created later
    (tmp_path / "f").write_text("x")
    for bad in (tmp_path / "f", tmp_path / "f" / "sub"):
        with pytest.raises(UsageError):
            _prepare_out(str(bad))


def test_run_help_names_every_shipped_scenario(capsys):
    from testbed.experiment.pipeline import shipped_names
    names = shipped_names()
    assert names[0] == "demo" and set(names) == {os.path.basename(p)[:-5] for p in SHIPPED}
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(n in text for n in names) and "production-gqa" in names
