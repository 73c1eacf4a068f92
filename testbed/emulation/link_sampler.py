"""Link utilisation over time (``links.csv``): a thread reads every switch port's byte
counters from ``/proc/net/dev`` once per interval and turns them into the bytes each
directed link sent."""
from __future__ import annotations

import time

from testbed.core.metrics import link_summary_of_rows
from testbed.core.records import LINK_FIELDS, link_row
from testbed.core.tables import write_csv
from testbed.emulation.sampling import Sampler

FIELDS = LINK_FIELDS


class LinkSampler(Sampler):
    def __init__(self, emu, interval_s: float = 0.5, t0: float | None = None, live=None):
        """``t0``: wall-clock workload time 0, when sampling starts (default: now); the
        rows' ``t_s`` are measured from it.  ``live`` (:class:`testbed.core.live_state.Live`):
        each window is published there too, as the run's."""
        self.live = live
        self.emu = emu
        self.interval = interval_s
        self.t0 = t0 if t0 is not None else time.time()
        fab = emu.fabric
        scale = fab.scale_for(emu.link_mbps)
        self.capacity: dict[tuple, float] = {}             # directed hop -> Mb/s
        for link in fab.links:
            for hop in ((link.a, link.b), (link.b, link.a)):
                self.capacity[hop] = self.capacity.get(hop, 0.0) + link.gbps * 1000.0 * scale
        self.rows: list[dict] = []
        self.error: str | None = None
        super().__init__()

    def read(self) -> dict:
        """Bytes sent over each directed link so far (the datapath's counters)."""
        counters = self.emu.kernel_counters("bytes")
        return {hop: self.emu.hop_counter(counters, *hop) for hop in self.capacity}

    def window(self, last: dict, now: dict, dt: float, t_s: float) -> list[dict]:
        """links.csv rows of one window: counters ``last`` and ``now`` ``dt`` apart."""
        return [link_row(t_s, hop, now[hop] - last[hop], dt, cap)
                for hop, cap in self.capacity.items()]

    def _run(self):
        if self.live is not None:
            self.live.sampler_started()
        try:
            self._sample()
        except Exception as err:  # a sampler must never take the run down; say why it stopped
            self.error = f"{type(err).__name__}: {err}"
        finally:
            if self.live is not None:
                self.live.sampler_stopped()

    def _sample(self):
        # from t0 (workload time 0) on, at t0 + k x interval: the windows the model's
        # links.csv has (bins of workload time), not ones that start with the thread
        if self._stop.wait(max(0.0, self.t0 - time.time())):
            return
        last, last_t = self.read(), time.time()
        k = 0
        while True:
            k += 1
            while self.t0 + k * self.interval < time.time():   # a slow read: skip a window
                k += 1
            stopping = self._stop.wait(max(0.0, self.t0 + k * self.interval - time.time()))
            now, now_t = self.read(), time.time()      # on stop: the partial interval,
            # spread over a whole one as the model's last bin, lest a tail look like a busy window
            dt = now_t - last_t
            rows = self.window(last, now, max(dt, self.interval) if stopping else dt,
                               now_t - self.t0)
            self.rows += rows
            if self.live is not None:
                self.live.publish_links(rows, "run")
            last, last_t = now, now_t
            if stopping:
                return

    def summary(self) -> dict | None:
        """:func:`testbed.core.metrics.link_summary_of_rows` of the samples (None when
        nothing moved)."""
        return link_summary_of_rows(self.rows)

    def write_csv(self, path: str) -> None:
        write_csv(self.rows, FIELDS, path)
