"""Trace rounds whose paths share no hop run together, each judged on its own hops; any
doubt sends a round back to run alone, so a wrong route is still named exactly
(testbed/emulation/verify.py: pack, trace_paths)."""
from types import SimpleNamespace

import pytest

from controller.trace import hops_of_path
from testbed.emulation import verify


def probe(path):
    return (path[0], path[-1], f"ip-{path[0]}", f"ip-{path[-1]}",
            f"{path[0]} -> {path[-1]}", [tuple(path)])


def test_rounds_sharing_no_hop_are_packed_up_to_the_limit():
    a = [probe(["h0", "s0", "h1"])]
    b = [probe(["h2", "s1", "h3"])]
    c = [probe(["h0", "s0", "h4"])]                      # shares h0->s0 with a
    d, e, f = ([probe([f"x{k}", f"t{k}", f"y{k}"])] for k in range(3))
    assert verify.pack([a, b, c]) == [[0, 1], [2]]
    assert verify.pack([a, b, d, e, f], most=4) == [[0, 1, 2, 3], [4]]


class Fabric:
    """Packets follow ``routes[(src, dst)]``; counters count them per directed hop."""

    def __init__(self, routes):
        self.routes, self.hop = routes, {}
        self.received: dict = {}
        self.sends = []

    def send(self, cmd, src):
        path = self.routes[(src, cmd["dst"][3:])]
        self.sends.append((cmd["id"], cmd["pps"]))
        for h in hops_of_path(path):
            self.hop[h] = self.hop.get(h, 0) + cmd["count"]
        if path[-1] == cmd["dst"][3:]:
            self.received[(path[-1], cmd["id"])] = cmd["count"]


class Emu:
    def __init__(self, routes):
        self.net = Fabric(routes)
        links = {(u, v) for path in routes.values() for u, v in hops_of_path(path)}
        self.fabric = SimpleNamespace(links=[SimpleNamespace(a=u, b=v) for u, v in links])

    def kernel_counters(self):
        return dict(self.net.hop)

    def hop_counter(self, counters, u, v):
        return counters.get((u, v), 0)

    def agent(self, host):
        return Agent(self.net, host)


class Agent:
    last: dict = {}                    # one answer at a time, as the real agents give

    def __init__(self, net, host):
        self.net, self.host = net, host

    def post(self, cmd):
        if cmd["op"] == "send":
            self.net.send(cmd, self.host)
        Agent.last[self.host] = {"counts": {pid: n for (h, pid), n in self.net.received.items()
                                            if h == self.host}}

    def reply(self):
        return Agent.last[self.host]


@pytest.fixture(autouse=True)
def one_probe_rounds(monkeypatch):
    monkeypatch.setattr(verify, "ROUND", 1)
    monkeypatch.setattr(verify, "settle", lambda emu: True)


def report():
    return {"paths_traced": 0, "paths_ok": 0, "problems": [], "problems_total": 0}


def test_packed_rounds_that_all_follow_their_paths_pass_without_a_retry():
    routes = {("h0", "h1"): ("h0", "s0", "h1"), ("h2", "h3"): ("h2", "s1", "h3")}
    emu, rep = Emu(routes), report()
    verify.trace_paths(emu, [probe(list(p)) for p in routes.values()], rep)
    assert (rep["paths_ok"], rep["rounds_retried"]) == (2, 0)
    assert [pid for pid, _ in emu.net.sends] == ["t0.0", "t1.0"]       # one group


def test_a_wrong_route_in_a_packed_round_is_run_alone_slowly_and_named():
    """h0 -> h1 is computed through s0 but sent through s1: packets on hops of no round's
    paths put both rounds of the group in doubt; both run again alone, ten times more
    slowly, and only the wrong one fails, named as a round alone names it."""
    emu = Emu({("h0", "h1"): ("h0", "s1", "h1"), ("h2", "h3"): ("h2", "s1", "h3")})
    emu.fabric.links += [SimpleNamespace(a="h0", b="s0"), SimpleNamespace(a="s0", b="h1")]
    rep = report()
    verify.trace_paths(emu, [probe(["h0", "s0", "h1"]), probe(["h2", "s1", "h3"])], rep)
    assert (rep["paths_ok"], rep["rounds_retried"]) == (1, 2)
    assert rep["problems"] == ["h0 -> h1: computed h0-s0-h1, but packets went h0-s1-h1; "
                               "first wrong hop h0->s1"]
    again = [pps for pid, pps in emu.net.sends if pid.endswith(".again.0")]
    assert again == [verify.PROBE_PPS / 10] * 2
