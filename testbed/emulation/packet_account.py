"""Packets the emulator lost over a workload: what the hosts sent and received against what
the shaped ports' queues dropped, since a loss inside the emulator is an artefact no real
fabric has (root; :mod:`testbed.core.fidelity` judges)."""
from __future__ import annotations

from testbed.emulation.machine_state import PREFIX

_ROOT = 0xFFFFFFFF
_COUNTERS = (("Ip", "OutRequests"), ("Ip", "InReceives"), ("Tcp", "RetransSegs"),
             ("TcpExt", "TCPTimeouts"))


def snmp(pid: int) -> dict:
    """``{"Ip.OutRequests": n, ...}`` of the network namespace process ``pid`` is in."""
    out = {}
    for name in ("snmp", "netstat"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                lines = f.read().split("\n")
        except OSError:
            continue
        for head, vals in zip(lines[0::2], lines[1::2]):
            keys, nums = head.split(), vals.split()
            if keys and nums and keys[0] == nums[0]:
                out.update((f"{keys[0][:-1]}.{k}", int(v)) for k, v in zip(keys[1:], nums[1:])
                           if v.lstrip("-").isdigit())
    return out


def _root_drops(ipr, names=None) -> int:
    """Drops counted by root qdiscs (an htb root counts its leaf's drops too), of the
    interfaces whose names start with ``names`` (None: all)."""
    links = {ln["index"]: ln.get_attr("IFLA_IFNAME") for ln in ipr.get_links()} if names else {}
    total = 0
    for q in ipr.get_qdiscs():
        if q["parent"] != _ROOT or (names and not links.get(q["index"], "").startswith(names)):
            continue
        total += (q.get_attr("TCA_STATS") or {}).get("drop", 0)
    return total


class HostNetlinks:
    """One netlink socket per host's namespace, opened when first asked for and kept until
    :meth:`close` (opening one forks a child into the namespace, about 16 ms a host, three
    times a query's cost: per repetition and host that came to a second a repetition).
    Close them before the hosts go: a socket keeps its namespace alive."""

    def __init__(self, emu):
        self.emu, self.socks = emu, {}

    def __call__(self, host: str):
        ipr = self.socks.get(host)
        if ipr is None:
            from pyroute2 import IPRoute
            ipr = self.socks[host] = IPRoute(netns=f"/proc/{self.emu.host_pid(host)}/ns/net",
                                             flags=0)
        return ipr

    def close(self) -> None:
        for ipr in self.socks.values():
            ipr.close()
        self.socks.clear()


class PacketAccount:
    """``with PacketAccount(emu) as acct: ...`` then ``acct.summary()``; ``netlinks`` (a
    :class:`HostNetlinks` the caller keeps open across accounts), or the account's own."""

    def __init__(self, emu, netlinks: HostNetlinks | None = None):
        self.emu, self.netlinks, self.own = emu, netlinks, netlinks is None
        self.before = self.after = None

    def _snapshot(self) -> dict:
        from pyroute2 import IPRoute
        emu, totals = self.emu, dict.fromkeys([f"{a}.{b}" for a, b in _COUNTERS], 0)
        with IPRoute() as ipr:
            drops = _root_drops(ipr, PREFIX)
        for h in emu.fabric.hosts:
            counts = snmp(emu.host_pid(h.name))
            for k in totals:
                totals[k] += counts.get(k, 0)
            drops += _root_drops(self.netlinks(h.name))
        totals["queue_drops"] = drops
        return totals

    def __enter__(self):
        if self.own:
            self.netlinks = HostNetlinks(self.emu)
        try:
            self.before = self._snapshot()
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.after = self._snapshot()
        except OSError:
            self.after = None
        finally:
            self._close()
        return False

    def _close(self) -> None:
        if self.own and self.netlinks is not None:
            self.netlinks.close()

    def summary(self) -> dict | None:
        if not self.before or not self.after:
            return None
        d = {k: self.after[k] - self.before[k] for k in self.before}
        sent, got, dropped = d["Ip.OutRequests"], d["Ip.InReceives"], d["queue_drops"]
        lost = max(0, sent - got - dropped)
        return {"sent_packets": sent, "received_packets": got, "queue_drops": dropped,
                "lost_in_emulator": lost, "lost_share": round(lost / sent, 6) if sent else 0.0,
                "retransmitted_segments": d["Tcp.RetransSegs"],
                "tcp_timeouts": d["TcpExt.TCPTimeouts"]}
