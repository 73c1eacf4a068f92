"""Connections pinned to paths: the pure flows, the rerouter's state, the app's messages, and
the paths themselves being the ones the model draws (no root)."""
import io
import json

import pytest
from test_failures import Obj, _app, _connect, _fail, _one_bundle_each

from controller.flows import compile_switch_flows, parse_ofctl_flow
from controller.pins import PIN_COOKIE, PRIO_PIN, Pin, pin_flows
from controller.reroute import Rerouter
from controller.routing import RouteTable
from testbed.core.ecmp import ecmp_salt, pool_paths
from testbed.emulation.pin_requests import workload_pins
from testbed.emulation.transfers import connections_by_host, source_ports
from testbed.model.capacity import resources
from testbed.model.flows import subflows
from topologies import roft, zcube
from traffic.arrivals import poisson
from traffic.kvpool import POOL_PORT
from traffic.models import get_model
from traffic.placement import deploy
from traffic.types import Scale
from traffic.workload import build_workload, workload_key


def _crossed(table):
    """A host pair with several equal paths, and those paths."""
    for s, d in table.pairs():
        paths = table.paths(s, d)
        if len(paths) > 1:
            return s, d, paths
    raise AssertionError("no pair with several paths")


def _pin(table, path, sport=12345):
    fab = table.fabric
    src = fab.host(path[0]).ports[fab.host_port_toward(path[0], path[1])].ip
    dst = fab.host(path[-1]).ports[fab.host_port_toward(path[-1], path[-2])].ip
    return Pin(src, dst, sport, POOL_PORT, tuple(path))


def test_a_pin_leaves_by_its_paths_port_where_the_routing_flows_offer_a_choice():
    table = RouteTable(roft(4, 4), "ecmp")
    flows = compile_switch_flows(table)
    _, _, paths = _crossed(table)
    for path in paths:
        got = pin_flows(table, flows, [_pin(table, path)])
        leaf, spine = path[1], path[2]
        assert list(got) == [leaf]           # the spine has one way down: nothing to pin
        (pf,) = got[leaf]
        assert pf.port == table.live_ports(leaf, spine)[0][0]
    assert len({pin_flows(table, flows, [_pin(table, p)])[p[1]][0].port for p in paths}) == \
        len(paths)


def test_pinned_flows_describe_as_ovs_ofctl_dumps_them():
    table = RouteTable(roft(4, 4), "ecmp")
    _, _, paths = _crossed(table)
    pin = _pin(table, paths[0], sport=20001)
    (pf,) = pin_flows(table, compile_switch_flows(table), [pin])[paths[0][1]]
    dump = (f" cookie={PIN_COOKIE:#x}, duration=2.5s, table=0, n_packets=0, n_bytes=0, "
            f"priority={PRIO_PIN},tcp,nw_src={pin.src},nw_dst={pin.dst},tp_src=20001,"
            f"tp_dst={POOL_PORT} actions=output:{pf.port}")
    assert parse_ofctl_flow(dump) == pf.describe()


def test_a_pin_whose_path_failed_holds_nothing_and_others_stay():
    table = RouteTable(roft(4, 4), "ecmp")
    _, _, paths = _crossed(table)
    pins = [_pin(table, paths[0]), _pin(table, paths[1], sport=12346)]
    leaf, spine = paths[0][1], paths[0][2]
    broken = table.with_failures(_fail("roft44", f"{leaf}-{spine}"))
    got = pin_flows(broken, compile_switch_flows(broken), pins)
    assert [pf.pin for pf in got[leaf]] == [pins[1]]


def test_zcube_paths_need_no_pins_and_pins_of_unknown_hosts_hold_nothing():
    table = RouteTable(zcube(4, 4), "zcube")
    flows = compile_switch_flows(table)
    s, d = next(iter(table.pairs()))
    assert pin_flows(table, flows, [_pin(table, p) for p in table.paths(s, d)]) == {}
    odd = Pin("10.0.0.1", "10.1.0.1", 1000, POOL_PORT, ("nohost", "a0", "alsonot"))
    assert pin_flows(table, flows, [odd]) == {}


@pytest.mark.parametrize("obj", [{}, {"src": "a", "dst": "b", "sport": 0, "dport": 1,
                                      "path": ["h", "s", "g"]},
                                 {"src": "a", "dst": "b", "sport": 5, "dport": 1, "path": ["h"]},
                                 {"src": "a", "dst": "b", "sport": "x", "dport": 1, "path": []}])
def test_malformed_pins_are_refused(obj):
    with pytest.raises(ValueError, match="bad pin"):
        Pin.parse(obj)


