"""Reading the hosts' IP counters and summing a packet account (no root)."""
import os

from testbed.emulation.loss import PacketAccount, snmp


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
