"""A ``module:function`` policy is found without PYTHONPATH: beside the scenario file that
names it (from any working folder, on the model and ns-3), in the working folder for the
command line (as ``python -m`` would, also where sudo drops PYTHONPATH), and the emulation's
controller process is handed the folder the module came from (no root)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from controller.routing import RouteTable, make_policy
from controller.user_policy import load_function
from topologies import FabricError, roft

ROOT = Path(__file__).resolve().parents[2]
ZCUBE = Path(sys.executable).parent / "zcube"

SPINE_PER_SERVER = '''
def spine_per_server(fabric, src, dst):
    leaf_s, leaf_d = fabric.attachment(src, 0)[0], fabric.attachment(dst, 0)[0]
    if leaf_s == leaf_d:
        return [[src, leaf_s, dst]]
    spines = [s.name for s in fabric.groups()["spine"]]
    return [[src, leaf_s, spines[fabric.host(src).server % len(spines)], leaf_d, dst]]
'''

SCENARIO = """name: beside
backend: model
link_mbps: 40
repetitions: 1
fabrics:
  - {{name: roft-mine, builder: roft, params: {{servers: 4, gpus_per_server: 4}},
     policy: "{module}:spine_per_server"}}
deployment: {{prefill_tp: 4, decode_tp: 4, placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: 8, count: 3, input_tokens: 4096}}
"""


def _module_name() -> str:
    """A module name of its own for each test: a module once imported stays in sys.modules."""
    return f"mypolicy_{uuid.uuid4().hex[:10]}"


def _without_pythonpath() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _console_script():
    if not ZCUBE.exists():
        pytest.skip("zcube console script not installed (make setup installs it)")
    return str(ZCUBE)


def _scenario_folder(tmp_path: Path) -> tuple[Path, str]:
    """``tmp_path/scen/my.yaml`` with its policy module beside it; (the file, the module)."""
    module = _module_name()
    folder = tmp_path / "scen"
    folder.mkdir()
    (folder / f"{module}.py").write_text(SPINE_PER_SERVER)
    (folder / "my.yaml").write_text(SCENARIO.format(module=module))
    return folder / "my.yaml", module


def test_a_scenario_finds_its_policy_module_beside_it_from_another_folder(tmp_path):
    scenario, module = _scenario_folder(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    got = subprocess.run([_console_script(), "run", os.path.relpath(scenario, elsewhere),
                          "--backend", "model", "--no-report", "-o", "out"],
                         cwd=elsewhere, env=_without_pythonpath(), capture_output=True,
                         text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    summary = json.loads((elsewhere / "out" / "roft-mine" / "summary.json").read_text())
    assert summary["policy"] == f"{module}:spine_per_server"
    assert summary["transfers_verified"] == summary["transfers_total"] > 0


def test_ns3_plans_the_routes_of_the_policy_module_beside_the_scenario(tmp_path, monkeypatch):
    """ns-3's session plans its static routes from the module's paths (a whole ns-3 run
    costs ten seconds of importing ns-3 alone; the model's run above takes the same road)."""
    from testbed.core.backend import SessionOptions
    from testbed.experiment.scenario import load
    from testbed.ns3.backend import Ns3Backend
    scenario, module = _scenario_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    spec = load(str(scenario)).fabrics[0]
    fabric = spec.build()
    session = Ns3Backend().session(fabric, spec.route_policy(fabric), SessionOptions(40.0))
    assert session.table.policy_name == f"{module}:spine_per_server"
    assert session.table.paths("g0", "g5") == [("g0", "l0", "s0", "l1", "g5")]


def test_routes_finds_a_policy_module_in_the_working_folder_without_pythonpath(tmp_path):
    module = _module_name()
    (tmp_path / f"{module}.py").write_text(SPINE_PER_SERVER)
    got = subprocess.run([_console_script(), "routes", "roft", "--servers", "4", "--policy",
                          f"{module}:spine_per_server", "--check"], cwd=tmp_path,
                         env=_without_pythonpath(), capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert f"policy {module}:spine_per_server" in got.stdout
    assert got.stdout.rstrip().splitlines()[-1].startswith("OK: every pair routed")


def test_a_missing_policy_module_is_one_line_naming_where_it_looked(tmp_path):
    got = subprocess.run([_console_script(), "routes", "roft", "--policy", "nowhere_zq:fn"],
                         cwd=tmp_path, env=_without_pythonpath(), capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 2
    assert got.stderr.count("\n") == 1 and "Traceback" not in got.stderr, got.stderr
    assert f"no module 'nowhere_zq' in {tmp_path} or on the Python path" in got.stderr


def test_a_scenario_policy_module_missing_names_the_file_line_and_key(tmp_path):
    from testbed.experiment.scenario import ScenarioError, load
    (tmp_path / "my.yaml").write_text(SCENARIO.format(module="nowhere_zq"))
    with pytest.raises(ScenarioError) as err:
        load(str(tmp_path / "my.yaml"))
    said = str(err.value)
    assert said.startswith(f"{tmp_path / 'my.yaml'}:7: fabrics[0].policy: "), said
    assert f"no module 'nowhere_zq' in {tmp_path}" in said


def test_the_folder_near_comes_before_the_working_folder(tmp_path, monkeypatch):
    module = _module_name()
    near, cwd = tmp_path / "near", tmp_path / "cwd"
    for folder, said in ((near, "near"), (cwd, "cwd")):
        folder.mkdir()
        (folder / f"{module}.py").write_text(f"def fn(fabric, s, d):\n    return {said!r}\n")
    monkeypatch.chdir(cwd)
    fn = load_function(f"{module}:fn", near=[str(near)])
    assert fn(None, "g0", "g1") == "near"
    assert sys.path[-1] == str(near)       # first for the import alone, then last


def test_a_module_of_the_same_name_loaded_from_elsewhere_is_refused(tmp_path, monkeypatch):
    module = _module_name()
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{module}.py").write_text(SPINE_PER_SERVER)
    load_function(f"{module}:spine_per_server", near=[str(tmp_path / "one")])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FabricError, match=f"already loaded from {tmp_path / 'one'}"):
        load_function(f"{module}:spine_per_server", near=[str(tmp_path / "two")])


def test_an_error_inside_the_module_is_said_as_such(tmp_path):
    module = _module_name()
    (tmp_path / f"{module}.py").write_text("import no_such_dependency_zq\n")
    with pytest.raises(FabricError, match=f"importing '{module}' failed: No module named "
                                          "'no_such_dependency_zq'"):
        make_policy(f"{module}:fn", roft(2, 2), near=[str(tmp_path)])


def test_the_emulation_controller_is_handed_the_policy_modules_folder(tmp_path, monkeypatch):
    """The controller, a process of its own started in the repository, gets the folder the
    module was found in first on its PYTHONPATH, and the policy by name."""
    from testbed.emulation import controller_process as cp
    module = _module_name()
    (tmp_path / f"{module}.py").write_text(SPINE_PER_SERVER)
    table = RouteTable(roft(4, 4), make_policy(f"{module}:spine_per_server", roft(4, 4),
                                               near=[str(tmp_path)]))
    launched = {}

    class Popen:
        pid = 4242

        def __init__(self, cmd, **kwargs):
            launched.update(cmd=cmd, **kwargs)

    class Record:
        def path(self, name):
            return str(tmp_path / name)

        def add_pid(self, pid, what):
            launched["pid"] = (pid, what)

    class Emulation(cp.ControllerProcess):
        runtime, record = None, Record()

    emu = Emulation()
    emu.table = table
    monkeypatch.setattr(cp.subprocess, "Popen", Popen)
    emu._launch_controller(str(tmp_path / "fabric.json"), ports=(6653, 8080))
    assert launched["env"]["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)
    assert launched["cmd"][launched["cmd"].index("--policy") + 1] == \
        f"{module}:spine_per_server"
    assert launched["cwd"] == cp.REPO
    assert cp.controller_pythonpath(RouteTable(roft(2, 2), "ecmp").policy).split(
        os.pathsep)[0] == cp.REPO
