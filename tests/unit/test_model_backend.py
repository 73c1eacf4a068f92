"""The model as a backend: the protocol of testbed.core.backend, its records, and purity."""
import ast
import json
import pathlib
import subprocess
import sys

import pytest

from controller.routing import RouteTable
from testbed.core.backend import Backend, Session, SessionOptions, WorkloadResult
from testbed.core.records import LINK_FIELDS, ROW_FIELDS
from testbed.model.backend import ModelBackend
from testbed.model.simulate import simulate
from topologies import roft, zcube
from traffic.arrivals import poisson
from traffic.models import get_model
from traffic.placement import deploy
from traffic.types import Scale
from traffic.workload import build_workload

MBPS = 100.0
ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "testbed" / "model"
FORBIDDEN = ("testbed.emulation", "mininet", "pyroute2", "subprocess")


def kv_workload(fab, count=6, seed=2):
    f = fab.scale_for(MBPS)
    return build_workload(poisson(8, count=count, seed=seed, input_tokens=8192),
                          deploy(fab, 4, 4, placement="cross-rail"), get_model("llama3-70b"),
                          scale=Scale(f, f))


def session(fab, policy="zcube", **extra):
    return ModelBackend().session(fab, policy, SessionOptions(link_mbps=MBPS, extra=extra))


def test_model_backend_satisfies_the_protocol():
    be = ModelBackend()
    assert isinstance(be, Backend)
    assert be.name == "model"
    with session(zcube(4, 4)) as s:
        assert isinstance(s, Session)
        assert isinstance(s.table, RouteTable)
        assert s.calibrate() is None
        assert s.admit([kv_workload(s.table.fabric)], force=False) is None
        assert s.info == {}


def test_run_returns_the_rows_simulate_computes():
    fab = zcube(4, 4)
    work = kv_workload(fab)
    with session(fab) as s:
        got = s.run(work)
    assert isinstance(got, WorkloadResult)
    assert got.rows and all(tuple(r) == ROW_FIELDS for r in got.rows)
    assert got.links and all(tuple(r) == LINK_FIELDS for r in got.links)
    assert got.faults is None
    want = simulate(RouteTable(fab, "zcube"), work, MBPS)
    assert got.rows == want.rows
    assert got.links == want.links
    assert got.link_util == want.link_summary()
    assert set(got.link_util) == {"max", "mean", "jain"}


def test_extra_options_reach_simulate_and_are_recorded():
    fab = roft(4, 4)
    work = kv_workload(fab)
    extra = {"hop_bytes": 0, "latency_s": 0.002, "datapath_mbps": 150}
    with session(fab, "ecmp", **extra) as s:
        got = s.run(work)
        assert s.info == {"model_options": extra}
    want = simulate(RouteTable(fab, "ecmp"), work, MBPS, **extra)
    assert got.rows == want.rows and got.link_util == want.link_summary()


def test_faults_are_run_and_accounted_per_event():
    fab = zcube(4, 4)
    work = kv_workload(fab)
    with session(fab) as s:
        plain = s.run(work)
        faulted = s.run(work, faults=[{"at_s": 0.1, "element": "b3", "duration_s": 0.5}])
        again = s.run(work, faults=[])
    assert "faults_note" not in s.info and plain.faults is None
    assert again.rows == plain.rows
    assert [(f["action"], f["t_s"]) for f in faulted.faults] == [("down", 0.1), ("up", 0.6)]
    assert faulted.faults[0]["transfers_lost"] == 0
    assert all(r["verified"] for r in faulted.rows)


def test_links_are_left_out_beyond_the_row_limit():
    fab = zcube(4, 4)
    work = kv_workload(fab)
    with session(fab) as s:
        s.LINK_ROWS_MAX = 10
        got = s.run(work)
        assert got.links == []
        assert s.info["links_note"].startswith("links.csv left out: ")
    assert got.link_util == simulate(RouteTable(fab, "zcube"), work, MBPS).link_summary()


def test_unknown_extra_option_is_an_error():
    with session(zcube(4, 4), no_such_option=1) as s:
        with pytest.raises(TypeError):
            s.run(kv_workload(s.table.fabric))


# -- purity ---------------------------------------------------------------------------------------

def _imports(path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            yield node.module


def test_no_file_of_the_model_imports_the_emulation_or_processes():
    files = sorted(MODEL_DIR.glob("*.py"))
    assert {"backend.py", "simulate.py"} <= {f.name for f in files}
    bad = [(f.name, m) for f in files for m in _imports(f)
           if any(m == p or m.startswith(p + ".") for p in FORBIDDEN)]
    assert bad == []


def test_importing_the_model_loads_no_emulation():
    mods = sorted(f"testbed.model.{f.stem}" for f in MODEL_DIR.glob("*.py")
                  if f.stem != "__init__")
    code = ("import importlib, json, sys\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    loaded = json.loads(out)
    assert "testbed.model.backend" in loaded
    assert [m for m in loaded if m.split(".")[0] in ("mininet", "pyroute2")
            or m == "testbed.emulation" or m.startswith("testbed.emulation.")] == []