def test_the_rerouter_repins_around_a_failure_and_back():
    rr = Rerouter(roft(4, 4), "ecmp")
    _, _, paths = _crossed(rr.table)
    leaf, spine = paths[0][1], paths[0][2]
    assert rr.set_pins([_pin(rr.table, paths[0])]) == {leaf}
    assert rr.set_pins([_pin(rr.table, paths[0])]) == set()        # the same again
    cable = rr.fabric.ports_between(leaf, spine)[0][0]
    rr.port_status(rr.fabric.switch(leaf).dpid, cable, True)
    rr.reroute()
    assert rr.last["repinned"] == [leaf] and rr.pinned == {}
    rr.port_status(rr.fabric.switch(leaf).dpid, cable, False)
    rr.reroute()
    assert rr.last["repinned"] == [leaf] and list(rr.pinned) == [leaf]
    assert rr.status()["pins"] == 1 and rr.status()["pinned_flows"] == 1


def _post(app, body: bytes):
    return app.post_pins({"CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)})


def test_the_app_replaces_a_switchs_pins_in_one_bundle_and_confirms_them(monkeypatch):
    app = _app("roft44", "ecmp", monkeypatch)
    dps = {name: _connect(app, name) for name in ("l0", "l1", "s0", "s1")}
    _, _, paths = _crossed(app.rerouter.table)
    path = next(p for p in paths if p[1] in dps)
    dp = dps[path[1]]
    before, bundles, pin = len(dp.sent), len(dp.bundles), _pin(app.rerouter.table, path)
    body = {"pins": [{"src": pin.src, "dst": pin.dst, "sport": pin.sport, "dport": pin.dport,
                      "path": list(pin.path)}]}
    code, answer = _post(app, json.dumps(body).encode())
    assert code == "200 OK" and answer == {"generation": 1, "pinned_flows": 1}
    new = dp.sent[before:]
    assert len(_one_bundle_each(dp, bundles)[0]) == 1
    assert sum(1 for b in dp.bundles[bundles:] if b[1] == "add") == 2
    assert [type(m).__name__ for m in new] == ["OFPFlowMod", "OFPFlowMod", "OFPBarrierRequest"]
    ofp = dp.ofproto
    assert new[0].command == ofp.OFPFC_DELETE and new[0].cookie == PIN_COOKIE
    assert new[1].command == ofp.OFPFC_ADD and new[1].priority == PRIO_PIN
    assert dict(new[1].match.items())["tcp_src"] == pin.sport
    assert new[1].instructions[0].actions[0].port == \
        app.rerouter.table.live_ports(path[1], path[2])[0][0]
    assert app.status()["pins_installed"] == 0
    app.on_barrier(Obj(msg=Obj(datapath=dp, xid=new[-1].xid)))
    assert app.status()["pins_installed"] == 1 == app.status()["pins_generation"]
    assert _post(app, b'{"pins": [{"src": 1}]}')[0] == "400 Bad Request"
    assert _post(app, b"not json")[0] == "400 Bad Request"


def _workload(fabric, seed):
    return build_workload(poisson(8, count=8, seed=seed, input_tokens=8192),
                          deploy(fabric, 4, 4, placement="cross-rail", seed=seed),
                          get_model("llama3-70b"), scale=Scale(link=1e-4, size=1e-4))


def test_the_pinned_paths_are_the_ones_the_model_draws_for_each_connection():
    fab = roft(4, 4)
    table = RouteTable(fab, "ecmp")
    work = _workload(fab, 3)
    res = resources(fab, 100.0, 1.0, 0.0, None)
    subs = subflows(table, work.transfers, res, 0.0, "pool", ecmp_salt(work))
    drawn = pool_paths(table, work)
    hop = res.hop_index
    k_of = {}
    for f, i in enumerate(subs.transfer):
        k_of[i] = k_of.get(i, -1) + 1
        t = work.transfers[i]
        (_, addrs, paths), = [r for r in _routes(table, t) if r[0] == k_of[i]]
        path = drawn[addrs] if len(paths) > 1 else paths[0]
        assert (addrs in drawn) == (len(paths) > 1)
        assert subs.links[f] == tuple(hop[(path[j], path[j + 1])] for j in range(len(path) - 1))
    assert len({p[2] for p in drawn.values()}) > 1          # the draws use several spines


def _routes(table, t):
    from controller.pairings import flow_paths
    return flow_paths(table, t.src, t.dst)


def test_workload_pins_carry_each_connections_seeded_port_and_drawn_path():
    fab = roft(4, 4)
    table = RouteTable(fab, "ecmp")
    work = _workload(fab, 5)
    wanted, _ = connections_by_host(table, work)
    ports = {h: source_ports(workload_key(work), h, p) for h, p in wanted.items()}
    pins = workload_pins(table, work, wanted, ports)
    drawn = pool_paths(table, work)
    assert len(pins) == sum(map(len, wanted.values())) == len(drawn)
    for pin in pins:
        host = pin.path[0]
        assert pin.sport == ports[host][[tuple(p[:2]) for p in wanted[host]].index(
            (pin.src, pin.dst))]
        assert pin.path == drawn[(pin.src, pin.dst, 0)] and pin.dport == POOL_PORT
