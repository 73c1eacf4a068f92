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


# -- the host class for stock Mininet (mn --custom ... --host zcubehost) ---------------------

def load_namespace_like_mn():
    namespace = {}
    with open(CUSTOM) as f:
        exec(compile(f.read(), CUSTOM, "exec"), namespace, namespace)
    return namespace


class FakeNode:
    """What ZCubeHost.config asks of a Mininet node: a name and cmd(), recorded."""

    def __init__(self, name, answer=""):
        self.name, self.answer, self.ran = name, answer, []

    def cmd(self, line):
        self.ran.append(line)
        return self.answer


def configured(monkeypatch, fab, name, policy=None, answer=""):
    """The commands ZCubeHost.config runs in host ``name`` (Mininet's own config a no-op)."""
    from mininet.node import Host
    ns = load_namespace_like_mn()
    monkeypatch.setattr(Host, "config", lambda self, **params: {})
    host = ns["hosts"]["zcubehost"].__new__(ns["hosts"]["zcubehost"])
    fake = FakeNode(name, answer)
    host.name, host.cmd = fake.name, fake.cmd
    host.config(fabric=fab, policy=policy, ip="10.0.1.0/16", mac="02:00:00:00:00:00")
    return fake.ran


def _parse(commands):
    """(addresses, routes, neighbours) a host's recorded ``ip`` commands set."""
    import ipaddress
    addrs, routes, neigh = {}, [], {}
    for c in commands:
        w = c.split()
        if w[:3] == ["ip", "addr", "add"]:
            addrs[w[3].split("/")[0]] = w[5]
        elif w[:3] == ["ip", "route", "replace"]:
            routes.append((ipaddress.ip_network(w[3]), w[5], w[7]))
        elif w[:3] == ["ip", "neigh", "replace"]:
            neigh[(w[3], w[7])] = w[5]
    return addrs, routes, neigh


def _route(routes, ip):
    import ipaddress
    hits = [r for r in routes if ipaddress.ip_address(ip) in r[0]]
    return max(hits, key=lambda r: r[0].prefixlen) if hits else None


def _one_way(fab, table, host_cfg, host, dst, src=None):
    """One direction of a ping from ``host`` to ``dst`` (from ``src``: the address a reply
    leaves from; None: the route's own source): a route, a source address the host holds,
    a static neighbour for ``dst`` on the route's port, and a path of the table that carries
    those addresses out of that port (so the controller installed flows for them).  The
    source used."""
    from controller.flows import path_addresses
    addrs, routes, neigh = host_cfg
    route = _route(routes, dst)
    assert route, f"{host} has no route to {dst}"
    _, dev, route_src = route
    src = src or route_src
    assert src in addrs, f"{host} does not hold {src}"
    owner = next(h for h in fab.hosts for p in h.ports if p.ip == dst)
    assert neigh.get((dst, dev)) == next(p.mac for p in owner.ports if p.ip == dst), (host, dst)
    assert any(path_addresses(fab, p)[:2] == (src, dst)
               and f"{host}-eth{fab.host_port_toward(host, p[1])}" == dev
               for p in table.paths(host, owner.name)), (host, src, dst, dev)
    return src


@pytest.mark.parametrize("kind, params, policy", [("zcube", {"n": 4}, None),
                                                  ("roft", {"servers": 4}, "ecmp"),
                                                  ("fattree", {"k": 4}, "shortest")])
def test_zcubehost_commands_make_pingall_clean_on_paper(monkeypatch, kind, params, policy):
    """Mininet's pingall pings each host's first address: every host has a route to it, a
    static neighbour for it on that route's port, a source address of its own, and the
    controller's flows carry those addresses out of that port; the same for the reply.
    (On ZCube only ``zcube`` routes to both ports of every GPU: ``zcube-short`` and ``ecmp``
    reach a GPU that shares a switch on that switch's port alone.)"""
    from controller.routing import RouteTable
    fab = build(kind, **params)
    table = RouteTable(fab, policy)
    hosts = {h.name: _parse(configured(monkeypatch, fab, h.name, policy)) for h in fab.hosts}
    for s in fab.hosts:
        for d in fab.hosts:
            if s is not d:
                src = _one_way(fab, table, hosts[s.name], s.name, d.ports[0].ip)
                _one_way(fab, table, hosts[d.name], d.name, src, d.ports[0].ip)


def test_zcubehost_sets_every_port_then_routes_and_sysctls(monkeypatch):
    fab = build("zcube", n=4)
    ran = configured(monkeypatch, fab, "g5")
    assert ran[0].startswith("sysctl -q -e -w ") and "net.ipv4.conf.all.rp_filter=0" in ran[0]
    for p in fab.host("g5").ports:
        dev = f"g5-eth{p.index}"
        order = [ran.index(f"ip link set dev {dev} down 2>&1"),
                 ran.index(f"ip addr flush dev {dev} 2>&1"),
                 ran.index(f"ip link set dev {dev} address {p.mac} 2>&1"),
                 ran.index(f"ip addr add {p.ip}/32 dev {dev} 2>&1"),
                 ran.index(f"ip link set dev {dev} up 2>&1")]
        assert order == sorted(order)
        assert order[-1] < min(i for i, c in enumerate(ran) if c.startswith("ip route"))
    assert sum(c.startswith("ip neigh replace") for c in ran) == 2 * (len(fab.hosts) - 1)


def test_zcubehost_says_which_commands_failed(monkeypatch):
    with pytest.raises(RuntimeError, match="--host zcubehost: g0: sysctl .*: RTNETLINK"):
        configured(monkeypatch, build("zcube", n=2), "g0", answer="RTNETLINK answers: no")


def test_zcubehost_needs_a_fabric_topology(monkeypatch):
    with pytest.raises(ValueError, match="g0 is not a fabric's host"):
        configured(monkeypatch, None, "g0")


def test_the_topology_hands_each_host_its_fabric():
    from mininet.util import buildTopo
    topo = buildTopo(load_custom_like_mn(), "zcube,4")
    assert topo.nodeInfo("g3")["fabric"] is topo.fabric
