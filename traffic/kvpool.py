"""The KV transport of kept-open connections, as RDMA queue pairs are (stdlib only).

Real KV engines (Mooncake Transfer Engine, NIXL over UCX) set queue pairs up once and post
each transfer on them, so a transfer starts at line rate with no handshake.  This module
does the same with TCP: before the workload clock starts, the agent opens ``conns`` TCP
connections per (source address, destination address) port pairing it will use
(``TCP_NODELAY``, large socket buffers) and warms each one up so its congestion window is
open; the hosts run with ``net.ipv4.tcp_slow_start_after_idle=0`` so it stays open.  Each
connection has one sender thread that takes transfers off its queue in order, as a queue
pair processes its work requests, and one reader thread for the receiver's verdicts.

On the wire a transfer is a frame: a 4-byte big-endian header length, the JSON header
(``id``, ``flow``, ``bytes``, ``attempt``), the payload, and a 32-byte digest.  The payload
repeats one 64 KiB block derived from the transfer's id; the digest is the SHA-256 of the
SHA-256 of each 64 KiB piece in order, so the sender hashes its block once and reuses it,
and the receiver hashes what it actually received, piece by piece.  The receiver answers
every frame with a 4-byte length and a JSON verdict (``id``, ``flow``, ``ok``, ``bytes``);
the sender's end time is when that verdict arrived (the receiver had every byte).

A connection that fails (an error, or no progress for ``stall_s``) is closed; its transfer
and those queued behind it start again from their first byte over the next pairing in
their alternates, on that pairing's connection (opened when first needed), until
``retry_s`` after their start.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import os
import queue
import socket
import struct
import threading
import time

POOL_PORT = 7001
BLOCK = 1 << 16
SOCKET_BUFFER = 4 << 20
WARMUP_BYTES = 1 << 18        # per connection, before the workload clock: opens the window
STALL_S = 1.0
RETRY_S = 60.0
RETRY_PAUSE_S = 0.05
_LEN = struct.Struct(">I")


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


def _recv_exact(conn, view: memoryview, idle_ok: bool = False) -> None:
    """Fill ``view`` from ``conn``.  A socket timeout before the first byte is raised when
    ``idle_ok`` (the caller is only waiting); once a frame has begun, it is waited out."""
    got = 0
    while got < len(view):
        try:
            n = conn.recv_into(view[got:])
        except socket.timeout:
            if idle_ok and got == 0:
                raise
            continue
        if n == 0:
            raise ConnectionError("connection closed")
        got += n


def _read_frame_json(conn, idle_ok: bool = False) -> dict:
    head = bytearray(_LEN.size)
    _recv_exact(conn, memoryview(head), idle_ok)
    (n,) = _LEN.unpack(head)
    body = bytearray(n)
    _recv_exact(conn, memoryview(body))
    return json.loads(body)


def _frame_json(doc: dict) -> bytes:
    body = json.dumps(doc, separators=(",", ":")).encode()
    return _LEN.pack(len(body)) + body


def _tune(sock) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)


def _prefer_this_thread() -> None:
    """Run the calling thread under the real-time FIFO policy at a low priority, so it
    preempts the datapath and other agents the moment its timer fires (it only posts work
    and sleeps again); left as it is where that is not allowed, or when
    ``$ZCUBE_AGENT_REALTIME`` is ``0`` (to measure what it changes)."""
    if os.environ.get("ZCUBE_AGENT_REALTIME") == "0":
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (AttributeError, OSError):
        pass


# -- the receiving side ------------------------------------------------------------------------
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


class PoolReceiver:
    """Accepts kept-open connections and verifies every frame on them."""

    def __init__(self, record):
        self.record = record                       # called with each receiver record
        serve_tcp(POOL_PORT, self._serve, _tune)

    def _serve(self, conn, addr):
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        try:
            while True:
                head = _read_frame_json(conn)
                rec = self._receive(conn, head, view, addr)
                if not head.get("warmup"):
                    self.record(rec)
                conn.sendall(_frame_json({"id": head.get("id"), "flow": head.get("flow"),
                                          "ok": rec["verified"], "bytes": rec["bytes"]}))
        except (OSError, ValueError):
            pass
        finally:
            conn.close()

    @staticmethod
    def _receive(conn, head, view, addr) -> dict:
        want = int(head.get("bytes", 0))
        rec = {"id": head.get("id"), "flow": head.get("flow"), "attempt": head.get("attempt", 1),
               "src_ip": addr[0], "dst_ip": conn.getsockname()[0], "expected": want,
               "bytes": 0, "verified": False}
        outer, first = hashlib.sha256(), None
        while rec["bytes"] < want:
            n = min(BLOCK, want - rec["bytes"])
            _recv_exact(conn, view[:n])
            if first is None:
                first = time.time()
            outer.update(hashlib.sha256(view[:n]).digest())
            rec["bytes"] += n
        trailer = bytearray(32)
        _recv_exact(conn, memoryview(trailer))
        rec["end"] = time.time()
        rec["first_byte"] = first if first is not None else rec["end"]
        rec["verified"] = bytes(trailer) == outer.digest()
        rec["status"] = "ok" if rec["verified"] else "corrupt"
        return rec


# -- the sending side --------------------------------------------------------------------------
class _Connection:
    """One kept-open connection of a pairing: a queue of transfers, sent in order."""

    def __init__(self, pool, src: str, dst: str):
        self.pool, self.src, self.dst = pool, src, dst
        self.work: queue.Queue = queue.Queue()
        self.waiting: dict = {}                       # (id, flow) -> (transfer, sent record)
        self.lock = threading.Lock()
        self.sock = None
        threading.Thread(target=self._send_loop, daemon=True).start()

    def open(self, warmup: bool) -> None:
        """Connect; with ``warmup``, send one throw-away frame first and wait for its
        verdict, so the congestion window is open when the workload starts."""
        sock = socket.create_connection((self.dst, POOL_PORT), timeout=self.pool.stall_s,
                                        source_address=(self.src, 0))
        _tune(sock)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                        int(self.pool.stall_s * 1000))
        if warmup:
            self._write(sock, {"id": "warmup", "flow": 0, "bytes": WARMUP_BYTES,
                               "warmup": True})
            sock.settimeout(30)
            _read_frame_json(sock)
            sock.settimeout(self.pool.stall_s)
        self.sock = sock
        threading.Thread(target=self._read_loop, args=(sock,), daemon=True).start()

    def _send_loop(self):
        while True:
            tr, rec = self.work.get()
            try:
                if self.sock is None:
                    self.open(warmup=False)
            except OSError as err:
                self.pool.retry(tr, rec, f"{self.src}->{self.dst}: {err}")
                continue
            sock, key = self.sock, (tr["id"], tr["flow"])
            rec["wire_start"] = time.time()
            with self.lock:
                self.waiting[key] = (tr, rec)
            try:
                self._write(sock, tr)
            except (OSError, ValueError) as err:
                self._broken(sock, err)

    @staticmethod
    def _write(sock, tr: dict) -> None:
        size = int(tr["bytes"])
        block = payload_block(tr["id"])
        sock.sendall(_frame_json({"id": tr["id"], "flow": tr["flow"], "bytes": size,
                                  "attempt": tr.get("attempt", 1),
                                  "warmup": bool(tr.get("warmup"))}))
        left = size
        while left > 0:
            n = min(BLOCK, left)
            piece = block if n == BLOCK else block[:n]
            if tr.get("corrupt") and left == size:
                piece = bytes([piece[0] ^ 0xFF]) + piece[1:]     # a test: flip one byte
            sock.sendall(piece)
            left -= n
        sock.sendall(expected_digest(tr["id"], size))

    def _read_loop(self, sock):
        try:
            while True:
                try:
                    verdict = _read_frame_json(sock, idle_ok=True)
                except socket.timeout:
                    continue                # idle; a stall shows as TCP_USER_TIMEOUT
                with self.lock:
                    tr, rec = self.waiting.pop((verdict.get("id"), verdict.get("flow")),
                                               (None, None))
                if rec is not None:
                    self.pool.finish(rec, bool(verdict.get("ok")), time.time())
        except (OSError, ValueError) as err:
            self._broken(sock, err)

    def _broken(self, sock, err) -> None:
        """The connection died: every transfer in flight on it starts again elsewhere
        (once: whichever thread notices first hands them on)."""
        with self.lock:
            if self.sock is not sock:
                return
            self.sock = None
            lost, self.waiting = list(self.waiting.values()), {}
        try:
            sock.close()
        except OSError:
            pass
        for tr, rec in lost:
            self.pool.retry(tr, rec, f"{self.src}->{self.dst}: {err}")


class Pool:
    """Kept-open connections per pairing, and the one timer loop that posts transfers on
    them at their planned times."""

    def __init__(self, record, stall_s: float = STALL_S):
        self.record = record                       # called with each finished sender record
        self.stall_s = stall_s
        self.conns: dict = {}
        self.lock = threading.Lock()
        self.timer: list = []
        self.wake = threading.Condition()
        threading.Thread(target=self._timer_loop, daemon=True).start()

    def connection(self, src: str, dst: str) -> _Connection:
        with self.lock:
            conn = self.conns.get((src, dst))
            if conn is None:
                conn = self.conns[(src, dst)] = _Connection(self, src, dst)
            return conn

    def connect(self, pairings, warmup: bool = True) -> dict:
        """Open (and warm up) a connection per pairing, in parallel; what failed."""
        errors, threads = {}, []

        def one(src, dst):
            try:
                conn = self.connection(src, dst)
                if conn.sock is None:
                    conn.open(warmup)
            except OSError as err:
                errors[f"{src}->{dst}"] = str(err)
        for src, dst in pairings:
            threads.append(threading.Thread(target=one, args=(src, dst), daemon=True))
            threads[-1].start()
        for t in threads:
            t.join()
        return errors

    def schedule(self, jobs) -> None:
        with self.wake:
            for job in jobs:
                heapq.heappush(self.timer, (float(job.get("at", 0)), job["id"], job))
            self.wake.notify()

    def _timer_loop(self):
        _prefer_this_thread()
        while True:
            with self.wake:
                while not self.timer or self.timer[0][0] > time.time():
                    self.wake.wait(None if not self.timer else self.timer[0][0] - time.time())
                _, _, job = heapq.heappop(self.timer)
            self._post(job)

    def _post(self, job) -> None:
        now = time.time()
        for k, flow in enumerate(job["flows"]):
            tr = {"id": job["id"], "flow": k, "bytes": int(flow["bytes"]), "attempt": 1,
                  "corrupt": job.get("corrupt", False),
                  "candidates": [(flow["src"], flow["dst"])]
                  + [tuple(a) for a in flow.get("alternates", [])],
                  "deadline": now + float(job.get("retry_s", RETRY_S))}
            rec = {"id": job["id"], "flow": k, "src_ip": flow["src"], "dst_ip": flow["dst"],
                   "bytes": tr["bytes"], "ok": False, "attempts": 1, "errors": [],
                   "at": float(job.get("at", now)), "start": now}
            self.connection(flow["src"], flow["dst"]).work.put((tr, rec))

    def finish(self, rec, ok: bool, end: float) -> None:
        rec.update(ok=ok, end=end, errors=rec["errors"][-4:])
        rec.pop("error", None)
        self.record(rec)

    def retry(self, tr, rec, error: str) -> None:
        """Start a failed transfer again from its first byte over its next pairing."""
        rec["errors"].append(error)
        rec["error"] = error
        if time.time() > tr["deadline"]:
            rec.update(ok=False, end=time.time(), errors=rec["errors"][-4:])
            self.record(rec)
            return
        src, dst = tr["candidates"][rec["attempts"] % len(tr["candidates"])]
        rec["attempts"] += 1
        tr["attempt"] = rec["attempts"]
        rec["src_ip"], rec["dst_ip"] = src, dst
        time.sleep(RETRY_PAUSE_S)
        self.connection(src, dst).work.put((tr, rec))
