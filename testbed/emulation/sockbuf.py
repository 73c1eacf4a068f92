"""Widens the send buffer of the userspace datapath's packet socket, whose default makes
ovs-vswitchd drop packets without counting them when the shaped queues fill (root, Linux
>= 5.6; only the ovs-vswitchd the testbed started)."""
from __future__ import annotations

import ctypes
import os
import socket
import time

SEND_BUFFER = 64 << 20          # bytes; the kernel charges only what is queued
_SYS_PIDFD_OPEN, _SYS_PIDFD_GETFD = 434, 438     # the same on every Linux architecture
_SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)    # asm-generic value (not in Python)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _socket_fds(pid: int) -> list[int]:
    out = []
    base = f"/proc/{pid}/fd"
    for name in os.listdir(base):
        try:
            if os.readlink(os.path.join(base, name)).startswith("socket:"):
                out.append(int(name))
        except OSError:
            continue
    return out


def _each_packet_socket(pid: int, act) -> list:
    """``act(sock)`` on a duplicate of every AF_PACKET socket of process ``pid``; what each
    call returned.  Raises OSError where the kernel does not allow it."""
    libc = _libc()
    pidfd = libc.syscall(_SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), f"pidfd_open({pid}) failed")
    out = []
    try:
        for fd in _socket_fds(pid):
            dup = libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
            if dup < 0:
                continue
            sock = socket.socket(fileno=dup)
            try:
                if sock.family == socket.AF_PACKET:
                    out.append(act(sock))
            finally:
                sock.close()          # closes the duplicate only; the process keeps its own
    finally:
        os.close(pidfd)
    return out


def widen_packet_sockets(pid: int, size: int = SEND_BUFFER) -> int:
    """Set the send buffer of every AF_PACKET socket of process ``pid`` to ``size`` bytes;
    how many there were."""
    return len(_each_packet_socket(
        pid, lambda s: s.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, size)))


def send_buffers(pid: int) -> list[int]:
    """The send buffer (bytes, as the kernel reports it) of each AF_PACKET socket of ``pid``."""
    return _each_packet_socket(pid, lambda s: s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))


def widen_datapath_buffer(emu) -> str:
    """On an emulation whose userspace datapath the testbed started: send one probe across
    the fabric (ovs-vswitchd opens its send socket with the first packet it forwards),
    widen the sockets, and say what was done, for the log."""
    if emu.datapath != "user":
        return "kernel datapath: no packet socket to widen"
    if not emu.ovs.ours:
        return ("the system's ovs-vswitchd forwards this fabric: its send buffer is left as it "
                "is, and bursts may lose packets inside it (start it with a larger "
                "net.core.wmem_default)")
    hosts = emu.fabric.hosts
    src, dst = hosts[0], hosts[-1]
    sender = emu.agent(src.name)
    sender.call({"op": "send", "id": "sockbuf", "src": src.ports[0].ip,
                 "dst": dst.ports[0].ip, "count": 1})
    deadline = time.time() + 2.0
    while time.time() < deadline:
        if emu.agent(dst.name).call({"op": "counts"})["counts"].get("sockbuf"):
            break
        time.sleep(0.02)
    emu.agent(dst.name).call({"op": "reset"})
    try:
        n = widen_packet_sockets(emu.vswitchd_pid())
    except (OSError, TypeError) as err:
        return f"could not widen ovs-vswitchd's send buffer ({err}): bursts may lose packets"
    return f"ovs-vswitchd's {n} packet sockets: send buffer {SEND_BUFFER >> 20} MB"
