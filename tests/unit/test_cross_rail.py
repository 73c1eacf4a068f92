"""The network-bound cross-rail scenario, the hosts' segment sizes and the datapath ceiling
(no root); large_segments' plumbing is tested beside buffer_ms' (test_buffer.py)."""
import pytest

from testbed.experiment.pipeline import load_scenario, shipped
from testbed.experiment.runner import run_scenario


def test_hosts_get_large_segments_only_when_asked_and_a_cap_otherwise(monkeypatch):
    """Every host sizes its segments past the emulated RTT (the sysctl); without
    large_segments every host port is capped at GSO_MAX_SIZE, with it nothing is."""
    from types import SimpleNamespace

    import testbed.emulation.network as network
    from controller.flows import compile_host_config
    from controller.routing import RouteTable
    from topologies import zcube
    fab = zcube(2, 2)
    scripts = {}
    monkeypatch.setattr(network.batched_build, "run_scripts", lambda s: scripts.update(s))
    monkeypatch.setenv("ZCUBE_TSO_RTT_LOG", "9")       # no longer read: the measured value
    monkeypatch.setenv("ZCUBE_GSO_MAX_SIZE", "16384")
    configs = compile_host_config(RouteTable(fab, "zcube"))
    net = SimpleNamespace(get=lambda name: SimpleNamespace(pid=int(name[1:]) + 100))
    for large in (False, True):
        scripts.clear()
        network.configure_hosts(net, fab, configs, True, large)
        assert sorted(scripts) == sorted(h.name for h in fab.hosts)
        text = "".join(script for _, script in scripts.values())
        sysctl = f"net.ipv4.tcp_tso_rtt_log={network.TSO_RTT_LOG}" in text
        capped = text.count(f"gso_max_size {network.GSO_MAX_SIZE}")
        assert sysctl, text
        assert capped == (0 if large else sum(len(h.ports) for h in fab.hosts)), text
        assert scripts["g1"][0] == 101
    g1 = fab.host("g1")
    for port, ip in configs["g1"].addresses:         # every address, route and neighbour
        assert f"addr add {ip}/32 dev {network.host_intf('g1', port)}" in scripts["g1"][1]
    assert scripts["g1"][1].count("route replace") == len(configs["g1"].routes)
    assert scripts["g1"][1].count("neigh replace") == len(configs["g1"].neighbours) > 0
    assert "ethtool" not in scripts["g1"][1] and len(g1.ports) == 2


def test_cross_rail_loads_links_and_collides_ecmp_on_the_model(tmp_path):
    """The shipped cross-rail scenario is in the regime it is for, on the flow-level model:
    links loaded to at least 0.5 in 0.5 s windows in every run and in most of its repetitions
    (ZCube's busiest link, its load split over two ports, reaches 0.43-0.47 in two of its ten
    draws), prefill under 60% of TTFT, both baselines beside ZCube (the spraying Clos on the
    first six seeds), and ECMP draws that differ between repetitions."""
    sc = load_scenario(shipped("cross-rail"))
    assert sc.large_segments and sc.placements == ["cross-rail"]
    assert {f.policy for f in sc.fabrics} == {"zcube", "ecmp", "spray:4"}
    summaries = run_scenario(sc, str(tmp_path), backend="model", log=lambda msg: None)
    assert len(summaries) == 3
    for s in summaries.values():
        peaks = sorted(r["link_util"]["max"] for r in s["per_rep"])
        assert s["link_util"]["max"] >= 0.5 and peaks[len(peaks) // 2] >= 0.5, peaks
        assert s["prefill_share_of_ttft"] < 0.6          # the transfer is a real share
    assert [s["repetitions"] for s in summaries.values()] == [10, 10, 6]
    roft = summaries["roft"]
    p99s = {r["fct_ms"]["p99"] for r in roft["per_rep"]}
    assert len(p99s) > 1


@pytest.mark.parametrize("name, policies, placement, mbps", [
    ("incast", {"zcube", "ecmp"}, "cross-rail", 30),       # 40 overran the datapath
    ("equal-cost", {"zcube", "ecmp"}, "cross-rail", 40),
    ("zcube-policies", {"zcube", "zcube-short"}, "aligned", 40),
])
def test_the_counter_cases_are_in_the_network_bound_regime_on_the_model(tmp_path, name,
                                                                        policies, placement,
                                                                        mbps):
    """incast, equal-cost and zcube-policies run at cross-rail's dilation and segment sizes
    (incast at a lower rate), and load links to at least 0.5 in every repetition with
    prefill under 60% of TTFT on every fabric."""
    sc, ref = load_scenario(shipped(name)), load_scenario(shipped("cross-rail"))
    assert (sc.link_mbps, sc.time_dilation, sc.large_segments) == (mbps, ref.time_dilation,
                                                                   True)
    assert {f.policy for f in sc.fabrics} == policies and sc.placements == [placement]
    summaries = run_scenario(sc, str(tmp_path), backend="model", log=lambda msg: None)
    for s in summaries.values():
        assert all(r["link_util"]["max"] >= 0.5 for r in s["per_rep"]), (s["run"], s["per_rep"])
        assert s["prefill_share_of_ttft"] < 0.6


def test_the_datapath_ceiling_is_what_one_core_forwards_at_the_calibrations_cost():
    """At low rates the calibration's aggregate is held back by its own flows, not by the
    datapath: the ceiling extrapolates what the busiest thread forwarded per CPU second to
    a whole core, and is the aggregate itself when the thread was saturated."""
    from types import SimpleNamespace

    from testbed.emulation.calibrate import datapath_ceiling

    def monitor(share, windows=25):
        return SimpleNamespace(busiest=[share] * windows, window_s=0.1)
    half = datapath_ceiling(500.0, 2.5, monitor(0.5))
    assert half == {"datapath_share": 0.5, "datapath_ceiling_switch_mbps": 1000.0}
    assert datapath_ceiling(500.0, 2.5, monitor(1.0))["datapath_ceiling_switch_mbps"] == 500.0
    assert datapath_ceiling(500.0, 2.5, monitor(0.01))["datapath_ceiling_switch_mbps"] is None
    assert datapath_ceiling(500.0, 2.5, monitor(0.5, 0)) == {
        "datapath_share": None, "datapath_ceiling_switch_mbps": None}
