"""The sending side of the kept-open KV transport (stdlib only): connections per port pairing
opened and warmed up before the workload, transfers posted on them in order as on RDMA
queue pairs, and moved to another pairing when a path dies."""
from __future__ import annotations

import errno
import heapq
import queue
import socket
import struct
import threading
import time

from traffic.kvwire import (
    BLOCK,
    expected_digest,
    frame_json,
    payload_block,
    prefer_this_thread,
    read_frame_json,
    sending_state,
    tune,
    watch,
)

POOL_PORT = 7001
WARMUP_BYTES = 1 << 18        # per connection, before the workload clock: opens the window
STALL_S = 1.0
RETRY_S = 60.0
RETRY_PAUSE_S = 0.05
RESTART_LANE = 1 << 20       # transfers started again use lane + k * this: spare connections
SPARES = 8                   # spare connections per pairing and lane, at most


# -- the sending side --------------------------------------------------------------------------
class _Connection:
    """One kept-open connection of a pairing: a queue of transfers, sent in order."""

    def __init__(self, pool, src: str, dst: str):
        self.pool, self.src, self.dst = pool, src, dst
        self.work: queue.Queue = queue.Queue()
        self.waiting: dict = {}                       # (id, flow) -> (transfer, sent record)
        self.lock = threading.Lock()
        self.sock = None
        self.sport = 0                                # the source port asked for (0: any)
        self.claimed = 0                              # spare: transfers handed, not yet sent
        threading.Thread(target=self._send_loop, daemon=True).start()

    def _dial(self, sport: int):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tune(sock)                               # buffers before the handshake
            sock.settimeout(self.pool.stall_s)
            sock.bind((self.src, sport))
            sock.connect((self.dst, POOL_PORT))
            return sock
        except OSError:
            sock.close()
            raise

    def open(self, warmup: bool, sport: int = 0) -> bool:
        """Connect from source port ``sport`` (0: any; a port in use falls back to any,
        and the result is False); with ``warmup``, send one throw-away frame first and
        wait for its verdict, so the congestion window is open when the workload starts."""
        self.sport, moved = sport, False
        try:
            sock = self._dial(sport)
        except OSError as err:
            if not sport or err.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                raise
            sock, moved = self._dial(0), True
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                        int(self.pool.stall_s * 1000))
        if warmup:
            self._write(sock, {"id": "warmup", "flow": 0, "bytes": WARMUP_BYTES,
                               "warmup": True})
            sock.settimeout(30)
            read_frame_json(sock)
            sock.settimeout(self.pool.stall_s)
            watch(sock)
        self.sock = sock
        threading.Thread(target=self._read_loop, args=(sock,), daemon=True).start()
        return not moved

    def reset(self, why: str = "reset", move: bool = False) -> None:
        """Close the connection at once (a reset, leaving no TIME_WAIT behind) so the next
        one can use another source port; transfers still on it start again elsewhere (with
        ``move``: at once, as its pairing is known to be down, counted in ``moves``)."""
        with self.lock:
            sock, self.sock = self.sock, None
            lost, self.waiting = list(self.waiting.values()), {}
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)       # wakes the reader thread
            except OSError:
                pass
            sock.close()
        for tr, rec in lost:
            rec["moves"] += move
            self.pool.retry(tr, rec, f"{self.src}->{self.dst}: {why}", pause=not move)

    def _send_loop(self):
        while True:
            tr, rec = self.work.get()
            try:
                self._send(tr, rec)
            finally:
                if self.claimed:          # a spare's transfer (only Pool._spare hands them)
                    with self.pool.lock:
                        self.claimed -= 1

    def idle(self) -> bool:
        return not self.claimed and not self.waiting and self.work.empty()

    def _send(self, tr, rec) -> None:
        if (self.src, self.dst) in self.pool.down and self.pool.repost(tr, rec):
            return                        # its pairing went down before it was sent
        try:
            if self.sock is None:
                self.open(warmup=False)
        except OSError as err:
            self.pool.retry(tr, rec, f"{self.src}->{self.dst}: {err}")
            return
        sock, key = self.sock, (tr["id"], tr["flow"])
        rec.update(sending_state(sock))   # its congestion control's state as it starts
        rec["wire_start"] = time.time()
        with self.lock:
            self.waiting[key] = (tr, rec)
        try:
            self._write(sock, tr)
        except (OSError, ValueError) as err:
            self._broken(sock, err)

    @staticmethod
    def _write(sock, tr: dict) -> None:
        """One frame, its header and digest in the segments of its first and last bytes
        (``MSG_MORE``; else each is a packet of its own under ``TCP_NODELAY``)."""
        size = int(tr["bytes"])
        block = payload_block(tr["id"])
        sock.sendall(frame_json({"id": tr["id"], "flow": tr["flow"], "bytes": size,
                                  "attempt": tr.get("attempt", 1),
                                  "warmup": bool(tr.get("warmup"))}), socket.MSG_MORE)
        left = size
        while left > 0:
            n = min(BLOCK, left)
            piece = block if n == BLOCK else block[:n]
            if tr.get("corrupt") and left == size:
                piece = bytes([piece[0] ^ 0xFF]) + piece[1:]     # a test: flip one byte
            left -= n
            sock.sendall(piece, socket.MSG_MORE if left == 0 else 0)
        watch(sock)              # once per transfer: a syscall per block splits segments
        sock.sendall(expected_digest(tr["id"], size))

    def _read_loop(self, sock):
        try:
            while True:
                try:
                    verdict = read_frame_json(sock, idle_ok=True)
                except socket.timeout:
                    continue                # idle; a stall shows as TCP_USER_TIMEOUT
                with self.lock:
                    tr, rec = self.waiting.pop((verdict.get("id"), verdict.get("flow")),
                                               (None, None))
                if rec is not None:
                    end = time.time()
                    rec["cwnd_end"] = sending_state(sock).get("cwnd")    # and as it ended
                    self.pool.finish(rec, bool(verdict.get("ok")), end)
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
        self.down: set = set()                     # (source, destination) pairings not routed
        self.wake = threading.Condition()
        threading.Thread(target=self._timer_loop, daemon=True).start()

    def connection(self, src: str, dst: str, lane: int = 0) -> _Connection:
        with self.lock:
            return self._connection(src, dst, lane)

    def _connection(self, src: str, dst: str, lane: int) -> _Connection:
        """The connection of a pairing and lane, made if new; the caller holds the lock."""
        conn = self.conns.get((src, dst, lane))
        if conn is None:
            conn = self.conns[(src, dst, lane)] = _Connection(self, src, dst)
        return conn

    def connect(self, pairings, warmup: bool = True, ports=None) -> tuple[dict, int]:
        """Open (and warm up) a connection per pairing (``(source, destination)``, or with a
        lane ``(source, destination, lane)``), in parallel; ``ports`` (one per
        pairing) are their source ports, and an open connection from another port is
        replaced; without them an open connection is kept.  What failed, and how many
        connections could not have the port asked for."""
        errors, moved, threads = {}, [], []

        def one(src, dst, lane, sport):
            try:
                conn = self.connection(src, dst, lane)
                if sport and conn.sock is not None and conn.sport != sport:
                    conn.reset()
                if conn.sock is None and not conn.open(warmup, sport):
                    moved.append((src, dst))
            except OSError as err:
                errors[f"{src}->{dst}"] = str(err)
        for (src, dst, *lane), sport in zip(pairings, ports or [0] * len(pairings)):
            threads.append(threading.Thread(target=one, args=(src, dst, int(lane[0]) if lane
                                                              else 0, int(sport)),
                                            daemon=True))
            threads[-1].start()
        for t in threads:
            t.join()
        return errors, len(moved)

    def schedule(self, jobs) -> None:
        with self.wake:
            for job in jobs:
                heapq.heappush(self.timer, (float(job.get("at", 0)), job["id"], job))
            self.wake.notify()

    def _timer_loop(self):
        prefer_this_thread()
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
                  "lane": int(flow.get("lane", 0)),
                  "corrupt": job.get("corrupt", False),
                  "candidates": [(flow["src"], flow["dst"])]
                  + [tuple(a) for a in flow.get("alternates", [])],
                  "deadline": now + float(job.get("retry_s", RETRY_S))}
            idx = self.usable(tr, 0)
            tr["idx"] = 0 if idx is None else idx
            src, dst = tr["candidates"][tr["idx"]]
            rec = {"id": job["id"], "flow": k, "src_ip": src, "dst_ip": dst,
                   "bytes": tr["bytes"], "ok": False, "attempts": 1, "errors": [],
                   "at": float(job.get("at", now)), "start": now,
                   "avoided": tr["idx"] != 0, "moves": 0}
            self.connection(src, dst, tr["lane"]).work.put((tr, rec))

    def usable(self, tr, start: int) -> int | None:
        """Index of the first of ``tr``'s candidate pairings, from ``start`` on (wrapping
        round), that is not down; None when every one is."""
        cands = tr["candidates"]
        for i in range(len(cands)):
            j = (start + i) % len(cands)
            if cands[j] not in self.down:
                return j
        return None

    def set_down(self, pairings) -> int:
        """From now on ``pairings`` (``(source, destination)``) are down and every other is
        up: transfers on a connection of a pairing that just went down move to their next
        pairing that is up at once, as a NIC driver knows its dead link, without waiting for
        TCP to notice.  How many connections moved."""
        new = {tuple(p) for p in pairings}
        with self.lock:
            gone = new - self.down
            self.down = new
            conns = [c for (s, d, _), c in self.conns.items() if (s, d) in gone]
        for conn in conns:
            conn.reset("its pairing went down", move=True)
        return len(conns)

    def repost(self, tr, rec) -> bool:
        """Put a transfer not sent yet on its next pairing that is up (False: none is)."""
        idx = self.usable(tr, tr["idx"] + 1)
        if idx is None:
            return False
        tr["idx"] = idx
        src, dst = tr["candidates"][idx]
        rec["src_ip"], rec["dst_ip"] = src, dst
        rec["moves"] += 1
        self.connection(src, dst, tr.get("lane", 0)).work.put((tr, rec))
        return True

    def finish(self, rec, ok: bool, end: float) -> None:
        rec.update(ok=ok, end=end, errors=rec["errors"][-4:])
        rec.pop("error", None)
        self.record(rec)

    def retry(self, tr, rec, error: str, pause: bool = True) -> None:
        """Start a failed transfer again from its first byte over its next pairing that is
        up (or its next one, when none is), after a short pause unless ``pause`` is off."""
        rec["errors"].append(error)
        rec["error"] = error
        if time.time() > tr["deadline"]:
            rec.update(ok=False, end=time.time(), errors=rec["errors"][-4:])
            self.record(rec)
            return
        idx = self.usable(tr, tr["idx"] + 1)
        tr["idx"] = (tr["idx"] + 1) % len(tr["candidates"]) if idx is None else idx
        src, dst = tr["candidates"][tr["idx"]]
        rec["attempts"] += 1
        tr["attempt"] = rec["attempts"]
        rec["src_ip"], rec["dst_ip"] = src, dst
        if pause:
            time.sleep(RETRY_PAUSE_S)
        self._spare(src, dst, tr.get("lane", 0), (tr, rec))

    def _spare(self, src: str, dst: str, lane: int, item) -> None:
        """Hand a transfer started again to an idle spare connection of its pairing and lane
        (opened when first needed), as a spare queue pair: not behind the transfers queued
        on that pairing, nor behind the other transfers moved with it, which would hold its
        restart up by their length; with ``SPARES`` busy, to the one with least in flight."""
        with self.lock:
            spares = []
            for k in range(1, SPARES + 1):
                conn = self._connection(src, dst, lane + k * RESTART_LANE)
                if conn.idle():
                    break
                spares.append(conn)
            else:
                conn = min(spares, key=lambda c: c.claimed + len(c.waiting))
            conn.claimed += 1
            conn.work.put(item)
