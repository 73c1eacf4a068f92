"""The host agent: one long-running process per emulated host (stdlib only).

It reads JSON commands, one per line, on stdin and answers each with one JSON line:

    {"op": "send", "id": "p7", "src": "10.0.1.0", "dst": "10.1.1.5", "count": 9, "sport": 40007,
     "pps": 20000}
        send ``count`` UDP probes from ``src``:``sport`` to ``dst``:9, at most ``pps`` packets
        per second (0: as fast as possible) -> {"sent": 9}
    {"op": "sendmany", "probes": [{"id": ..., "src": ..., "dst": ..., "count": 1}, ...],
     "pps": 5000}
        several sends in one command, paced -> {"sent": total}
    {"op": "counts"}     probes received so far, by probe id -> {"counts": {"p7": 9}}
    {"op": "reset"}      forget the counts -> {"ok": true}
    {"op": "quit"}

It always runs a UDP sink on port 9 (discard) that counts probes by id, so a probe causes no
reply traffic at all: the path trace sees one direction only.
"""
import json
import socket
import sys
import threading
import time

PROBE_PORT = 9
MAGIC = b"zcprobe "


class Agent:
    def __init__(self):
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.sink.bind(("0.0.0.0", PROBE_PORT))
        threading.Thread(target=self._receive, daemon=True).start()

    def _receive(self):
        while True:
            data, _ = self.sink.recvfrom(2048)
            if data.startswith(MAGIC):
                pid = data[len(MAGIC):].split(b" ", 1)[0].decode(errors="replace")
                with self.lock:
                    self.counts[pid] = self.counts.get(pid, 0) + 1

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
        if op == "counts":
            with self.lock:
                return {"counts": dict(self.counts)}
        if op == "reset":
            with self.lock:
                self.counts.clear()
            return {"ok": True}
        return {"error": f"unknown op {op!r}"}


def main():
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
