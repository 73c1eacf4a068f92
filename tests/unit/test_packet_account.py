"""Reading the hosts' IP counters and summing a packet account (no root)."""
import os

from testbed.emulation.packet_account import PacketAccount, snmp


def test_snmp_reads_this_namespace_counters():
    got = snmp(os.getpid())
    assert got["Ip.OutRequests"] >= 0 and "Tcp.RetransSegs" in got and "TcpExt.TCPTimeouts" in got


def test_the_account_balances_sent_received_and_queue_drops():
    acct = PacketAccount(emu=None)
    acct.before = {"Ip.OutRequests": 100, "Ip.InReceives": 50, "Tcp.RetransSegs": 1,
                   "TcpExt.TCPTimeouts": 0, "queue_drops": 2}
    acct.after = {"Ip.OutRequests": 1100, "Ip.InReceives": 1040, "Tcp.RetransSegs": 9,
                  "TcpExt.TCPTimeouts": 1, "queue_drops": 7}
    s = acct.summary()
    assert s["sent_packets"] == 1000 and s["received_packets"] == 990
    assert s["queue_drops"] == 5 and s["lost_in_emulator"] == 5 and s["lost_share"] == 0.005
    assert s["retransmitted_segments"] == 8 and s["tcp_timeouts"] == 1
    acct.after = None
    assert acct.summary() is None


class _Qdisc(dict):
    def __init__(self, index, parent, drop):
        super().__init__(index=index, parent=parent)
        self.drop = drop

    def get_attr(self, name):
        return {"drop": self.drop} if name == "TCA_STATS" else None


class _Link(dict):
    def __init__(self, index, name):
        super().__init__(index=index)
        self.name = name

    def get_attr(self, name):
        return self.name


class _IPRoute:
    """pyroute2's IPRoute as the account uses it: the root namespace holds one of the
    testbed's ports and one of another program's, each host one shaped port."""
    opened: list = []

    def __init__(self, netns=None, flags=None):
        self.netns, self.closed = netns, False
        _IPRoute.opened.append(self)

    def get_links(self):
        return [_Link(1, "zc-s0-p1"), _Link(2, "eth0")] if self.netns is None else []

    def get_qdiscs(self):
        if self.netns is None:
            return [_Qdisc(1, 0xFFFFFFFF, 3), _Qdisc(2, 0xFFFFFFFF, 100)]
        return [_Qdisc(5, 0xFFFFFFFF, 2), _Qdisc(5, 0x10000, 50)]   # a leaf: its root counts

    def close(self):
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _emu(hosts):
    fabric = type("F", (), {"hosts": [type("H", (), {"name": h})() for h in hosts]})()
    return type("E", (), {"fabric": fabric, "host_pid": staticmethod(lambda h: os.getpid())})()


def test_the_hosts_netlink_sockets_open_once_and_close_when_asked(monkeypatch):
    import pyroute2

    from testbed.emulation.packet_account import HostNetlinks
    monkeypatch.setattr(pyroute2, "IPRoute", _IPRoute)
    _IPRoute.opened = []
    emu = _emu(["g0", "g1"])
    kept = HostNetlinks(emu)
    for _ in range(3):                        # three repetitions' accounts, one socket a host
        with PacketAccount(emu, kept) as acct:
            pass
        assert acct.before["queue_drops"] == 3 + 2 * 2      # ours in the root, hosts' roots
    hosts = [i for i in _IPRoute.opened if i.netns]
    assert [i.netns for i in hosts] == [f"/proc/{os.getpid()}/ns/net"] * 2
    assert not any(i.closed for i in hosts)                 # kept for the next account
    kept.close()
    assert all(i.closed for i in hosts) and not kept.socks


def test_an_account_without_kept_sockets_closes_its_own(monkeypatch):
    import pyroute2
    monkeypatch.setattr(pyroute2, "IPRoute", _IPRoute)
    _IPRoute.opened = []
    with PacketAccount(_emu(["g0", "g1", "g2"])):
        pass
    hosts = [i for i in _IPRoute.opened if i.netns]
    assert len(hosts) == 3 and all(i.closed for i in hosts)
