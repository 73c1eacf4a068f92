"""Mininet's interface commands staged as the ip and tc lines Mininet would run, and run in
one script per namespace (testbed/emulation/batched_build.py); the real build is tested on OVS in
tests/integration (every pair reachable, shaping read back)."""
from types import SimpleNamespace

import pytest

from testbed.emulation import batched_build

pytest.importorskip("mininet.link", reason="Debian's mininet package (make setup installs it)")


def node(name, pid=None):
    return SimpleNamespace(name=name, pid=pid, inNamespace=pid is not None)


def test_a_shaped_port_is_staged_as_mininet_would_configure_it():
    from testbed.emulation.network import _intf_class
    host, switch = node("g0", 41), node("zca0")
    with batched_build.staged() as staging:
        staging.veth("g0-eth0", "zca0-eth1", "02:00:00:00:00:00", None, host, switch)
        cls = _intf_class(buffer_ms=2.0)
        intf = cls.__new__(cls)
        intf.name, intf.node = "zca0-eth1", switch
        intf.config(bw=50.0)
        intf.name, intf.node = "g0-eth0", host
        intf.config(bw=50.0, ip="10.0.1.0/16")
        with pytest.raises(ValueError, match="cannot batch"):
            intf.config(bw=50.0, delay="1ms")          # no netem here: refused, not dropped
    assert staging.veths == ["link add name g0-eth0 address 02:00:00:00:00:00 netns 41 "
                             "type veth peer name zca0-eth1"]
    root, g0 = staging.nodes[""], staging.nodes["g0"]
    assert root.pid is None and g0.pid == 41
    assert root.ip == ["link set dev zca0-eth1 up"]
    assert root.tc == ["qdisc replace dev zca0-eth1 root handle 5:0 htb default 1 r2q 63",
                       "class add dev zca0-eth1 parent 5:0 classid 5:1 htb rate 50.000000Mbit "
                       "burst 15k",
                       "qdisc add dev zca0-eth1 parent 5:1 handle 10: bfifo limit 134100"]
    assert g0.ip == ["addr replace 10.0.1.0/16 dev g0-eth0", "link set dev g0-eth0 up"]
    assert (intf.ip, intf.prefixLen) == ("10.0.1.0", "16")
    assert root.sh == g0.sh == []                      # a veth's offloads are Mininet's
    assert batched_build.current() is None


def test_offloads_other_than_a_veths_are_set_with_ethtool():
    with batched_build.staged() as staging:
        batched_build.stage_intf(SimpleNamespace(name="x-eth0", node=node("x", 7)), gro=True)
    assert staging.nodes["x"].sh == ["ethtool -K x-eth0 gro on tx on rx on"]


def test_a_script_runs_its_batches_then_its_shell_lines_and_stops_at_a_failure():
    b = batched_build.NodeBatch(None, ip=["link show dev lo"], tc=["qdisc show dev lo"],
                        sh=["echo done"])
    lines = b.script().splitlines()
    assert lines[0] == "set -e" and lines[-1] == "echo done"
    assert lines[1:4] == ["ip -batch - <<'ZCUBE_EOF'", "link show dev lo", "ZCUBE_EOF"]
    assert lines[4:7] == ["tc -batch - <<'ZCUBE_EOF'", "qdisc show dev lo", "ZCUBE_EOF"]


def test_any_output_or_failure_is_an_error_naming_the_namespace_unless_ignored():
    batched_build.run_scripts({"a": (None, "true\n"), "b": (None, "set -e\ntrue\n")})
    with pytest.raises(batched_build.BatchError, match=r"^b: oops \(and 1 more\)$"):
        batched_build.run_scripts({"a": (None, "true\n"), "b": (None, "echo oops\n"),
                           "c": (None, "exit 3\n")})
    with pytest.raises(batched_build.BatchError, match="^c: exit 3$"):
        batched_build.run_scripts({"c": (None, "exit 3\n")})
    batched_build.run_scripts({"d": (None, "echo 'Cannot find device'; exit 1\n")},
                      ignore=("Cannot find",))


def test_the_host_agent_starts_without_site_packages():
    """Agents start with ``python -S`` (testbed/emulation/agents.py): the agent and what it
    imports need nothing outside the standard library and the repository."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-S", "-u", "-m", "traffic.agent"], cwd=root,
                         input='{"op": "quit"}\n', capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, PYTHONPATH=root))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0]).get("ready")
