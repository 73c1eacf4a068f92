"""The KV transports' wire format and sockets (stdlib only): a transfer's frame and verdict,
the payload both ends recompute and its digest, the listener, and the socket settings both
ends share."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import threading
import time

BLOCK = 1 << 16
SOCKET_BUFFER = 4 << 20
# One congestion control for every KV connection whatever the machine's default, set by the
# testbed from the scenario's ``emulation.tcp_cc``: CUBIC by default, as BBR's PROBE_RTT holds
# a window at 4 segments, which no RDMA queue pair does (docs/fidelity.md, "Congestion control").
CONGESTION = os.environ.get("ZCUBE_TCP_CC") or "cubic"
FALLBACK = "reno"
LENGTH = struct.Struct(">I")


def payload_block(job_id: str) -> bytes:
    """The 64 KiB block both ends can recompute; payloads repeat it."""
    seed = hashlib.sha256(job_id.encode()).digest()
    return (seed * (BLOCK // len(seed) + 1))[:BLOCK]


def expected_digest(job_id: str, size: int) -> bytes:
    """The digest of a ``size``-byte payload of ``job_id`` without hashing all of it."""
    block = payload_block(job_id)
    whole = hashlib.sha256(block).digest()
    full, rest = divmod(size, BLOCK)
    outer = hashlib.sha256(whole * full)
    if rest:
        outer.update(hashlib.sha256(block[:rest]).digest())
    return outer.digest()


def recv_exact(conn, view: memoryview, idle_ok: bool = False) -> float | None:
    """Fill ``view`` from ``conn``; the time its first bytes came (None for an empty view).
    A socket timeout before the first byte is raised when ``idle_ok`` (the caller is only
    waiting); once a frame has begun, it is waited out."""
    got, first = 0, None
    while got < len(view):
        try:
            n = conn.recv_into(view[got:])
        except socket.timeout:
            if idle_ok and got == 0:
                raise
            continue
        if n == 0:
            raise ConnectionError("connection closed")
        if first is None:
            first = time.time()
        got += n
    return first


def read_frame_json(conn, idle_ok: bool = False) -> dict:
    head = bytearray(LENGTH.size)
    recv_exact(conn, memoryview(head), idle_ok)
    (n,) = LENGTH.unpack(head)
    body = bytearray(n)
    recv_exact(conn, memoryview(body))
    return json.loads(body)


def frame_json(doc: dict) -> bytes:
    body = json.dumps(doc, separators=(",", ":")).encode()
    return LENGTH.pack(len(body)) + body


def tune(sock) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
    set_congestion(sock)


def set_congestion(sock, wanted: str | None = None) -> None:
    """Run ``sock`` on ``wanted`` (default :data:`CONGESTION`), else :data:`FALLBACK`, else
    the default."""
    for name in (wanted or CONGESTION, FALLBACK):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
            return
        except OSError:
            continue


def congestion_in_use(wanted: str | None = None) -> str | None:
    """The congestion control :func:`set_congestion` gets here for ``wanted`` (None: no
    TCP_CONGESTION)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            set_congestion(sock, wanted)
            raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
    except OSError:
        return None
    return raw.split(b"\0", 1)[0].decode() or None


def serve_tcp(port: int, handle, tune=None) -> None:
    """Listen on ``port`` (every address) and run ``handle(conn, addr)`` in a thread of its
    own for each connection accepted; ``tune(sock)`` is applied to the listening socket
    first (accepted sockets inherit its buffer sizes)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if tune:
        tune(srv)
    srv.bind(("0.0.0.0", port))
    srv.listen(256)

    def accept():
        while True:
            conn, addr = srv.accept()
            threading.Thread(target=handle, args=(conn, addr), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()


_TCP_INFO = struct.Struct("8B17I")     # struct tcp_info up to tcpi_rttvar (Linux, stable ABI)


def stall_ms(info: bytes) -> int | None:
    """The user timeout (ms) for a kept-open connection, so a dead path is left soon after
    its last segment while one slow under load is not, from its ``TCP_INFO`` ``info``: its
    retransmission timeout plus twice its smoothed RTT and four times the RTT's variation;
    None before an RTT is measured, and while the connection is backing off after a timeout
    (its RTO then doubles each time: following it, the bound would never be reached)."""
    if len(info) < _TCP_INFO.size:
        return None
    fields = _TCP_INFO.unpack_from(info)
    retransmits, backoff = fields[2], fields[4]
    rto_us, rtt_us, rttvar_us = fields[8], fields[8 + 15], fields[8 + 16]
    if not rtt_us or retransmits or backoff:
        return None
    return -(-(rto_us + 2 * rtt_us + 4 * rttvar_us) // 1000)


_SENDING = struct.Struct("8B24IQ")    # ... up to tcpi_pacing_rate (bytes/s)


def sending_state(sock) -> dict:
    """What ``sock``'s congestion control holds now: its window (``cwnd``, segments) and
    the rate it paces at (``pacing_mbps``; under BBR its bandwidth estimate times its gain), {}
    where the kernel does not say."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    except OSError:
        return {}
    if len(info) < _SENDING.size:
        return {}
    fields = _SENDING.unpack_from(info)
    return {"cwnd": fields[8 + 18], "pacing_mbps": round(fields[8 + 24] * 8 / 1e6, 3)}


def watch(sock) -> None:
    """Set ``sock``'s user timeout from its own RTO and RTT (:func:`stall_ms`)."""
    try:
        ms = stall_ms(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256))
        if ms:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, ms)
    except OSError:
        pass                                          # closed meanwhile


def prefer_this_thread() -> None:
    """Run the calling thread under the real-time FIFO policy at a low priority, so it
    preempts the datapath and other agents the moment its timer fires (it only posts work
    and sleeps again); left as it is where that is not allowed.  The agents' timer
    threads and the datapath probe's wake-ups run under it alike, so the probe's wake-up
    lateness is what the machine gives the agents' timers."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (AttributeError, OSError):
        pass
