"""The receiving side of the kept-open KV transport (:mod:`traffic.kvpool`; stdlib only): every
frame is checked, byte count and digest, and answered with its verdict."""
from __future__ import annotations

import hashlib
import time

from traffic.kvpool import POOL_PORT
from traffic.kvwire import BLOCK, frame_json, read_frame_json, recv_exact, serve_tcp, tune


class PoolReceiver:
    """Accepts kept-open connections and verifies every frame on them."""

    def __init__(self, record):
        self.record = record                       # called with each receiver record
        serve_tcp(POOL_PORT, self._serve, tune)

    def _serve(self, conn, addr):
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        try:
            while True:
                head = read_frame_json(conn)
                rec = self._receive(conn, head, view, addr)
                if not head.get("warmup"):
                    self.record(rec)
                conn.sendall(frame_json({"id": head.get("id"), "flow": head.get("flow"),
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
        outer, first, last, gap, gap_end = hashlib.sha256(), None, None, 0.0, None
        while rec["bytes"] < want:
            n = min(BLOCK, want - rec["bytes"])
            came = recv_exact(conn, view[:n])
            now = time.time()
            if first is None:
                first = came          # the frame's first payload bytes, not its first block's
            elif now - last > gap:           # the longest wait between two blocks, and when
                gap, gap_end = now - last, now      # it ended: a stall and its recovery
            last = now
            outer.update(hashlib.sha256(view[:n]).digest())
            rec["bytes"] += n
        rec["gap_s"], rec["gap_end"] = gap, gap_end
        trailer = bytearray(32)
        recv_exact(conn, memoryview(trailer))
        rec["end"] = time.time()
        rec["first_byte"] = first if first is not None else rec["end"]
        rec["verified"] = bytes(trailer) == outer.digest()
        rec["status"] = "ok" if rec["verified"] else "corrupt"
        return rec
