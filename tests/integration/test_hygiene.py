"""Teardown and ``zcube clean`` remove what the testbed made, and nothing else."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from testbed.state import PREFIX, existing_links, runs
from topologies import zcube

ZCUBE = [sys.executable, "-m", "testbed.cli"]


def ours_left(ovs):
    bridges = [b for b in ovs.vsctl("list-br").split() if b.startswith(PREFIX)]
    links = [l for l in existing_links() if l.startswith(PREFIX)]
    return bridges, links, [r.id for r in runs()]


@pytest.fixture
def foreign(ovs):
    """A bridge and a process the testbed did not create: they must survive."""
    ovs.vsctl("--may-exist", "add-br", "userbr0", "--", "set", "bridge", "userbr0",
              "datapath_type=netdev")
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()
    ovs.vsctl("--if-exists", "del-br", "userbr0")


def test_teardown_leaves_nothing_of_ours_and_spares_the_rest(emulate, ovs, foreign):
    emu = emulate(zcube(3, 3))
    pids = [p["pid"] for p in emu.record.read("pids")]
    assert len(pids) >= 1 + 9 + 6 + 9          # controller, host shells, switch shells, agents
    assert len(ours_left(ovs)[0]) == 6
    emu.down()
    assert ours_left(ovs) == ([], [], [])
    assert not [p for p in pids if os.path.exists(f"/proc/{p}") and
                open(f"/proc/{p}/stat").read().split(") ")[1][0] not in "ZX"]
    assert "userbr0" in ovs.vsctl("list-br").split()
    assert foreign.poll() is None


def test_clean_after_sigkill_removes_leftovers_and_spares_the_rest(ovs, foreign):
    proc = subprocess.Popen(ZCUBE + ["up", "zcube", "--n", "3", "--cli"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and "up in" not in proc.stderr.readline():
            pass
        assert ours_left(ovs)[0], "the fabric never came up"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert ours_left(ovs) != ([], [], [])       # a SIGKILL leaves debris behind
    out = subprocess.run(ZCUBE + ["clean"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert ours_left(ovs) == ([], [], [])
    assert "userbr0" in ovs.vsctl("list-br").split()
    assert foreign.poll() is None


def test_zcube_up_json_prints_the_verification_contract(ovs):
    out = subprocess.run(ZCUBE + ["up", "zcube", "--n", "3", "--json"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    for key in ("switches", "switches_connected", "flows_expected", "flows_installed",
                "pairs_tested", "pairs_ok", "paths_traced", "paths_ok", "bringup_s"):
        assert key in report
    assert report["pairs_ok"] == report["pairs_tested"] == 72
    assert report["paths_ok"] == report["paths_traced"] == 144


def test_cli_mode_runs_mininet_commands(ovs):
    out = subprocess.run(ZCUBE + ["up", "zcube", "--n", "2", "--cli"], input="pingall\nexit\n",
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Results: 0% dropped (12/12 received)" in out.stdout + out.stderr
    assert ours_left(ovs) == ([], [], [])


def test_bad_input_starts_nothing(ovs):
    out = subprocess.run(ZCUBE + ["up", "zcube", "--n", "4", "--link-mbps", "-5"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == "zcube up: error: --link-mbps must be greater than 0, got -5"
    assert ours_left(ovs) == ([], [], [])


def test_kernel_datapath_is_refused_where_the_module_is_missing(ovs):
    from testbed.ovs import kernel_datapath_available
    if kernel_datapath_available():
        pytest.skip("this machine has the openvswitch kernel module")
    out = subprocess.run(ZCUBE + ["up", "zcube", "--n", "2", "--datapath", "kernel"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "openvswitch kernel module is not available" in out.stderr
    assert ours_left(ovs) == ([], [], [])
