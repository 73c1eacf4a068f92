"""Verification tries a lost probe once more before it counts (a probe lost to a busy
machine is not a wrong route); a probe that never arrives still fails."""
from testbed.emulation.verify import check_reachability


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

    def __init__(self, lose):
        self.host_of = {"10.0.0.1": "a", "10.0.0.2": "b", "10.0.0.3": "c"}
        self.agents = {h: Agent(self, h) for h in "abc"}
        self.lose, self.sent = lose, []

    def delivers(self, probe):
        return not self.lose(probe["id"])

    def agent(self, host):
        return self.agents[host]


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
    assert (rep["pairs_ok"], rep["problems_total"]) == (2, 1)
    assert "b -> c" in rep["problems"][0]


def test_nothing_is_sent_twice_when_every_probe_arrives():
    net = Net(lambda pid: False)
    rep = report()
    check_reachability(net, PROBES, rep)
    assert rep["probes_retried"] == 0 and len(net.sent) == 3
