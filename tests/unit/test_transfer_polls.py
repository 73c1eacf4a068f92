"""The workload's end is polled soon and then every POLL_S: a short transfer is not
held up by a fixed 0.2 s wait (no root: agents stood in for by a recorder)."""
from types import SimpleNamespace

from testbed.emulation import transfers
from topologies import zcube
from traffic.types import Transfer


class Agent:
    def __init__(self, done_after: int):
        self.polls, self.done_after = 0, done_after

    def call(self, cmd):
        if cmd["op"] == "progress":
            self.polls += 1
            return {"sent": 2 if self.polls > self.done_after else 0}
        return {"sent": [], "received": []} if cmd["op"] == "results" else {}


def test_polls_start_at_ten_milliseconds_and_double_to_poll_s(monkeypatch):
    from controller.routing import RouteTable
    fab = zcube(2, 2)
    agents = {h.name: Agent(done_after=8) for h in fab.hosts}
    emu = SimpleNamespace(fabric=fab, table=RouteTable(fab, "zcube"), link_mbps=100,
                          agent=agents.get, each_agent=lambda: list(agents.values()))
    slept = []
    monkeypatch.setattr(transfers.time, "sleep", slept.append)
    work = SimpleNamespace(transfers=[Transfer(0, "g0", "g3", 1000, 0.0)], bytes_total=1000)
    transfers.run_transfers(emu, work, start_delay_s=0.0, transport="tcp-per-transfer")
    polls = slept[1:]                  # the first sleep waits for the last transfer's start
    assert polls == [0.01, 0.02, 0.04, 0.08, 0.16, transfers.POLL_S, transfers.POLL_S,
                     transfers.POLL_S]
    assert agents["g0"].polls == 9
