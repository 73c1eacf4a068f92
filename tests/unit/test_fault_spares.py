"""A run with faults opens, before its workload clock, the first spare connection of the
pairing each flow moves to, and a fault's injection tells the agents before it runs the
hosts' side (one ``ip -batch`` per host: the cable ends, then the routes)."""
import threading
from collections import Counter
from types import SimpleNamespace

from controller.failures import Failures
from controller.routing import RouteTable
from testbed.core.settings import EmulationSettings
from testbed.emulation import faults, transfers
from topologies import roft, zcube
from traffic.kvpool import RESTART_LANE


def work(*pairs):
    return SimpleNamespace(seed=1, transfers=[SimpleNamespace(src=s, dst=d, bytes=1000,
                                                              ready_s=0.1 * k)
                                              for k, (s, d) in enumerate(pairs)])


def test_zcube_opens_a_spare_on_each_flows_first_alternate_and_roft_none():
    fab = zcube(4, 4)
    g0, g5 = fab.host("g0"), fab.host("g5")
    p1 = (g0.ports[0].ip, g5.ports[1].ip)
    p2 = (g0.ports[1].ip, g5.ports[0].ip)
    got = transfers.spares_by_host(RouteTable(fab, "zcube"), work(("g0", "g5")))
    assert got == {"g0": sorted([p1 + (RESTART_LANE,), p2 + (RESTART_LANE,)])}
    assert transfers.spares_by_host(RouteTable(roft(4, 4), "ecmp"), work(("g0", "g7"))) == {}


class Agent:
    def __init__(self, sent):
        self.sent = sent

    def post(self, msg):
        self.sent.append(msg)

    def reply(self):
        return {}


def test_spares_take_any_port_and_leave_the_seeded_ports_of_the_others_alone():
    fab = zcube(4, 4)
    w = work(("g0", "g5"), ("g0", "g9"))
    plain, spared = [], []
    for sent, spares in ((plain, False), (spared, True)):
        emu = SimpleNamespace(table=RouteTable(fab, "zcube"), fabric=fab, link_mbps=100, pins=[],
                              agent=lambda h, sent=sent: Agent(sent),
                              settings=EmulationSettings())
        transfers.open_connections(emu, w, spares=spares)
    (a,), (b,) = plain, spared
    n = len(a["pairings"])
    assert n == 4 and len(b["pairings"]) == 8
    assert b["pairings"][:n] == a["pairings"] and b["ports"][:n] == a["ports"]
    assert b["ports"][n:] == [0] * 4
    assert all(p[2] == RESTART_LANE for p in b["pairings"][n:])


def test_a_fault_tells_the_agents_before_the_hosts_side_which_runs_in_one_batch(monkeypatch):
    fab = zcube(4, 4)
    order = []
    emu = SimpleNamespace(fabric=fab, failed=Failures(), table=RouteTable(fab, "zcube"),
                          holds=Counter(), fault_lock=threading.RLock())
    emu.base_table = emu.table
    reroutes = iter(range(1000))
    emu.status = lambda: {"reroutes": next(reroutes), "pending_events": 0,
                          "last_reroute": {"installed": 1.0}}

    def use(failed):
        old, emu.failed = emu.table, failed
        emu.table = emu.base_table.with_failures(failed) if failed else emu.base_table
        return old
    emu.use_failures = use
    monkeypatch.setattr(faults, "_set_links", lambda _e, cables, up: order.append(
        ("switch ends", len(cables))) or {"g3": [f"link set dev x {'up' if up else 'down'}\n"]})
    monkeypatch.setattr(faults, "tell_agents", lambda _e: order.append("told") or
                        {"moved": 0, "at": 0.0})
    monkeypatch.setattr(faults, "_host_batches", lambda _e, lines: order.append(lines))
    faults.fail(emu, ["g3:1"])
    (ends, cables), told, lines = order
    assert (ends, cables, told) == ("switch ends", 1, "told")
    assert lines["g3"][0] == "link set dev x down\n" and len(lines["g3"]) > 1
    assert any(line.startswith("route del") for line in lines["g3"][1:])
