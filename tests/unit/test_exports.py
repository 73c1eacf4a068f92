"""Exports other tools read: containerlab topologies, SimAI topology files, htsim matrices."""
import json
import os
from collections import Counter
from dataclasses import replace

import jsonschema
import pytest
import yaml

from controller.flows import compile_host_config
from controller.routing import RouteTable
from testbed.cli.main import main
from topologies import Fabric, FabricError, build
from topologies.clab import (
    IFNAMSIZ,
    ExportError,
    clab_topology,
    host_ifname,
    switch_ifname,
    to_clab_yaml,
)
from topologies.simai import simai_lines, to_simai
from traffic.htsim import htsim_lines, write_htsim
from traffic.models import ModelSpec
from traffic.placement import Deployment, Instance
from traffic.types import Request
from traffic.workload import build_workload

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "topologies", "schemas", "clab.schema.json")

FABRICS = {
    "zcube n=4": ("zcube", {"n": 4}),
    "roft 4x4": ("roft", {"servers": 4, "gpus_per_server": 4}),
    "fattree k=4": ("fattree", {"k": 4}),
}


@pytest.fixture(scope="module")
def validator():
    with open(SCHEMA) as f:
        return jsonschema.Draft7Validator(json.load(f))


def fabric(label):
    kind, params = FABRICS[label]
    return build(kind, **params)


# -- containerlab ----------------------------------------------------------------------------

def test_the_schema_and_its_license_ship_inside_the_package():
    here = os.path.join(ROOT, "topologies", "schemas")
    assert os.path.isfile(os.path.join(here, "clab.schema.json"))
    with open(os.path.join(here, "LICENSE.containerlab")) as f:
        assert "Nokia" in f.read()
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'topologies = ["schemas/*"]' in f.read()


@pytest.mark.parametrize("label", FABRICS)
@pytest.mark.parametrize("routed", [False, True])
def test_clab_file_validates_against_containerlab_schema(label, routed, validator):
    fab = fabric(label)
    configs = compile_host_config(RouteTable(fab)) if routed else None
    doc = yaml.safe_load(to_clab_yaml(fab, host_configs=configs))
    errors = sorted(validator.iter_errors(doc), key=str)
    assert not errors, errors[0].message
    assert doc["name"] == label.replace(" ", "-").replace("=", "")


def test_the_schema_check_has_teeth(validator):
    doc = clab_topology(fabric("zcube n=4"))
    doc["topology"]["nodes"]["zca0"]["kind"] = "openvswitch"
    assert not validator.is_valid(doc)
    doc = clab_topology(fabric("zcube n=4"))
    doc["topology"]["vars"] = {"controller": "tcp:127.0.0.1:6653"}   # no such key
    assert not validator.is_valid(doc)


@pytest.mark.parametrize("label", FABRICS)
def test_every_fabric_link_appears_once_with_its_node_and_interface(label):
    fab = fabric(label)
    doc = clab_topology(fab)

    def end(node, port):
        if fab.is_host(node):
            return f"{node}:{node}-eth{port}"
        return f"zc{node}:zc{node}-eth{port}"

    want = Counter(frozenset((end(link.a, link.a_port), end(link.b, link.b_port)))
                   for link in fab.links)
    got = Counter(frozenset(link["endpoints"]) for link in doc["topology"]["links"])
    assert len(doc["topology"]["links"]) == len(fab.links)
    assert got == want and set(want.values()) == {1}
    nodes = doc["topology"]["nodes"]
    for link in doc["topology"]["links"]:
        for ep in link["endpoints"]:
            assert ep.split(":")[0] in nodes


@pytest.mark.parametrize("label", FABRICS)
def test_interface_names_are_unique_per_node_and_fit_linux(label):
    fab = fabric(label)
    per_node = {}
    for link in clab_topology(fab)["topology"]["links"]:
        for ep in link["endpoints"]:
            node, iface = ep.split(":")
            per_node.setdefault(node, []).append(iface)
    for node, ifaces in per_node.items():
        assert len(ifaces) == len(set(ifaces)), node
        assert all(0 < len(i) <= IFNAMSIZ for i in ifaces), ifaces
    # switch-side names live in the host namespace: unique across the whole file too
    switch_side = [i for n, ifs in per_node.items() if not fab.is_host(n) for i in ifs]
    assert len(switch_side) == len(set(switch_side))
    assert sorted(per_node["g5"]) == [host_ifname("g5", p.index) for p in fab.host("g5").ports]


