"""A ToR failure and its outage: the busiest-switch rule, fabrics run without the faults as
controls, connectivity counted from pieces (as the route table finds it), the outage table
and ``zcube demo --tor-failure``."""
from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import pytest

from controller.failures import Failures, disconnected_count, reachable_share
from controller.routing import RouteTable
from testbed.experiment.fault_schedule import busiest_gpu_switch, resolve
from topologies import roft, zcube
from traffic.types import Transfer


@pytest.mark.parametrize("fab,policy,elems", [
    (roft(4, 4), "ecmp", ["l1"]), (roft(4, 4), "ecmp", ["s0", "g3:0"]),
    (roft(4, 4, nvlink_gbps=True), "pxn", ["l1"]), (zcube(4), "zcube", ["a0", "b1"]),
    (zcube(4), "zcube", ["a0", "g1:1"])])
def test_connectivity_from_pieces_agrees_with_the_route_table(fab, policy, elems):
    failed = Failures.parse(fab, elems)
    cut = RouteTable(fab, policy, failed).disconnected()
    assert disconnected_count(fab, failed) == len(cut)
    assert (reachable_share(fab, failed) == 1.0) == (not cut)


def test_a_dead_rail_leaf_cuts_off_its_gpus_unless_the_servers_have_nvlink():
    plain, nv = roft(4, 4), roft(4, 4, nvlink_gbps=True)
    assert reachable_share(plain, Failures.parse(plain, ["l1"])) == 12 / 16
    assert reachable_share(nv, Failures.parse(nv, ["l1"])) == 1.0


def test_the_busiest_gpu_switch_carries_the_most_bytes_and_ties_go_to_the_first():
    fab = roft(4, 4)
    work = SimpleNamespace(transfers=[Transfer(0, "g1", "g6", 100, 0.0),
                                      Transfer(1, "g5", "g13", 900, 0.0)])
    assert busiest_gpu_switch(fab, work) == "l1"              # g1, g5 and g13 are rank 1
    even = SimpleNamespace(transfers=[Transfer(0, "g0", "g5", 100, 0.0)])
    assert busiest_gpu_switch(fab, even) == "l0"              # l0 and l1 tie: l0 comes first
    z = zcube(4)
    assert busiest_gpu_switch(z, even) == "a0"
    fault = SimpleNamespace(at_s=1.0, element="busiest:gpu-switch", duration_s=2.0)
    assert resolve(fab, [fault], 1, work) == [{"at_s": 1.0, "element": "l1",
                                               "duration_s": 2.0}]


TINY = """\
name: tiny-tor
backend: model
link_mbps: 100
repetitions: 3
model: {preset: llama3-70b, prefill_tokens_per_s: 100000}
fabrics:
  - {name: z, builder: zcube, params: {n: 4, nvlink_gbps: true}, policy: zcube}
  - {name: z-ok, builder: zcube, params: {n: 4, nvlink_gbps: true}, policy: zcube,
     faults: false}
  - {name: r, builder: roft, params: {servers: 4, gpus_per_server: 4, nvlink_gbps: true},
     policy: pxn}
  - {name: r-ok, builder: roft, params: {servers: 4, gpus_per_server: 4, nvlink_gbps: true},
     policy: pxn, faults: false}
deployment: {prefill_tp: 4, decode_tp: 4, placements: [cross-rail]}
workload: {arrivals: poisson, rate: 4, count: 12, input_tokens: 16384}
faults:
  - {at_s: 0.5, element: "busiest:gpu-switch", duration_s: 1}
"""


def test_the_outage_is_read_against_the_twin_run_without_faults(tmp_path, capsys):
    from testbed.cli.main import main
    scen = tmp_path / "t.yaml"
    scen.write_text(TINY)
    out = tmp_path / "o"
    assert main(["run", str(scen), "-o", str(out), "--no-report"]) == 0
    text = capsys.readouterr().out
    assert "outage: each fabric's first fault" in text
    assert not json.loads((out / "z-ok" / "summary.json").read_text()).get("faults")
    rows = list(csv.DictReader(open(out / "outage.csv")))
    assert [r["fabric"] for r in rows] == ["z", "r"]
    assert [r["control"] for r in rows] == ["z-ok", "r-ok"]
    assert [r["elements"] for r in rows] == ["a0", "l0"]
    for r in rows:
        assert float(r["gpus_reachable"]) == 1.0 and r["lost"] == "0" and r["cut_off"] == "0"
        assert int(r["transfers"]) > 0
        assert float(r["fct_p99_ms"]) >= float(r["fct_p99_ms_control"])
    assert json.loads((out / "outage.json").read_text())[0]["fabric"] == "z"


def test_the_tor_failure_demo_tells_how_each_fabric_survives(tmp_path, capsys):
    from testbed.cli.main import main
    assert main(["demo", "--tor-failure", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) <= 20
    text = "\n".join(out)
    assert "a0 down; its 4 GPUs keep their other NIC port, every GPU reachable" in text
    assert "l0 down; its 4 GPUs use a sibling's NIC over NVLink, every GPU reachable" in text
    assert text.count(", 0 lost;") == 3 and "transfers lost: 0." in text
    assert (tmp_path / "tor-failure" / "outage.csv").is_file()
    page = (tmp_path / "tor-failure" / "report.html").read_text()
    assert "<h2>Outage</h2>" in page and "roft-pxn-unhurt" in page


def test_tor_failure_and_full_are_refused_together(capsys):
    from testbed.cli.main import main
    assert main(["demo", "--tor-failure", "--full"]) == 2
    assert "two different demos" in capsys.readouterr().err
