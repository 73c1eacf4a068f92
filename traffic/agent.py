"""The host agent: one process per emulated host (stdlib only) that sends and receives probes
and KV transfers as the testbed tells it in JSON lines (:meth:`Agent.handle`); every
transfer is checked by its receiver, byte count and digest."""
import hashlib
import json
import socket
import sys
import threading
import time

from traffic.kvpool import Pool
from traffic.kvreceiver import PoolReceiver
from traffic.kvwire import BLOCK as CHUNK
from traffic.kvwire import payload_block, serve_tcp, set_congestion, watch

PROBE_PORT = 9          # discard: probes are counted by id, never answered (one-way traces)
MAGIC = b"zcprobe "
KV_PORT = 7000
STALL_S = 1.0          # the handshake's bound, and the stall bound until an RTT is measured
ANSWER_S = 60.0        # the receiver's verdict after the last byte
RETRY_S = 60.0         # give up on a flow this long after its start
RETRY_PAUSE_S = 0.2


def _read_line(conn) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        b = conn.recv(1)
        if not b:
            break
        buf += b
    return buf


class Agent:
    def __init__(self):
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.sink.bind(("0.0.0.0", PROBE_PORT))
        threading.Thread(target=self._receive, daemon=True).start()
        self._start_kv()
        self.pool_rx = PoolReceiver(self._keep("received"))
        self.pool = Pool(self._keep("sent"))

    def _keep(self, kind: str):
        def keep(rec):
            with self.lock:
                getattr(self, kind).append(rec)
        return keep

    def _receive(self):
        while True:
            data, _ = self.sink.recvfrom(2048)
            if data.startswith(MAGIC):
                pid = data[len(MAGIC):].split(b" ", 1)[0].decode(errors="replace")
                with self.lock:
                    self.counts[pid] = self.counts.get(pid, 0) + 1

    # -- KV transfers ---------------------------------------------------------------------
    def _start_kv(self):
        self.sent: list = []
        self.received: list = []
        serve_tcp(KV_PORT, self._receive_kv)

    def _receive_kv(self, conn, addr):
        rec = {"src_ip": addr[0], "dst_ip": conn.getsockname()[0], "bytes": 0, "verified": False}
        try:
            head = json.loads(_read_line(conn) or b"{}")
            rec.update(id=head.get("id"), flow=head.get("flow"), expected=head.get("bytes", 0),
                       attempt=head.get("attempt", 1))
            want, digest, first = int(head.get("bytes", 0)), hashlib.sha256(), None
            while rec["bytes"] < want:
                data = conn.recv(min(CHUNK, want - rec["bytes"]))
                if not data:
                    break
                if first is None:
                    first = time.time()
                digest.update(data)
                rec["bytes"] += len(data)
            trailer = _read_line(conn).strip().decode(errors="replace")
            rec["end"] = time.time()
            rec["first_byte"] = first if first is not None else rec["end"]
            rec["verified"] = rec["bytes"] == want and trailer == digest.hexdigest()
            rec["status"] = ("ok" if rec["verified"] else
                             "short" if rec["bytes"] < want else "corrupt")
            reply = {"ok": rec["verified"], "bytes": rec["bytes"]}
            conn.sendall((json.dumps(reply) + "\n").encode())
        except (OSError, ValueError) as err:
            rec["status"] = f"error: {err}"
        finally:
            conn.close()
            with self.lock:
                self.received.append(rec)

    def _send_flow(self, job, k, flow):
        """Send one flow; when its connection fails (a dead port or path: no progress within
        the stall bound, :func:`traffic.kvwire.watch`), start it again from the first byte
        over the next address pair in ``[primary] + flow["alternates"]``, until ``RETRY_S``
        has passed."""
        candidates = [(flow["src"], flow["dst"])] + [tuple(a) for a in flow.get("alternates", [])]
        candidates = ([c for c in candidates if c not in self.pool.down]
                      or candidates)               # the pairings up first, as the pool does
        rec = {"id": job["id"], "flow": k, "src_ip": flow["src"], "dst_ip": flow["dst"],
               "bytes": int(flow["bytes"]), "ok": False, "attempts": 0, "errors": []}
        rec["start"] = time.time()
        deadline = rec["start"] + float(job.get("retry_s", RETRY_S))
        while True:
            src, dst = candidates[rec["attempts"] % len(candidates)]
            rec["attempts"] += 1
            try:
                answer = self._attempt(job, k, rec["bytes"], src, dst, rec["attempts"])
                rec["ok"] = bool(answer.get("ok"))
                rec["src_ip"], rec["dst_ip"] = src, dst
                rec.pop("error", None)
                break
            except (OSError, ValueError) as err:
                rec["error"] = str(err)
                rec["errors"].append(f"{src}->{dst}: {err}")
                if time.time() > deadline:
                    break
                time.sleep(RETRY_PAUSE_S)
        rec["end"] = time.time()
        rec["errors"] = rec["errors"][-4:]
        with self.lock:
            self.sent.append(rec)

    def _attempt(self, job, k, size, src, dst, attempt) -> dict:
        block = payload_block(job["id"])
        digest = hashlib.sha256()
        with socket.create_connection((dst, KV_PORT), timeout=STALL_S,
                                      source_address=(src, 0)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(STALL_S * 1000))
            set_congestion(s)
            s.sendall((json.dumps({"id": job["id"], "flow": k, "bytes": size,
                                   "attempt": attempt}) + "\n").encode())
            left = size
            while left > 0:
                piece = block[:min(CHUNK, left)]
                digest.update(piece)
                if job.get("corrupt") and left == size:
                    piece = bytes([piece[0] ^ 0xFF]) + piece[1:]   # a test: flip one byte
                s.sendall(piece)
                left -= len(piece)
            watch(s)                         # the pool's stall bound: RTO + 2 RTT
            s.sendall((digest.hexdigest() + "\n").encode())
            s.settimeout(ANSWER_S)
            return json.loads(_read_line(s) or b"{}")

    def _run_job(self, job):
        delay = float(job.get("at", 0)) - time.time()
        if delay > 0:
            time.sleep(delay)
        threads = [threading.Thread(target=self._send_flow, args=(job, k, f), daemon=True)
                   for k, f in enumerate(job["flows"])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def send(self, cmd):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((cmd["src"], int(cmd.get("sport", 0))))
            payload = MAGIC + cmd["id"].encode() + b" "
            pps = float(cmd.get("pps", 0))          # pace: a burst must not overrun a switch
            start = time.monotonic()
            for seq in range(int(cmd["count"])):
                s.sendto(payload + str(seq).encode(), (cmd["dst"], PROBE_PORT))
                if pps and seq % 8 == 7:
                    ahead = start + (seq + 1) / pps - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
        finally:
            s.close()
        return {"sent": int(cmd["count"])}

    def handle(self, cmd):
        """Answer one command (a JSON line) with one JSON line:

        * ``send`` (``id, src, dst, count, sport, pps``): UDP probes to ``dst``:9 at most
          ``pps`` a second -> ``{"sent"}``; ``sendmany`` (``probes``, ``pps``): several;
        * ``counts`` / ``reset``: the probes received so far by id, or forget them;
        * ``schedule`` (``jobs``, ``transport``): each job's flows sent at wall-clock ``at``,
          posted on kept-open connections (``pool``) or one new connection each, a flow whose
          connection dies starting again over its ``alternates`` -> ``{"scheduled"}``;
        * ``connect`` (``pairings``, ``warmup``, ``ports``): open and warm up the kept-open
          connection of each pairing -> ``{"errors", "moved"}``;
        * ``down`` (``pairings``): these have no route from now on (:meth:`Pool.set_down`);
        * ``progress`` / ``results``: how many sender records, or every record; ``quit``."""
        op = cmd.get("op")
        if op == "send":
            return self.send(cmd)
        if op == "sendmany":
            pps, sent = float(cmd.get("pps", 0)), 0
            for p in cmd["probes"]:
                sent += self.send(p)["sent"]
                if pps:
                    time.sleep(int(p["count"]) / pps)
            return {"sent": sent}
        if op == "schedule":
            if cmd.get("transport") == "pool":
                self.pool.schedule(cmd["jobs"])
                return {"scheduled": len(cmd["jobs"])}
            for job in cmd["jobs"]:
                threading.Thread(target=self._run_job, args=(job,), daemon=True).start()
            return {"scheduled": len(cmd["jobs"])}
        if op == "connect":
            errors, moved = self.pool.connect([tuple(p) for p in cmd["pairings"]],
                                              bool(cmd.get("warmup", True)), cmd.get("ports"))
            return {"errors": errors, "moved": moved}
        if op == "down":
            return {"moved": self.pool.set_down(cmd["pairings"])}
        if op == "progress":
            with self.lock:
                return {"sent": len(self.sent)}
        if op == "results":
            with self.lock:
                return {"sent": list(self.sent), "received": list(self.received)}
        if op == "counts":
            with self.lock:
                return {"counts": dict(self.counts)}
        if op == "reset":
            with self.lock:
                self.counts.clear()
                self.sent.clear()
                self.received.clear()
            return {"ok": True}
        return {"error": f"unknown op {op!r}"}


def main():
    # hand the interpreter lock over within 0.5 ms (Python's default is 5 ms), so the timer
    # loop that starts transfers wakes on time while receiver threads are busy
    sys.setswitchinterval(0.0005)
    agent = Agent()
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
            if cmd.get("op") == "quit":
                break
            reply = agent.handle(cmd)
        except Exception as err:  # report, keep serving
            reply = {"error": f"{type(err).__name__}: {err}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