def test_nodes_are_the_fabric_hosts_and_bridges_with_the_controller():
    fab = fabric("zcube n=4")
    nodes = clab_topology(fab, controller="tcp:10.9.0.1:6633")["topology"]["nodes"]
    hosts = {n for n, v in nodes.items() if v["kind"] == "linux"}
    bridges = {n for n, v in nodes.items() if v["kind"] == "ovs-bridge"}
    assert hosts == {h.name for h in fab.hosts}
    assert bridges == {"zc" + s.name for s in fab.switches}
    assert all(nodes[b]["labels"]["zcube.controller"] == "tcp:10.9.0.1:6633" for b in bridges)
    setup = nodes["ovs-setup"]
    assert setup["kind"] == "host" and len(setup["exec"]) == len(fab.switches)
    a0 = next(c for c in setup["exec"] if " zca0 " in c)
    assert a0.endswith("set-controller zca0 tcp:10.9.0.1:6633")
    assert "other-config:datapath-id=0a00000000000000" in a0 and "protocols=OpenFlow13" in a0
    # every switch port gets the Fabric's OpenFlow number
    for port, _, _, _ in fab.neighbors("a0"):
        assert f"set interface {switch_ifname('a0', port)} ofport_request={port}" in a0


def test_gpu_containers_get_the_fabric_addresses_and_the_route_table():
    fab = fabric("zcube n=4")
    cfg = compile_host_config(RouteTable(fab, "zcube"))
    g5 = clab_topology(fab, host_configs=cfg)["topology"]["nodes"]["g5"]
    cmds = g5["exec"]
    for p in fab.host("g5").ports:
        assert f"ip link set dev g5-eth{p.index} address {p.mac}" in cmds
        assert f"ip addr add {p.ip}/32 dev g5-eth{p.index}" in cmds
    assert sum(c.startswith("ip route replace") for c in cmds) == len(cfg["g5"].routes)
    assert sum(c.startswith("ip neigh replace") for c in cmds) == len(cfg["g5"].neighbours)
    assert g5["sysctls"]["net.ipv6.conf.all.disable_ipv6"] == "1"
    plain = clab_topology(fab)["topology"]["nodes"]["g5"]["exec"]
    assert "ip addr add 10.0.1.5/16 dev g5-eth0" in plain
    assert not any(c.startswith(("ip route", "ip neigh")) for c in plain)


def test_clab_header_says_how_to_create_and_remove_the_bridges():
    text = to_clab_yaml(fabric("roft 4x4"))
    head = [line for line in text.splitlines() if line.startswith("#")]
    assert any("ovs-vsctl --may-exist add-br zcl0" in line and "fail_mode=secure" in line
               for line in head)
    assert any("ovs-vsctl --if-exists del-br zcs0" in line for line in head)
    assert any("containerlab deploy -t" in line for line in head)


@pytest.mark.parametrize("controller", ["", "127.0.0.1:6653", "tcp:127.0.0.1", "udp:1.2.3.4:6653",
                                        "tcp:300.0.0.1:6653", "tcp:127.0.0.1:70000"])
def test_bad_controller_is_refused(controller):
    with pytest.raises(ExportError, match="controller"):
        clab_topology(fabric("zcube n=4"), controller=controller)


def test_names_too_long_for_linux_are_refused():
    with pytest.raises(ExportError, match="longer than 15"):
        clab_topology(fabric("fattree k=4"), bridge_prefix="fabric1x")
    with pytest.raises(ExportError, match="image"):
        clab_topology(fabric("zcube n=4"), image="two words")


# -- SimAI -----------------------------------------------------------------------------------

def test_simai_file_of_a_small_zcube_line_by_line():
    fab = build("zcube", n=2)                      # 4 GPUs, 2 servers of 2, a0 a1 b0 b1
    lines = to_simai(fab, nvlink_gbps=3600).splitlines()
    # 4 GPUs + 2 NVSwitches + 4 switches; 4 NVLinks + 8 NIC port links + 4 A-B cables
    assert lines[0] == "10 2 2 4 16 H100"
    assert lines[1] == "4 5 6 7 8 9"               # NVSwitches 4 5, then a0 a1 b0 b1
    assert lines[2:] == [
        "0 4 3600Gbps 0.000025ms 0", "0 6 200Gbps 0.0005ms 0", "0 8 200Gbps 0.0005ms 0",
        "1 4 3600Gbps 0.000025ms 0", "1 6 200Gbps 0.0005ms 0", "1 9 200Gbps 0.0005ms 0",
        "2 5 3600Gbps 0.000025ms 0", "2 7 200Gbps 0.0005ms 0", "2 8 200Gbps 0.0005ms 0",
        "3 5 3600Gbps 0.000025ms 0", "3 7 200Gbps 0.0005ms 0", "3 9 200Gbps 0.0005ms 0",
        "6 8 200Gbps 0.0005ms 0", "6 9 200Gbps 0.0005ms 0",
        "7 8 200Gbps 0.0005ms 0", "7 9 200Gbps 0.0005ms 0"]


