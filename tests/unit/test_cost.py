from fractions import Fraction

import pytest

from topologies import fattree, roft, zcube
from topologies.cost import cost, cost_table, ratios, switch_diameter


@pytest.mark.parametrize("n,gps", [(4, 4), (4, 2), (8, 8), (8, 4), (16, 8)])
def test_zcube_over_full_bisection_roft_switch_port_bandwidth_is_two_thirds(n, gps):
    z = cost(zcube(n, gps))
    r = cost(roft(servers=n * n // gps, gpus_per_server=gps))
    assert z["gpus"] == r["gpus"] and z["nic_gbps"] == r["nic_gbps"]
    assert Fraction(z["switch_port_gbps"]) / Fraction(r["switch_port_gbps"]) == Fraction(2, 3)
    assert ratios(z, r)["switch_port_gbps"] == pytest.approx(2 / 3)


def test_switch_port_bandwidth_per_gpu_bandwidth_is_2_3_5():
    assert cost(zcube(4, 4))["ports_per_gpu_bw"] == 2
    assert cost(roft(4, 4))["ports_per_gpu_bw"] == 3
    assert cost(fattree(4))["ports_per_gpu_bw"] == 5


def test_zcube_n4_counts_match_the_design_example():
    c = cost(zcube(4, 4))
    # ZCUBE.md section 4: 64 switch ports of speed B (B = 200 Gb/s) for 16 GPUs
    assert (c["switches"], c["switch_ports"], c["switch_port_gbps"]) == (8, 64, 64 * 200)
    assert (c["fabric_links"], c["host_links"]) == (16, 32)
    assert c["optics_switch_side"] == 64 and c["optics_both_ends"] == 96
    assert c["diameter"] == 2 and c["bisection_gbps"] == 16 * 400 / 2


def test_full_bisection_roft_n4_uses_96_ports_of_speed_b():
    c = cost(roft(4, 4))
    assert c["switch_port_gbps"] == 96 * 200
    assert c["diameter"] == 3


def test_optics_at_both_cable_ends_save_one_quarter():
    z, r = cost(zcube(4, 4)), cost(roft(4, 4))
    assert z["optics_both_ends_gbps"] / r["optics_both_ends_gbps"] == pytest.approx(3 / 4)


def test_roft_oversubscribed_to_zcube_budget_costs_the_same_switch_bandwidth():
    z, r = cost(zcube(4, 4)), cost(roft(4, 4, oversubscription=2))
    assert z["switch_port_gbps"] == r["switch_port_gbps"]
    assert r["bisection_gbps"] == z["bisection_gbps"] / 2


@pytest.mark.parametrize("fab", [zcube(3, 3), zcube(4, 2), roft(4, 4), roft(1, 4), fattree(4),
                                 roft(40, 2, radix=16)])
def test_closed_form_diameter_matches_search(fab):
    assert switch_diameter(fab) == fab.meta["diameter"]


def test_cost_table_has_ratio_column_for_two_fabrics():
    text = cost_table([cost(zcube(4, 4)), cost(roft(4, 4))])
    line = next(ln for ln in text.splitlines() if ln.startswith("switch-port Gb/s"))
    assert line.split()[-1] == "0.667"
