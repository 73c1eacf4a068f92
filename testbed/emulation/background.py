"""iperf3 background traffic beside the KV transfers: each host offers ``mbps`` split over
its destinations in a traffic matrix, one rate-limited TCP flow per pair."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter

from controller.pairings import flows_for
from traffic.matrix import matrix

BASE_PORT = 5400
MAX_FLOWS = 256


class Background:
    def __init__(self, emu, pattern: str, mbps: float, seconds: float, seed: int = 0):
        pairs = [(s, d) for s, d, _ in matrix(pattern, emu.fabric, seed)]
        if len(pairs) > MAX_FLOWS:
            raise ValueError(f"--background {pattern} needs {len(pairs)} iperf3 flows; at most "
                             f"{MAX_FLOWS} (use permutation)")
        fan_out = Counter(s for s, _ in pairs)
        self.emu, self.seconds = emu, seconds
        self.flows = [(s, d, flows_for(emu.table, s, d, 1)[0], mbps / fan_out[s])
                      for s, d in pairs]
        self.procs: list = []
        self.clients: list = []

    def __enter__(self):
        emu = self.emu
        for k, (_, d, _, _) in enumerate(self.flows):
            p = emu.popen(d, ["iperf3", "-s", "-1", "-p", str(BASE_PORT + k)],
                          "iperf3 background server",
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(p)
        time.sleep(0.5)
        for k, (s, _, f, rate) in enumerate(self.flows):
            p = emu.popen(s, ["iperf3", "-c", f["dst"], "-B", f["src"], "-p",
                              str(BASE_PORT + k), "-b", f"{rate:.3f}M", "-t",
                              str(int(self.seconds) + 1), "-J"], "iperf3 background client",
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          errors="replace")
            self.clients.append(p)
        self.procs += self.clients
        return self

    def __exit__(self, *exc):
        self.achieved_mbps = 0.0
        for p in self.clients:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)          # iperf3 still prints its JSON summary
        for p in self.clients:
            try:
                out, _ = p.communicate(timeout=10)
                end = json.loads(out)["end"]
                # interrupted clients have no receiver figures: count what they sent
                self.achieved_mbps += max(end.get(k, {}).get("bits_per_second", 0.0)
                                          for k in ("sum_received", "sum_sent")) / 1e6
            except (ValueError, KeyError, subprocess.TimeoutExpired):
                pass
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        return False

    @property
    def offered_mbps(self) -> float:
        return sum(rate for *_, rate in self.flows)
