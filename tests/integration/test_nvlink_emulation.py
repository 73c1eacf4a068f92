"""NVLink inside the servers on the emulation: a rail-matched transfer leaves by its
sibling's NIC, every pair answers on every pairing, and a dead rail leaf is survived
through the siblings' NICs, verified (root, OVS)."""
from types import SimpleNamespace

from testbed.emulation.transfers import run_transfers
from topologies import roft, zcube
from traffic.types import Transfer


def _send(emu, src, dst, size):
    work = SimpleNamespace(transfers=[Transfer(0, src, dst, size, 0.0)], bytes_total=size)
    before = emu.kernel_counters()
    row = run_transfers(emu, work, start_delay_s=0.2)[0]
    after = emu.kernel_counters()
    return row, lambda u, v: emu.hop_counter(after, u, v) - emu.hop_counter(before, u, v)


def test_rail_matching_hands_over_nvlink_and_survives_a_dead_rail_leaf(emulate):
    emu = emulate(roft(4, 4, nvlink_gbps=True), policy="pxn")
    rep = emu.verify(sample=0)
    assert rep["ok"], rep["problems"]
    assert rep["pairs_ok"] == rep["pairs_tested"] == 240      # 48 of them inside servers
    # 192 pairings, and 144 answers of hand-overs back from their destinations
    assert rep["paths_traced"] == rep["paths_ok"] == 192 + 144
    # rank 0 of server 0 to rank 1 of server 1: over NVLink to g1, out of g1's NIC
    row, packets = _send(emu, "g0", "g5", 2_000_000)
    assert row["verified"] and row["status"] == "ok"
    # counted in segments of up to 32 KB: 2 MB is some 60 of them
    assert packets("g1", "l1") > 30 and packets("g0", "l0") < 5
    out = emu.fail("l1")                       # rail 1's leaf: g1, g5, g9 and g13 cut off
    assert out["disconnected_pairs"] == 0 and out["hosts_reconfigured"] > 0
    rep = emu.verify(sample=0)
    assert rep["ok"], rep["problems"]
    assert rep["pairs_ok"] == rep["pairs_tested"] == 240
    row, packets = _send(emu, "g1", "g5", 2_000_000)    # both behind the dead leaf
    assert row["verified"] and row["status"] == "ok"
    assert packets("g0", "l0") > 30
    emu.restore()
    rep = emu.verify(sample=0)
    assert rep["ok"], rep["problems"]


def test_zcube_hands_over_where_a_sibling_plugs_into_the_destinations_switch(emulate):
    emu = emulate(zcube(4, 4, nvlink_gbps=True), policy="zcube-pxn")
    rep = emu.verify(sample=0)
    assert rep["ok"], rep["problems"]
    # g14's plane-2 path is direct while g5 answers its other pairings over NVLink: the
    # acknowledgements of the direct one still find their way back (real TCP)
    row, _ = _send(emu, "g14", "g5", 2_000_000)
    assert row["verified"] and row["status"] == "ok"
