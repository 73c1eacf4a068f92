"""The Mininet ``--custom`` entry builds exactly the Fabric the builders make."""
import os

import pytest

from topologies import build

pytest.importorskip("mininet.topo", reason="Debian's mininet package (make setup installs it)")

CUSTOM = os.path.join(os.path.dirname(__file__), "..", "..", "topologies", "mininet_topo.py")


def load_custom_like_mn():
    """What ``mn --custom FILE`` does: exec the file in a fresh namespace, no __file__."""
    namespace = {}
    with open(CUSTOM) as f:
        exec(compile(f.read(), CUSTOM, "exec"), namespace, namespace)
    return namespace["topos"]


def same_as_fabric(topo, fab):
    assert sorted(topo.hosts()) == sorted(h.name for h in fab.hosts)
    assert sorted(topo.switches()) == sorted(s.name for s in fab.switches)
    for s in fab.switches:
        assert topo.nodeInfo(s.name)["dpid"] == s.dpid_hex
    got = sorted((i["node1"], i["port1"], i["node2"], i["port2"])
                 for _, _, _, i in topo.links(withKeys=True, withInfo=True))
    want = sorted((link.a, link.a_port, link.b, link.b_port) for link in fab.links)
    assert got == want
    for _, _, _, info in topo.links(withKeys=True, withInfo=True):
        if fab.is_host(info["node1"]):
            port = fab.host(info["node1"]).ports[info["port1"]]
            assert info["params1"] == {"ip": f"{port.ip}/16"}
            assert info["addr1"] == port.mac


@pytest.mark.parametrize("spec,kind,params", [
    ("zcube,4", "zcube", {"n": 4}),
    ("zcube,n=4,gpus_per_server=2", "zcube", {"n": 4, "gpus_per_server": 2}),
    ("zcube,3,parallel=2", "zcube", {"n": 3, "parallel": 2}),
    ("roft,servers=4,gpus_per_server=4", "roft", {"servers": 4, "gpus_per_server": 4}),
    ("fattree,4", "fattree", {"k": 4}),
])
def test_mn_custom_topo_builds_the_same_fabric(spec, kind, params):
    from mininet.util import buildTopo
    topo = buildTopo(load_custom_like_mn(), spec)
    same_as_fabric(topo, build(kind, **params))
