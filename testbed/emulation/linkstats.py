"""Link utilisation over time, from the datapath's port counters (``links.csv``).

A sampler thread reads every port's byte counters once per interval (one ``ovs-appctl
dpctl/show -s`` call) and turns them into the bytes each directed link carried: a switch's
TX toward its neighbour, or, for a host's uplink, the switch's RX from the host.
"""
from __future__ import annotations

import csv
import os
import threading
import time

from controller.verify import jain
from testbed.core.rows import LINK_FIELDS

FIELDS = LINK_FIELDS


class LinkSampler:
    def __init__(self, emu, interval_s: float = 0.5, t0: float | None = None):
        self.emu = emu
        self.interval = interval_s
        self.t0 = t0 if t0 is not None else time.time()
        fab = emu.fabric
        scale = fab.scale_for(emu.link_mbps)
        self.capacity: dict[tuple, float] = {}             # directed hop -> Mb/s
        for l in fab.links:
            for hop in ((l.a, l.b), (l.b, l.a)):
                self.capacity[hop] = self.capacity.get(hop, 0.0) + l.gbps * 1000.0 * scale
        self.rows: list[dict] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False

    def _read(self) -> dict:
        counters = self.emu.port_counters("bytes")
        return {hop: self.emu.hop_counter(counters, *hop) for hop in self.capacity}

    def _run(self):
        try:
            self._sample()
        except Exception as err:  # a sampler must never take the run down; say why it stopped
            self.error = f"{type(err).__name__}: {err}"

    def _sample(self):
        last, last_t = self._read(), time.time()
        while True:
            stopping = self._stop.wait(self.interval)
            now, now_t = self._read(), time.time()      # on stop: the last partial interval
            dt = now_t - last_t
            for hop, cap in self.capacity.items():
                b = now[hop] - last[hop]
                mbps = b * 8 / dt / 1e6
                self.rows.append({"t_s": round(now_t - self.t0, 3), "src": hop[0], "dst": hop[1],
                                  "bytes": b, "mbps": round(mbps, 3),
                                  "util": round(mbps / cap, 4) if cap else 0.0})
            last, last_t = now, now_t
            if stopping:
                return

    def summary(self) -> dict | None:
        """Utilisation per directed link averaged over the samples in which anything moved:
        max (of any sample), mean and Jain's index over links that carried traffic."""
        active_t = sorted({r["t_s"] for r in self.rows if r["bytes"] > 0})
        if not active_t:
            return None
        lo, hi = active_t[0], active_t[-1]
        per_link: dict[tuple, list] = {}
        for r in self.rows:
            if lo <= r["t_s"] <= hi:
                per_link.setdefault((r["src"], r["dst"]), []).append(r["util"])
        means = [sum(v) / len(v) for v in per_link.values() if any(v)]
        return {"max": max(r["util"] for r in self.rows),
                "mean": round(sum(means) / len(means), 4) if means else 0.0,
                "jain": round(jain(means), 4) if means else 1.0}

    def write_csv(self, path: str) -> None:
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(self.rows)
        os.chmod(path, 0o644)