@pytest.mark.parametrize("label", FABRICS)
def test_simai_header_and_links_agree_with_the_fabric(label):
    fab = fabric(label)
    lines = simai_lines(fab, gpu_type="H800", latency_ms=0.001)
    nodes, gps, nv, other, nlinks, gpu = lines[0].split()
    n = len(fab.hosts)
    servers = len(fab.servers())
    assert (int(gps), int(nv), int(other), gpu) == (
        n // servers, servers, len(fab.switches), "H800")
    assert int(nodes) == n + servers + len(fab.switches)
    assert lines[1].split() == [str(i) for i in range(n, int(nodes))]
    body = [line.split() for line in lines[2:]]
    assert int(nlinks) == len(body) == len(fab.links) + n     # one NVLink per GPU
    nic = Counter()
    for src, dst, r, lat, err in body:
        assert 0 <= int(src) < int(dst) < int(nodes) and err == "0"
        if n <= int(dst) < n + servers:                         # NVLink to its server's NVSwitch
            assert (r, lat) == ("2880Gbps", "0.000025ms")
            assert int(dst) - n == fab.host(f"g{src}").server
        else:
            assert lat == "0.001ms" and r == f"{fab.links[0].gbps:g}Gbps"
            if int(src) < n:
                nic[int(src)] += 1
    assert all(nic[h.index] == len(h.ports) for h in fab.hosts)


def test_simai_merges_parallel_cables_and_refuses_what_it_cannot_say():
    lines = simai_lines(build("zcube", n=2, parallel=2))
    assert lines[0].split()[4] == str(len(lines) - 2) == "16"
    assert lines[-4:] == ["6 8 400Gbps 0.0005ms 0", "6 9 400Gbps 0.0005ms 0",
                          "7 8 400Gbps 0.0005ms 0", "7 9 400Gbps 0.0005ms 0"]
    fab = fabric("roft 4x4")
    uneven = Fabric(fab.kind, fab.params, [replace(h, server=0) if h.index == 4 else h
                                           for h in fab.hosts], fab.switches, fab.links)
    with pytest.raises(FabricError, match="same number"):
        simai_lines(uneven)
    with pytest.raises(FabricError, match="GPU type"):
        simai_lines(fab, gpu_type="H 100")
    with pytest.raises(FabricError, match="NVLink rate"):
        simai_lines(fab, nvlink_gbps=0)
    # plain decimals, never 1.25e-05: g0's NIC link to leaf l0 (node 16 GPUs + 4 NVSwitches)
    assert simai_lines(fab, latency_ms=0.0000125)[3] == "0 20 400Gbps 0.0000125ms 0"


# -- htsim -----------------------------------------------------------------------------------

def small_workload(chunks=2):
    model = ModelSpec(name="tiny", layers=2, attention="gqa", kv_heads=4, head_dim=8,
                      kv_lora_rank=0, rope_dim=0, dtype_bytes=2, prefill_tokens_per_s=1000.0,
                      decode_step_ms=20.0)
    dep = Deployment([Instance("prefill", 0, ("g0", "g1"), 2),
                      Instance("prefill", 1, ("g4", "g5"), 2)],
                     [Instance("decode", 0, ("g10", "g11"), 2)], "packed")
    reqs = [Request(0, 0.0, 1000, 1), Request(1, 0.0, 300, 1), Request(2, 0.0001234, 501, 1)]
    return build_workload(reqs, dep, model, chunks=chunks)


def test_htsim_matrix_of_a_small_workload():
    fab = fabric("zcube n=4")
    w = small_workload()
    lines = htsim_lines(w, fab, "us")
    assert lines[:2] == ["Nodes 16", f"Connections {len(w.transfers)}"]
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == len(w.transfers) == 12            # 3 requests x 2 chunks x 2 ranks
    starts = [int(r[2]) for r in rows]
    assert starts == sorted(starts)
    assert all(r[1] == "start" and r[3] == "size" for r in rows)
    assert sum(int(r[4]) for r in rows) == w.bytes_total
    # request 1 (300 tokens on prefill 1: g4,g5 -> g10,g11) has its first chunk ready first
    first = {f"{t.src}->{t.dst}" for t in w.transfers if t.request == 1 and t.chunk == 0}
    assert {r[0] for r in rows[:2]} == {x.replace("g", "") for x in first}
    assert starts[:2] == [150000, 150000]                 # 0.15 s = 150000 us
    got = Counter((r[0], int(r[2]), int(r[4])) for r in rows)
    want = Counter((f"{t.src[1:]}->{t.dst[1:]}", round(t.ready_s * 1e6), t.bytes)
                   for t in w.transfers)
    assert got == want
    # the default, picoseconds: the same lines with starts a million times larger
    assert [line.split() for line in htsim_lines(w, fab)[2:]] == [
        [r[0], r[1], str(int(r[2]) * 10 ** 6), r[3], r[4]] for r in rows]


def test_write_htsim_writes_the_lines(tmp_path):
    fab = fabric("zcube n=4")
    w = small_workload(chunks=1)
    path = tmp_path / "kv.cm"
    assert write_htsim(w, fab, str(path)) == len(w.transfers)
    assert path.read_text().splitlines() == htsim_lines(w, fab)


def test_htsim_refuses_what_it_cannot_say():
    fab = build("zcube", n=3)                              # g0..g8: no g10
    with pytest.raises(ValueError, match="not a GPU"):
        htsim_lines(small_workload(), fab)
    w = small_workload()
    w.transfers[0] = replace(w.transfers[0], bytes=2 ** 31)
    with pytest.raises(ValueError, match="bytes"):
        htsim_lines(w, fabric("zcube n=4"))


# -- the zcube command -----------------------------------------------------------------------

def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:        # argparse errors exit through SystemExit
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_topo_clab(capsys, validator, tmp_path):
    code, out, _ = run(capsys, "topo", "zcube", "--n", "4", "--format", "clab")
    assert code == 0 and out.startswith("# containerlab topology of zcube")
    doc = yaml.safe_load(out)
    assert validator.is_valid(doc) and doc["name"] == "zcube-n4"
    assert "policy zcube" in out.splitlines()[1]
    setup = doc["topology"]["nodes"]["ovs-setup"]["exec"]
    assert all(c.endswith("tcp:127.0.0.1:6653") for c in setup)
    path = tmp_path / "roft.clab.yml"
    code, _, err = run(capsys, "topo", "roft", "--servers", "2", "--format", "clab",
                       "--controller", "tcp:10.0.0.9:6633", "--policy", "shortest",
                       "--image", "example/host:1", "-o", str(path))
    doc = yaml.safe_load(path.read_text())
    assert code == 0 and "wrote" in err and validator.is_valid(doc)
    assert doc["topology"]["kinds"]["linux"]["image"] == "example/host:1"
    assert doc["topology"]["nodes"]["zcl0"]["labels"]["zcube.controller"] == "tcp:10.0.0.9:6633"


def test_cli_topo_simai(capsys):
    code, out, _ = run(capsys, "topo", "zcube", "--n", "4", "--format", "simai")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "28 4 4 8 64 H100" and len(lines) == 66
    assert lines[2] == "0 16 2880Gbps 0.000025ms 0"
    code, out, _ = run(capsys, "topo", "zcube", "--n", "4", "--format", "simai",
                       "--gpu-type", "H800", "--nvlink-gbps", "3600", "--latency-ms", "0.001",
                       "--nvlink-latency-ms", "0.00002")
    lines = out.splitlines()
    assert code == 0 and lines[0].endswith(" H800")
    assert lines[2:4] == ["0 16 3600Gbps 0.00002ms 0", "0 20 200Gbps 0.001ms 0"]


@pytest.mark.parametrize("argv", [
    ["--format", "clab", "--controller", "localhost"],
    ["--format", "clab", "--policy", "nosuch"],
    ["--format", "clab", "--image", ""],
    ["--format", "simai", "--controller", "tcp:127.0.0.1:6653"],
    ["--format", "json", "--gpu-type", "H800"],
    ["--format", "clab", "--nvlink-gbps", "3600"],
    ["--format", "simai", "--nvlink-gbps", "fast"],
    ["--format", "simai", "--nvlink-gbps", "-1"],
    ["--format", "simai", "--latency-ms", "-1"],
    ["--format", "simai", "--gpu-type", "H 100"],
    ["--format", "htsim"],
])
def test_cli_topo_export_bad_options_exit_2_with_one_line(capsys, argv):
    code, out, err = run(capsys, "topo", "zcube", "--n", "4", *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "error" in err
