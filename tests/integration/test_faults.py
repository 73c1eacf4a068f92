"""Failures in a running emulation: the controller reroutes, the switches then forward as
the table with failures says, and a restore brings the original back (root, OVS)."""
import pytest

from controller.flows import compile_switch_flows
from topologies import roft, zcube


@pytest.mark.parametrize("fabric, items, moved_hosts", [
    (zcube(4, 4), ["a0-b1"], True),       # a fabric cable: pairs take the other plane
    (zcube(4, 4), ["g5:0"], True),        # a NIC port: g5's pairs use its other port
    (zcube(4, 4), ["a1"], True),          # a whole switch
    (roft(4, 4), ["l0-s1"], False),       # a leaf-spine cable: dropped from select groups
])
def test_fail_reroutes_verifies_and_restore_returns_the_original(emulate, fabric, items,
                                                                 moved_hosts):
    emu = emulate(fabric)
    original = compile_switch_flows(emu.table)
    out = emu.fail(*items)
    assert out["reroute_s"] is not None and 0 <= out["reroute_s"] < 2
    assert 0 < out["since_injection_s"] < 5
    assert out["reroutes"] >= 1 and out["disconnected_pairs"] == 0
    assert (out["hosts_reconfigured"] > 0) == moved_hosts
    assert emu.table.failed and emu.switch_flows != original
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]          # flows read back = the table with failures,
    assert rep["pairs_ok"] == rep["pairs_tested"] == 240      # every pair still answers
    back = emu.restore()
    assert back["reroute_s"] is not None and not emu.failed
    assert emu.switch_flows == original
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]


def test_a_host_cut_off_is_reported_disconnected(emulate):
    emu = emulate(zcube(4, 4))
    out = emu.fail("g3:0", "g3:1")
    assert out["disconnected_pairs"] == 2 * 15          # g3 to and from every other GPU
    assert len(emu.table.disconnected()) == 30
