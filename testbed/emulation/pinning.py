"""Keep the hosts' receive work off the userspace datapath's core (``$ZCUBE_PIN=on``; off by
default until measured to help).

With ``datapath_type=netdev`` ovs-vswitchd forwards a packet by sending it on an AF_PACKET
socket into the veth of the port it leaves by.  A veth hands the packet to its peer at once,
on the sending CPU, and the peer's receive processing (the receiving host's IP and TCP, and
the ACK it sends back) runs in softirq on that same CPU, usually in the sender's own
context: the forwarding thread is charged with the hosts' TCP work as well as its own.
This pins ovs-vswitchd's threads to the machine's last core and the host agents to the
others, and steers every host port's receive processing (RPS, the port's ``rx-0/rps_cpus``)
to the other cores, so the forwarding thread forwards and the hosts' stacks run beside it.

It touches only what the testbed started: the ovs-vswitchd it started (given back every
core when the emulation ends, as that daemon may serve the next), the agents, and the host
ports in the namespaces it made (a host's sysfs is read in a mount namespace of its own,
as ``ip netns exec`` does).  With one core, the kernel datapath or the system's
ovs-vswitchd it does nothing.
"""
from __future__ import annotations

import os
import shlex

from testbed.emulation.network import host_intf


def wanted() -> bool:
    return os.environ.get("ZCUBE_PIN", "off") == "on"


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def set_affinity(pid: int, cpus: set) -> int:
    """Every thread of process ``pid`` onto ``cpus``; how many threads took it."""
    done = 0
    for tid in _tasks(pid):
        try:
            os.sched_setaffinity(tid, cpus)
            done += 1
        except OSError:
            continue
    return done


def mask(cpus: set) -> str:
    """The hexadecimal CPU mask sysfs takes."""
    return format(sum(1 << c for c in cpus), "x")


def pin(emu) -> str:
    """Pin as the module docstring says, on a brought-up emulation with its agents ready;
    what was done, for the log."""
    if not wanted():
        return ""
    cpus = sorted(os.sched_getaffinity(0))
    pid = emu.vswitchd_pid() if emu.datapath == "user" and emu.ovs.ours else None
    if len(cpus) < 2 or pid is None:
        return "pinning asked for, but there is one core or no userspace datapath of ours"
    datapath, rest = {cpus[-1]}, set(cpus[:-1])
    threads = set_affinity(pid, datapath)
    for agent in emu.agents.values():
        set_affinity(agent.proc.pid, rest)
    steer = mask(rest)
    for h in emu.fabric.hosts:
        node = emu.net.get(h.name)
        writes = " && ".join(
            f"echo {steer} > /sys/class/net/{shlex.quote(host_intf(h.name, p.index))}"
            f"/queues/rx-0/rps_cpus" for p in h.ports)
        sysfs = "umount -l /sys; mount -t sysfs none /sys && "      # as ip netns exec does
        node.cmd(f"unshare -m sh -c {shlex.quote(sysfs + writes)}")
    return (f"pinned ovs-vswitchd ({threads} threads) to CPU {cpus[-1]}, the agents and the "
            f"host ports' receive work to CPU(s) {','.join(map(str, sorted(rest)))}")


def unpin(emu) -> None:
    """Give the ovs-vswitchd the testbed started every core back."""
    if not wanted() or emu.datapath != "user" or not emu.ovs.ours:
        return
    pid = emu.vswitchd_pid()
    if pid is not None:
        set_affinity(pid, set(os.sched_getaffinity(0)))
