"""A scenario whose ``module:function`` policy sits beside it runs on the emulation from
another working folder, without PYTHONPATH: the controller's process is handed the module's
folder and installs its routes (root, OVS)."""
import json
import os
import uuid

from testbed.cli.main import main

POLICY = '''
def spine_per_server(fabric, src, dst):
    leaf_s, leaf_d = fabric.attachment(src, 0)[0], fabric.attachment(dst, 0)[0]
    if leaf_s == leaf_d:
        return [[src, leaf_s, dst]]
    spines = [s.name for s in fabric.groups()["spine"]]
    return [[src, leaf_s, spines[fabric.host(src).server % len(spines)], leaf_d, dst]]
'''

SCENARIO = """\
name: beside
link_mbps: 100
repetitions: 1
verify_sample: 40
calibration_s: 1
fabrics:
  - {{name: mine, builder: roft, params: {{servers: 4, gpus_per_server: 4}},
     policy: "{module}:spine_per_server"}}
deployment: {{placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: 4, count: 4, input_tokens: 4096}}
"""


def test_a_policy_module_beside_the_scenario_routes_the_emulation(ovs, tmp_path, monkeypatch):
    module = f"mypolicy_{uuid.uuid4().hex[:10]}"
    folder, elsewhere = tmp_path / "scen", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / f"{module}.py").write_text(POLICY)
    (folder / "my.yaml").write_text(SCENARIO.format(module=module))
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert main(["run", os.path.join("..", "scen", "my.yaml"), "--no-report", "-o", "out"]) == 0
    summary = json.loads((elsewhere / "out" / "mine" / "summary.json").read_text())
    assert summary["policy"] == f"{module}:spine_per_server"
    assert summary["transfers_verified"] == summary["transfers_total"] > 0
    # the bring-up read the module's flows back from every switch before any transfer, so
    # the controller, which exits on a policy it cannot import, installed them
    routes = (elsewhere / "out" / "mine" / "routes.txt").read_text()
    assert f"policy {module}:spine_per_server" in routes
