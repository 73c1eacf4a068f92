"""Teardown and ``zcube clean`` remove what the testbed made, and nothing else."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from testbed.emulation.machine_state import PREFIX, existing_links, runs
from topologies import zcube

ZCUBE = [sys.executable, "-m", "testbed.cli"]


def ours_left(ovs):
    bridges = [b for b in ovs.vsctl("list-br").split() if b.startswith(PREFIX)]
    links = [name for name in existing_links() if name.startswith(PREFIX)]
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


# (log line to wait for, extra arguments): killed mid bring-up, with the fabric up, in the
# middle of a KV run, and in the middle of teardown
KILL_POINTS = {
    "bring-up": ("building", ["--cli"]),
    "up": ("up in", ["--cli"]),
    "run": ("KV transfers of", ["--n", "4", "--kv", "--arrivals", "poisson", "--rate", "2",
                         "--count", "40", "--force", "--calibration-s", "1", "-o", "{tmp}"]),
    "teardown": ("tearing down", ["--trace-sample", "10"]),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_clean_after_sigkill_removes_leftovers_and_spares_the_rest(ovs, foreign, point, tmp_path):
    line, extra = KILL_POINTS[point]
    extra = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    proc = subprocess.Popen(ZCUBE + ["up", "zcube", "--n", "3"] + extra,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            text = proc.stderr.readline()
            seen.append(text)
            if line in text or not text:
                break
        assert line in seen[-1], f"never saw {line!r}: {''.join(seen)[-600:]}"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    pids = [p["pid"] for r in runs() for p in r.read("pids")]
    assert runs() and pids                       # a SIGKILL leaves a record of what it started
    out = subprocess.run(ZCUBE + ["clean"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert ours_left(ovs) == ([], [], [])
    assert not [p for p in pids if os.path.exists(f"/proc/{p}") and
                open(f"/proc/{p}/stat").read().split(") ")[1][0] not in "ZX"]
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


def test_cli_mode_fails_and_restores_elements(ovs):
    out = subprocess.run(ZCUBE + ["up", "zcube", "--n", "2", "--cli"],
                         input="fail a0-b1\nfailures\npingall\nfail b7\nrestore\npingall\n"
                               "help pingall\nexit\n",
                         capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 0, out.stderr
    assert "down now: {'switches': [], 'host_ports': [], 'links': ['a0:" in text
    assert "*** b7: no node named 'b7'" in text or "no node named 'b7'" in text
    # pingall pings each GPU's first address; with a0-b1 dead the pairs that used it keep
    # only the other plane (ZCUBE.md section 3), so pings to the dead plane's address fail
    # by design; after the restore every pair answers again
    first, second = text.split("*** Results:")[1:3]
    assert "0% dropped" not in first.split("\n")[0]
    assert second.startswith(" 0% dropped (12/12 received)")
    assert "TIMEOUT seconds for each reply (1 s unless given" in text
    assert ours_left(ovs) == ([], [], [])


def test_bad_input_starts_nothing(ovs):
    out = subprocess.run(ZCUBE + ["up", "zcube", "--n", "4", "--link-mbps", "-5"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == "zcube up: error: --link-mbps must be from 1 to 1,600,000, got -5"
    assert ours_left(ovs) == ([], [], [])


def test_kernel_datapath_is_refused_where_the_module_is_missing(ovs):
    from testbed.emulation.ovs import kernel_datapath_available
    if kernel_datapath_available():
        pytest.skip("this machine has the openvswitch kernel module")
    out = subprocess.run(ZCUBE + ["up", "zcube", "--n", "2", "--datapath", "kernel"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "openvswitch kernel module is not available" in out.stderr
    assert ours_left(ovs) == ([], [], [])


def test_own_vswitchd_runs_on_jemalloc_where_installed(ovs):
    """The ovs-vswitchd the testbed started maps the jemalloc make setup installs (its
    forwarding thread's malloc and free were a fifth of its busiest windows under glibc)."""
    from testbed.emulation.ovs import vswitchd_env
    if not ovs.ours:
        pytest.skip("an OVS the testbed did not start is serving")
    if not vswitchd_env():
        pytest.skip("no libjemalloc.so.2 here (make setup installs libjemalloc2)")
    assert ovs.allocator == "jemalloc"
    assert ovs.allocator_note().startswith(", allocator jemalloc")


def test_own_vswitchd_writes_interface_counters_hourly(ovs):
    """The testbed's own OVS writes its interface counters to the database once an hour, not
    every 5 s on the forwarding thread (docs/fidelity.md, "What the stalls are"), and says
    so."""
    from testbed.emulation.ovs import STATS_MS
    if not ovs.ours:
        pytest.skip("an OVS the testbed did not start is serving")
    assert ovs.stats_interval == STATS_MS
    assert f", interface stats every {ovs.stats_interval // 1000} s" in ovs.allocator_note()
