"""The datapath probe: kernel-stamped datagrams across a bridge of the emulator's datapath,
whose one-way delay shows the datapath's stalls, and timed wake-ups, whose lateness shows
the machine's.

Run as root: ``python -m traffic.delay_probe NS_FROM NS_TO DEST_IP [--every-ms 5]``, or
``--loopback`` for the wake-ups alone.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import struct
import sys
import time

from traffic.kvwire import prefer_this_thread

PORT = 7391
DRAIN_S = 0.1
SO_TIMESTAMPNS = 35                    # <asm-generic/socket.h>; Python does not name them
SO_TIMESTAMPING = 37
TX_SOFTWARE, SOFTWARE, OPT_ID, OPT_TSONLY = 1 << 1, 1 << 4, 1 << 7, 1 << 11
IP_RECVERR = 11
MSG_ERRQUEUE = 0x2000
CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def in_namespace(name: str, make):
    """``make()`` called inside named network namespace ``name`` (``ip netns``; the socket
    it returns stays there); the process comes back to its own namespace afterwards.  None:
    the caller's own namespace."""
    if name is None:
        return make()
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        _setns(there)
        return make()
    finally:
        _setns(home)
        os.close(there)
        os.close(home)


def sender_socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY)
    return s


def receiver_socket(addr: tuple = ("0.0.0.0", PORT)) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind(addr)
    return s


def tx_stamps(s: socket.socket) -> list[tuple[int, float]]:
    """(sequence number, kernel transmit time) of every stamp waiting on the error queue."""
    out = []
    while True:
        try:
            _, anc, _, _ = s.recvmsg(0, 512, MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return out
        stamp = seq = None
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING:
                sec, nsec = struct.unpack("qq", data[:16])
                stamp = sec + nsec / 1e9
            elif level == socket.IPPROTO_IP and kind == IP_RECVERR:
                seq = struct.unpack("IBBBBII", data[:16])[6]      # ee_data: the OPT_ID count
        if stamp is not None and seq is not None:
            out.append((seq, stamp))


def rx_stamps(s: socket.socket) -> list[tuple[int, float]]:
    """(sequence number, kernel receive time) of every datagram waiting."""
    out = []
    while True:
        try:
            data, anc, _, _ = s.recvmsg(16, 64, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return out
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", raw[:16])
                out.append((int(data.decode()), sec + nsec / 1e9))


def run(ns_from: str | None, ns_to: str | None, dest: str, every_ms: float,
        out=sys.stdout) -> None:
    """Send until SIGTERM, one wake-up per datagram: the kernel's stamps keep their times
    however late they are read, so each wake-up sends one datagram and reads every stamp
    waiting (the last datagram's arrive by the next).  Namespaces None: both ends in the
    caller's own, the receiver on 127.0.0.1 at a port of the kernel's choosing."""
    tx = in_namespace(ns_from, sender_socket)
    rx = in_namespace(ns_to, receiver_socket if ns_to else lambda: receiver_socket(
        ("127.0.0.1", 0)))
    port = rx.getsockname()[1]
    stopping, wakes = [], []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    prefer_this_thread()
    every, seq, nxt = every_ms / 1000, 0, time.monotonic()
    while not stopping:
        tx.sendto(str(seq).encode(), (dest, port))
        seq, nxt = seq + 1, nxt + every
        _write(out, tx, rx, wakes)
        wakes.clear()
        if nxt > time.monotonic():           # a wake-up behind its schedule catches up
            time.sleep(max(0.0, nxt - time.monotonic()))
            wakes.append((time.time(), (time.monotonic() - nxt) * 1000))
    time.sleep(DRAIN_S)
    _write(out, tx, rx, wakes)
    out.flush()


def _write(out, tx, rx, wakes=()) -> None:
    lines = [f"t {q} {t:.6f}" for q, t in tx_stamps(tx)]
    lines += [f"r {q} {t:.6f}" for q, t in rx_stamps(rx)]
    lines += [f"w {t:.6f} {late:.4f}" for t, late in wakes]
    if lines:
        out.write("\n".join(lines) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m traffic.delay_probe", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("ns_from", nargs="?", help="the sender's named network namespace")
    ap.add_argument("ns_to", nargs="?", help="the receiver's named network namespace")
    ap.add_argument("dest", nargs="?", help="the receiver's IPv4 address")
    ap.add_argument("--loopback", action="store_true",
                    help="both ends on 127.0.0.1 in this namespace, no datapath crossed "
                    "(the timed wake-ups alone); no positional arguments then")
    ap.add_argument("--every-ms", type=float, default=5.0,
                    help="interval between datagrams, ms (default 5)")
    args = ap.parse_args(argv)
    given = [a for a in (args.ns_from, args.ns_to, args.dest) if a]
    if len(given) != (0 if args.loopback else 3):
        ap.error("give NS_FROM NS_TO DEST, or --loopback alone")
    if args.every_ms <= 0:
        ap.error("--every-ms must be above 0")
    if args.loopback:
        run(None, None, "127.0.0.1", args.every_ms)
    else:
        run(args.ns_from, args.ns_to, args.dest, args.every_ms)


if __name__ == "__main__":
    main()
