"""testbed.api's entry points that need no root: fabrics from every kind of source, routes
from a name or a function, the verifier's findings, exports, scenario flags, and a run's
results as plain objects."""
import pytest

from testbed import api
from testbed.experiment.scenario import ScenarioError
from topologies import FabricError, roft, save_fabric


def _one_switch(fabric, src, dst):
    leaf_s, leaf_d = fabric.attachment(src, 0)[0], fabric.attachment(dst, 0)[0]
    spine = fabric.groups()["spine"][0].name
    return [[src, leaf_s, dst]] if leaf_s == leaf_d else [[src, leaf_s, spine, leaf_d, dst]]


def test_a_fabric_from_a_name_a_builder_a_file_or_itself(tmp_path):
    by_name = api.fabric("roft", servers=4, gpus_per_server=4)
    assert api.fabric(roft, servers=4, gpus_per_server=4).label == by_name.label
    assert api.fabric(by_name) is by_name
    save_fabric(by_name, str(tmp_path / "fabric.json"))
    assert api.fabric(str(tmp_path / "fabric.json")).label == by_name.label
    with pytest.raises(FabricError, match="unknown fabric"):
        api.fabric("torus")
    with pytest.raises(TypeError):
        api.fabric(by_name, servers=2)


def test_routes_of_a_function_and_around_a_failure():
    fab = api.fabric("roft", servers=4, gpus_per_server=4)
    table = api.routes(fab, _one_switch)
    assert table.paths("g0", "g5") == [("g0", "l0", "s0", "l1", "g5")]
    assert api.check_routes(table).ok
    around = api.routes(fab, "ecmp", failed="s0")
    assert all("s0" not in p for p in around.paths("g0", "g5"))
    report = api.check_routes(fab, "ecmp", failed=["s0"], traffic=None)
    assert report.ok and report.failed and not report.loads


def test_a_broken_policy_is_reported_not_raised():
    fab = api.fabric("roft", servers=4, gpus_per_server=4)
    report = api.check_routes(fab, lambda f, s, d: [[s, "s0", d]], traffic=None)
    assert not report.ok and report.violations_total > 0


def test_a_policy_the_controller_must_import_needs_a_module():
    assert api.policy_name(_one_switch) == f"{__name__}:_one_switch"
    assert api.policy_name("ecmp") == "ecmp" and api.policy_name(None) is None
    with pytest.raises(FabricError, match="importable"):
        api.policy_name(lambda f, s, d: [])


def test_exports_and_a_bad_format():
    fab = api.fabric("zcube", n=4, gpus_per_server=4)
    assert api.export(fab, "clab", policy="zcube").lstrip().startswith("#")
    assert len(api.export(fab, "simai").splitlines()) > 2
    assert api.export(fab, "json").startswith("{") and api.export(fab, "dot").startswith("graph")
    with pytest.raises(FabricError, match="unknown format"):
        api.export(fab, "gml")


def test_run_applies_flags_and_returns_verdicts(tmp_path):
    res = api.run("cross-rail", backend="model", output=str(tmp_path), repetitions=3,
                  fabrics=["zcube", "roft"], log=lambda m: None)
    assert res.output == str(tmp_path) and res.backend == "model" and res.verified
    assert list(res.runs) == ["zcube", "roft"]
    assert all(r.repetitions == 3 for r in res.runs.values())
    assert {p.metric for p in res.paired} == {"FCT p50 ms", "FCT p99 ms", "TTFT p99 ms"}
    p = res.verdict("roft", "TTFT p99 ms")
    assert p.reference == "zcube" and p.n == 3 and p.lo <= p.ratio <= p.hi
    assert p.winner == {"other": "roft", "ref": "zcube"}.get(p.verdict)
    assert "paired over 3 repetitions" in res.text
    assert res.verdict("roft", "no such figure") is None


def test_a_bad_flag_or_scenario_fails_in_one_line(tmp_path):
    with pytest.raises(ScenarioError, match="repetitions"):
        api.run("cross-rail", backend="model", output=str(tmp_path), repetitions=0)
    with pytest.raises(ScenarioError):
        api.run({"name": "x", "fabrics": []}, backend="model", output=str(tmp_path))
    with pytest.raises(ScenarioError, match="no such scenario"):
        api.run(str(tmp_path / "missing.yaml"))
