"""Verification tries a lost probe once more before it counts (a probe lost to a busy
machine is not a wrong route); a probe that never arrives still fails."""
from types import SimpleNamespace

import pytest

from testbed.emulation import verify
from testbed.emulation.verify import check_reachability


@pytest.fixture(autouse=True)
def short_wait(monkeypatch):
    """A lost probe here is lost for good: no need to wait seconds for it."""
    monkeypatch.setattr(verify, "REACH_WAIT_S", 0.05)


class Agent:
    def __init__(self, net, host):
        self.net, self.host, self.counts, self.last = net, host, {}, None

    def post(self, cmd):
        if cmd["op"] == "sendmany":
            for p in cmd["probes"]:
                self.net.sent.append(p["id"])
                if self.net.delivers(p):
                    dst = self.net.agents[self.net.host_of[p["dst"]]]
                    dst.counts[p["id"]] = dst.counts.get(p["id"], 0) + 1
            self.last = {"sent": len(cmd["probes"])}
        elif cmd["op"] == "counts":
            self.last = {"counts": dict(self.counts)}

    def reply(self):
        return self.last


class Net:
    """Hosts a, b, c; ``lose(probe id)`` says whether the datapath drops it."""

    def __init__(self, lose, overrun=False):
        self.host_of = {"10.0.0.1": "a", "10.0.0.2": "b", "10.0.0.3": "c"}
        self.agents = {h: Agent(self, h) for h in "abc"}
        self.fabric = SimpleNamespace(hosts=[SimpleNamespace(name=h) for h in "abc"])
        self.lose, self.sent, self.overrun, self.dropped = lose, [], overrun, 0
        self.ovs = SimpleNamespace(appctl=lambda *args, check=True: (
            f"netdev@ovs-netdev:\n  lookups: hit:9 missed:3 lost:{self.dropped}\n"))

    def delivers(self, probe):
        lost = self.lose(probe["id"])
        self.dropped += lost and self.overrun       # the datapath says it dropped it
        return not lost

    def agent(self, host):
        return self.agents[host]

    def kernel_counters(self):
        """The switches' port counters: moving for ``self.moving`` more reads (a packet
        still queued somewhere), then still."""
        self.reads = getattr(self, "reads", 0) + 1
        return {"zca0-eth1": (min(self.reads, getattr(self, "moving", 0)), 0)}


PROBES = [("a", "b", "10.0.0.1", "10.0.0.2", "a -> b", []),
          ("a", "c", "10.0.0.1", "10.0.0.3", "a -> c", []),
          ("b", "c", "10.0.0.2", "10.0.0.3", "b -> c", [])]


def report():
    return {"problems": [], "problems_total": 0}


def test_a_probe_lost_once_is_sent_again_and_the_pair_passes():
    net = Net(lambda pid: pid == "r1")             # the first try of a -> c is lost
    rep = report()
    check_reachability(net, PROBES, rep)
    assert rep["probes_retried"] == 1 and "r1.again" in net.sent
    assert (rep["pairs_ok"], rep["pairs_tested"], rep["problems_total"]) == (3, 3, 0)


def test_a_probe_that_never_arrives_fails_after_its_second_try():
    net = Net(lambda pid: pid.startswith("r2"))     # b -> c is black-holed
    rep = report()
    check_reachability(net, PROBES, rep)
    assert rep["probes_retried"] == 1
    assert (rep["pairs_ok"], rep["problems_total"]) == (2, 2)
    assert rep["datapath_lost"] == 0
    assert "the switches hold exactly the computed flows, yet these probes were lost at " \
        "both rates" in rep["problems"][0]
    assert "b -> c" in rep["problems"][1]


def test_probes_that_arrive_when_slower_make_the_rest_an_overrun():
    net = Net(lambda pid: pid in ("r1", "r2", "r2.again"), overrun=True)
    rep = report()
    check_reachability(net, PROBES, rep)
    assert rep["datapath_lost"] == 3 and rep["pairs_ok"] == 2
    assert rep["problems"][0].startswith(
        "1 of 2 lost probe(s) arrived when sent ten times more slowly and the switches hold "
        "exactly the computed flows: the emulator was overrun, and the 1 still lost may be "
        "too; the datapath dropped 3 lookup(s)")


def test_probes_lost_beside_wrong_flows_are_called_wrong_routes():
    rep = report()
    check_reachability(Net(lambda pid: pid.startswith("r2")), PROBES, rep, flows_ok=False)
    assert rep["problems"][0].startswith("the switches' flows differ from the computed ones")


def test_each_source_takes_the_destinations_in_its_own_rotation():
    """No incast: source k starts with host k+1, and so on around."""
    net = Net(lambda pid: False)
    probes = [(s, d, ip_s, ip_d, f"{s} -> {d}", [])
              for s, ip_s in (("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3"))
              for d, ip_d in (("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3"))
              if s != d]
    check_reachability(net, probes, report())
    firsts = {}
    for pid in net.sent:
        s, d = probes[int(pid[1:])][:2]
        firsts.setdefault(s, d)
    assert firsts == {"a": "b", "b": "c", "c": "a"}


def test_nothing_is_sent_twice_when_every_probe_arrives():
    net = Net(lambda pid: False)
    rep = report()
    check_reachability(net, PROBES, rep)
    assert rep["probes_retried"] == 0 and len(net.sent) == 3 and rep["datapath_lost"] == 0


def test_a_lost_probe_is_given_up_once_nothing_moves_not_after_the_whole_wait(monkeypatch):
    """A black-holed probe fails in about QUIET_S; the whole wait is far longer."""
    import time
    monkeypatch.setattr(verify, "REACH_WAIT_S", 60.0)
    monkeypatch.setattr(verify, "QUIET_S", 0.05)
    net = Net(lambda pid: pid.startswith("r2"))
    t0 = time.time()
    check_reachability(net, PROBES, report())
    assert time.time() - t0 < 30                       # both tries, far from 2 x 60 s


def test_a_probe_is_waited_for_while_the_switches_still_count_packets(monkeypatch):
    """Packets still moving through the switches keep the wait open: the probe that
    arrives after 40 reads of moving counters counts, and is not sent again."""
    monkeypatch.setattr(verify, "REACH_WAIT_S", 60.0)
    monkeypatch.setattr(verify, "QUIET_S", 0.02)
    net = Net(lambda pid: pid == "r1")
    net.moving = 40
    late = net.agents["c"]
    real = late.post

    def post(cmd):                    # r1 reaches c once the counters have stopped moving
        real(cmd)
        if cmd["op"] == "counts" and getattr(net, "reads", 0) >= 40:
            late.counts["r1"] = 1
            late.last = {"counts": dict(late.counts)}
    late.post = post
    rep = report()
    check_reachability(net, PROBES, rep)
    assert rep["probes_retried"] == 0 and rep["pairs_ok"] == 3
