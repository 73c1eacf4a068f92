"""Controller restart: forwarding survives the controller's death, and a new instance
resynchronises every switch to exactly the computed state (root, OVS)."""
from testbed.emulation.transfers import run_transfers
from topologies import zcube
from traffic.arrivals import poisson
from traffic.models import get_model
from traffic.placement import deploy
from traffic.types import Scale
from traffic.workload import build_workload


def _work(fab):
    f = 100 / 400_000
    return build_workload(poisson(8, count=6, seed=3, input_tokens=4096),
                          deploy(fab, 4, 4, placement="cross-rail"), get_model("llama3-70b"),
                          scale=Scale(f, f))


def test_forwarding_survives_a_killed_controller_and_a_new_one_resyncs(emulate):
    emu = emulate(zcube(4, 4), shared=True)
    before = {sw: emu.installed_flows(sw) for sw in emu.switch_flows}
    emu.kill_controller()
    rows = run_transfers(emu, _work(emu.fabric))             # no controller: flows stay
    assert rows and all(r["verified"] for r in rows)
    assert {sw: emu.installed_flows(sw) for sw in emu.switch_flows} == before
    took = emu.start_controller()
    assert took < 30
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]      # flows read back equal the computed set exactly
    after = {sw: emu.installed_flows(sw) for sw in emu.switch_flows}
    assert after == before                 # no duplicates, nothing missing


def test_a_new_controller_learns_failures_from_the_switches(emulate):
    emu = emulate(zcube(4, 4), shared=True)
    emu.fail("a0-b1")
    failed_flows = {sw: emu.installed_flows(sw) for sw in emu.switch_flows}
    emu.kill_controller()
    emu.start_controller()
    status = emu.status()
    assert status["failures"]["links"], status["failures"]
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]      # still the table with a0-b1 dead
    assert {sw: emu.installed_flows(sw) for sw in emu.switch_flows} == failed_flows
    emu.restore()
    rep = emu.verify(sample=60)
    assert rep["ok"], rep["problems"]
