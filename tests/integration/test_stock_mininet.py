"""Stock Mininet's ``mn`` with the testbed's controller, as docs/reference.md shows it: the
custom file's fabric and its ``zcubehost`` host class, the controller started by hand, and a
clean ``pingall`` (root, OVS).

``mn`` runs under a small wrapper: on an error or Ctrl-C, stock ``mn`` calls Mininet's
cleanup, which ends processes and deletes bridges and links by name machine-wide; the
wrapper makes that stop only the network this ``mn`` built.  ``mn`` talks to the testbed's
own OVS (the ``ovs`` fixture's environment), and the test skips where a name the fabric uses
is already taken, since Mininet deletes a link or bridge of the name it is about to create.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from benchmarks.common import end_process
from testbed.emulation.machine_state import free_ports
from topologies import build

ROOT = Path(__file__).resolve().parents[2]
CUSTOM = ROOT / "topologies" / "mininet_topo.py"

# Runs mn itself, with Mininet's machine-wide cleanup replaced by stopping what it built.
WRAPPER = """\
import runpy, sys
import mininet.clean, mininet.net
built = []
_init = mininet.net.Mininet.__init__
def _record(self, *a, **k):
    built.append(self)
    _init(self, *a, **k)
def _stop_ours():
    for net in built:
        try:
            net.stop()
        except Exception as err:
            print("stopping the network failed:", err, file=sys.stderr)
mininet.net.Mininet.__init__ = _record
mininet.clean.cleanup = mininet.clean.Cleanup.cleanup = _stop_ours
mn, sys.argv = sys.argv[1], ["mn"] + sys.argv[2:]
runpy.run_path(mn, run_name="__main__")
"""

# mn's --pre script: wait until the controller has installed every switch's flows (mn's own
# wait reads OVS's database, which the testbed's OVS refreshes only once an hour).
WAIT_INSTALLED = """\
import json, sys, time, urllib.request
deadline = time.time() + 60
while time.time() < deadline:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
            switches = json.load(r)["switches"]
        if switches and all(s["installed"] for s in switches.values()):
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit("the controller did not install every switch within 60 s")
"""


def _names_taken(fabric, ovs) -> list[str]:
    """The fabric's bridge and switch-port names that already exist here."""
    links = set(os.listdir("/sys/class/net"))
    env = dict(os.environ, **ovs.env)
    # a bridge in OVS's database, or its port in the kernel (the userspace datapath's tap)
    taken = [s.name for s in fabric.switches
             if s.name in links or subprocess.run(
                 ["ovs-vsctl", "--timeout=5", "br-exists", s.name],
                 capture_output=True, env=env).returncode == 0]
    for link in fabric.links:
        for node, port in ((link.a, link.a_port), (link.b, link.b_port)):
            if not fabric.is_host(node) and f"{node}-eth{port}" in links:
                taken.append(f"{node}-eth{port}")
    return taken


def _wait_answering(url: str, ctl: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        assert ctl.poll() is None, "the controller exited"
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"the controller did not answer {url} within {seconds:g} s")


def _run_mn(args: list[str], timeout: float) -> tuple[int, str]:
    """mn under the wrapper; on a timeout it gets Ctrl-C, so it stops its own network."""
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, shutil.which("mn"), *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        pytest.fail(f"mn did not finish within {timeout:g} s:\n{out[-3000:]}")
    finally:
        if proc.poll() is None:               # the test itself timed out or was interrupted
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    return proc.returncode, out


@pytest.mark.parametrize("topo, kind, params, policy", [
    ("zcube,4", "zcube", {"n": 4}, "zcube"),
    ("roft,servers=4,gpus_per_server=4", "roft", {"servers": 4, "gpus_per_server": 4}, "ecmp"),
])
def test_stock_mn_with_zcubehost_pings_every_pair(ovs, tmp_path, topo, kind, params, policy):
    if shutil.which("mn") is None:
        pytest.skip("mn missing (make setup installs Mininet)")
    if not ovs.ours:
        pytest.skip("the system's Open vSwitch runs: mn's bridges would share it")
    fab = build(kind, **params)
    taken = _names_taken(fab, ovs)
    if taken:
        pytest.skip(f"names the fabric uses already exist: {', '.join(taken[:5])}")
    fabric = tmp_path / "fabric.json"
    fabric.write_text(json.dumps(fab.to_json_dict()))
    of_port, rest_port = free_ports(2)
    status = f"http://127.0.0.1:{rest_port}/zcube/status"
    (tmp_path / "wait_installed.py").write_text(WAIT_INSTALLED)
    (tmp_path / "pre.cli").write_text(
        f"sh {sys.executable} {tmp_path / 'wait_installed.py'} {status}\n")
    ctl = subprocess.Popen([sys.executable, "-W", "ignore", "-m", "controller.launch",
                            "--fabric", str(fabric), "--policy", policy,
                            "--of-port", str(of_port), "--rest-port", str(rest_port)],
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_answering(status, ctl)
        code, said = _run_mn(
            ["--custom", str(CUSTOM), "--topo", topo, "--host", f"zcubehost,policy={policy}",
             "--switch", "ovs,protocols=OpenFlow13,datapath=user",
             "--controller", f"remote,ip=127.0.0.1,port={of_port}",
             # mn's wait for connections reads OVS's database, which the testbed's OVS
             # refreshes once an hour: wait a second, then the --pre script's wait
             "--twait", "1", "--pre", str(tmp_path / "pre.cli"), "--test", "pingall"],
            timeout=200)
    finally:
        end_process(ctl, 10)
    assert code == 0, said[-3000:]
    assert "Caught exception" not in said, said[-3000:]
    assert "*** Results: 0% dropped" in said, said[-3000:]
    assert not _names_taken(fab, ovs), "mn left bridges or links behind"
