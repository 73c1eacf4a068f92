"""Bring-up and verification of real fabrics: the switches forward exactly as computed."""
import json
import subprocess
import time
import urllib.request

from topologies import fattree, roft, zcube


def assert_verified(report, switches, flows, pairs, traced):
    assert report["problems"] == []
    assert report["ok"] is True
    assert report["switches"] == report["switches_connected"] == switches
    assert report["flows_expected"] == report["flows_installed"] == flows
    assert report["pairs_tested"] == report["pairs_ok"] == pairs
    assert report["paths_traced"] == report["paths_ok"] == traced


def test_zcube_n4_forwards_exactly_as_computed(emulate):
    emu = emulate(zcube(4, 4), policy="zcube")
    report = emu.verify()
    # 8 switches x (16 hosts' B addresses or A addresses on the switch + its own 4 + drop)
    assert_verified(report, switches=8, flows=8 * 21, pairs=240, traced=480)
    # bring-up phase by phase, in the order they began, adding up to about the whole (the
    # controller starts before the network is built and is waited for after it)
    phases = report["bringup_phases_s"]
    assert list(phases) == ["ovs", "controller", "network", "switches", "hosts", "flows",
                            "agents", "datapath"]
    assert all(v >= 0 for v in phases.values())
    assert 0.9 * report["bringup_s"] <= sum(phases.values()) <= report["bringup_s"] + 0.01
    emu.down()
    assert set(emu.teardown.to_dict()) >= {"agents", "network", "controller", "clean"}


def test_roft_ecmp_uses_select_groups_and_verifies_under_os_ken(emulate):
    emu = emulate(roft(4, 4), policy="ecmp", runtime="os-ken")
    assert emu.status()["runtime"] == "os-ken"
    report = emu.verify()
    assert_verified(report, switches=8, flows=136, pairs=240, traced=240)
    groups = emu.installed_flows("l0")[1]
    assert groups == ["group_id=1,type=select,bucket=actions=output:5,bucket=actions=output:6,"
                      "bucket=actions=output:7,bucket=actions=output:8"]


def test_fattree_k4_verifies_under_ryu(emulate):
    emu = emulate(fattree(4), runtime="ryu")
    assert emu.status()["runtime"] == "ryu"
    report = emu.verify()
    assert_verified(report, switches=20, flows=340, pairs=240, traced=240)


def test_a_wrong_flow_fails_verification_naming_pair_and_hop(emulate):
    emu = emulate(zcube(4, 4), policy="zcube")
    # a0 should send traffic for g5's B address (10.1.1.5) to b1 (port 6); send it to b2
    emu.ovs.ofctl("mod-flows", "zca0", "ip,nw_dst=10.1.1.5,actions=output:7")
    report = emu.verify()
    assert report["ok"] is False
    problems = "\n".join(report["problems"])
    assert "a0: flow not computed: priority=100,ip,nw_dst=10.1.1.5 actions=output:7" in problems
    assert ("g0 -> g5 (port 0->1): computed g0-a0-b1-g5, but packets went g0-a0-b2; "
            "first wrong hop a0->b2") in problems
    assert report["pairs_ok"] == 240 - 4      # g0..g3 reach g5's B address only through a0


def _route_dev(emu, host, ip):
    out = emu.net.get(host).cmd(f"ip -o route get {ip}")
    return out.split(" dev ")[1].split()[0]


def test_hosts_pick_the_nic_port_the_policy_gives(emulate):
    fab = zcube(4, 4)
    g1, g5 = fab.host("g1"), fab.host("g5")
    emu = emulate(fab, policy="zcube-short")
    # g0 and g1 share a0: the shortcut leaves by the A port towards g1's A address
    assert _route_dev(emu, "g0", g1.ports[0].ip) == "g0-eth0"
    # g0 and g5 share nothing: P2 leaves by the B port towards g5's A address ...
    assert _route_dev(emu, "g0", g5.ports[0].ip) == "g0-eth1"
    # ... and P1 by the A port towards g5's B address
    assert _route_dev(emu, "g0", g5.ports[1].ip) == "g0-eth0"
    report = emu.verify()
    assert report["ok"], report["problems"]
    assert report["paths_traced"] == 96 + 2 * 144


def test_shaping_caps_a_tcp_flow_near_the_emulated_rate(emulate):
    emu = emulate(roft(2, 2), link_mbps=40)
    rates = []
    for _ in range(3):      # a busy machine slows a flow now and then; it never lifts the cap
        rates.append(_iperf_mbps(emu, "g0", "g3"))
        assert rates[-1] <= 1.05 * 40, rates
        if rates[-1] >= 0.8 * 40:
            break
    assert max(rates) >= 0.8 * 40, rates
    # links.csv reads the switch ports' bytes from /proc/net/dev: the datapath's own counters
    time.sleep(0.3)
    datapath, kernel = emu.port_counters("bytes"), emu.kernel_counters("bytes")
    assert set(kernel) == set(emu._port_names) and set(kernel) <= set(datapath)
    assert {p: datapath[p] for p in kernel} == kernel
    assert max(rx for rx, _ in kernel.values()) > 3 * 40e6 / 8 * 0.8      # one 3 s flow at least


def _iperf_mbps(emu, dst: str, src: str) -> float:
    """One 3 s iperf3 flow from ``src`` to ``dst``'s first port: Mb/s received."""
    server, client = emu.net.get(dst), emu.net.get(src)
    # a foreground one-shot server whose PID we hold (a -D daemon would outlive a failure)
    proc = server.popen(["iperf3", "-s", "-1", "-p", "5301"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    try:
        for _ in range(10):            # the server may not listen yet: retry the connection
            out = client.cmd(f"iperf3 -c {emu.fabric.host(dst).ports[0].ip} -p 5301 -t 3 -J")
            result = json.loads(out)
            if "error" not in result:
                break
            time.sleep(0.3)
        return result["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _listeners(pid):
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
    return [line.split()[3] for line in out.splitlines() if f"pid={pid}," in line]


def test_controller_listens_on_loopback_only(emulate):
    emu = emulate(zcube(2, 2))
    addrs = _listeners(emu.controller.pid)
    assert sorted(addrs) == sorted([f"127.0.0.1:{emu.of_port}", f"127.0.0.1:{emu.rest_port}"])
    with urllib.request.urlopen(f"http://127.0.0.1:{emu.rest_port}/zcube/ports/a0",
                                timeout=10) as r:
        ports = json.load(r)
    assert {p["port"] for p in ports} >= {1, 2, 3, 4}
