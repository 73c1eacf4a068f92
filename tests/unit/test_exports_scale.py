"""Exports that scale: SimAI's linear in the fabric, containerlab's streamed host by host
and refused above its documented size (topologies/simai.py, topologies/clab.py)."""
import io

import pytest
import yaml

from controller.flows import HostConfigs, compile_host_config
from controller.routing import RouteTable
from testbed.cli.main import main
from topologies import Fabric, build
from topologies.clab import MAX_HOSTS, clab_topology, write_clab
from topologies.simai import to_simai


class Counting(HostConfigs):
    """Host configurations that remember the order they were asked for in."""

    def __init__(self, table):
        super().__init__(table)
        self.asked = []

    def __getitem__(self, name):
        self.asked.append(name)
        return super().__getitem__(name)


@pytest.mark.parametrize("kind, params", [("zcube", {"n": 4, "gpus_per_server": 4}),
                                          ("roft", {"servers": 4, "gpus_per_server": 4})])
def test_the_streamed_file_reads_back_as_the_topology_asking_each_host_once(kind, params):
    fab = build(kind, **params)
    table = RouteTable(fab)
    configs = Counting(table)
    out = io.StringIO()
    write_clab(fab, out, host_configs=configs, policy=table.policy_name)
    assert yaml.safe_load(out.getvalue()) == clab_topology(
        fab, host_configs=compile_host_config(table))
    assert configs.asked == [h.name for h in fab.hosts]      # once each, in order


def test_a_subset_of_host_configurations_is_the_same_as_in_the_whole():
    table = RouteTable(build("zcube", n=4, gpus_per_server=4))
    whole = compile_host_config(table)
    assert compile_host_config(table, hosts=["g3", "g9", "nope"]) == {
        "g3": whole["g3"], "g9": whole["g9"]}


def test_a_fabric_above_the_clab_limit_is_refused_in_one_line_before_writing(capsys, tmp_path):
    out = tmp_path / "big.clab.yml"
    assert main(["topo", "zcube", "--n", "33", "--format", "clab", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"zcube topo: error: 1,089 GPUs: a containerlab file grows with GPUs "
                   f"squared (each GPU's static neighbours, about 0.2 GB here); at most "
                   f"{MAX_HOSTS:,} GPUs\n")
    assert not out.exists()


def test_simai_walks_the_servers_once_not_once_per_server(monkeypatch):
    calls = []
    servers = Fabric.servers

    def counted(self):
        calls.append(1)
        return servers(self)
    monkeypatch.setattr(Fabric, "servers", counted)
    to_simai(build("zcube", n=16, gpus_per_server=1))
    assert len(calls) == 1
