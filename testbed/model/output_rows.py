"""What the flow-level model hands back: transfer rows and link rows with the columns every
backend returns (:mod:`testbed.core.records`), link bytes kept sparse until asked for."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from testbed.core import metrics
from testbed.core.records import LINK_FIELDS, link_row, transfer_row
from testbed.core.tables import write_csv


def transfer_rows(transfers, t_first: list, t_end: list, n_sub: list,
                  missing: dict | None = None, moved_at: dict | None = None,
                  gap: dict | None = None) -> list[dict]:
    """One row per transfer (:func:`testbed.core.records.transfer_row`), in workload order,
    from when its first sub-flow started sending and its last one finished (time 0 is the
    workload's origin, so ``start_s`` is ``ready_s``, when the transfer was posted; one
    without sub-flows ends when it starts).  Without faults every transfer arrives whole;
    with them ``missing`` holds the bytes a cut-off transfer never delivered, ``moved_at``
    when a transfer's sub-flow was moved off a dead path (its second attempt) and ``gap``
    its longest stall behind a dead hop (duration, end)."""
    rows = []
    missing, moved_at, gap = missing or {}, moved_at or {}, gap or {}
    for i, t in enumerate(transfers):
        start = t.ready_s
        first, end = (t_first[i], t_end[i]) if n_sub[i] else (start, start)
        ok = i not in missing
        extra = {}
        if moved_at or gap or missing:
            g = gap.get(i)
            extra = {"retry_first_byte_s": moved_at.get(i), "moves": int(i in moved_at),
                     "avoided": False, "gap_s": None if g is None else round(g[0], 6),
                     "gap_end_s": None if g is None else round(g[1], 6)}
        if missing.get(i, 0) >= t.bytes > 0:
            first = None                         # cut off before its first byte
        rows.append(transfer_row(t, pairings=n_sub[i], start=start, first_byte=first,
                                 end=end if ok else None,
                                 bytes_received=t.bytes - missing.get(i, 0), verified=ok,
                                 status="ok" if ok else "incomplete",
                                 attempts=2 if i in moved_at else 1, **extra))
    return rows


def integer_bins(bins: list, hops: list) -> tuple[dict, int]:
    """Whole bytes per hop and interval from the float ``bins`` of the hops (index ->
    {interval: bytes}; the datapath is no link and is not passed), rounded cumulatively so
    that each hop's total stays exact; and how many intervals there are."""
    int_bins: dict = {}
    intervals = 0
    for i, b in enumerate(bins):
        if not b:
            continue
        out, acc, prev = {}, 0.0, 0
        for k in sorted(b):
            acc += b[k]
            cur = round(acc)
            if cur != prev:
                out[k] = cur - prev
            prev = cur
        if out:
            int_bins[hops[i]] = out
            intervals = max(intervals, max(out) + 1)
    return int_bins, intervals


def write_links_csv(path: str, rows: Iterable[dict]) -> None:
    """Write link rows as ``links.csv`` (columns :data:`LINK_FIELDS`)."""
    write_csv(rows, LINK_FIELDS, path)


@dataclass
class ModelResult:
    """What :func:`testbed.model.simulate.simulate` computed.

    ``rows``: one dict per transfer (a :class:`testbed.core.records.TransferRecord`'s row), in
    workload order.  ``links``: every directed hop in every ``sample_s`` interval (keys
    :data:`testbed.core.records.LINK_FIELDS`); it is built on first use and holds
    intervals x hops rows, so for long runs on large fabrics prefer :meth:`iter_links`,
    :meth:`write_links_csv`, :meth:`link_bytes` and :meth:`link_summary`, which read the
    sparse per-hop counts.  ``events``: sub-flow arrivals plus completions;
    ``recomputations``: how many times rates were recomputed (events at the same instant
    share one); ``runtime_s``: wall-clock seconds of the simulation itself."""
    rows: list[dict]
    events: int
    recomputations: int
    runtime_s: float
    sample_s: float
    intervals: int
    capacity: dict                      # directed hop -> Mb/s
    params: dict
    faults: list | None = None          # one record per event of the fault schedule, if any
    _bins: dict = field(default_factory=dict, repr=False)   # hop -> {interval: int bytes}
    _links: list | None = field(default=None, repr=False)

    def _row(self, k: int, hop, b: int) -> dict:
        return link_row((k + 1) * self.sample_s, hop, b, self.sample_s, self.capacity[hop])

    def iter_links(self) -> Iterator[dict]:
        """``links`` rows one at a time: interval by interval, hops in fabric order."""
        for k in range(self.intervals):
            for hop in self.capacity:
                yield self._row(k, hop, self._bins.get(hop, {}).get(k, 0))

    @property
    def links(self) -> list[dict]:
        if self._links is None:
            self._links = list(self.iter_links())
        return self._links

    def link_bytes(self) -> dict[tuple[str, str], int]:
        """Total bytes sent over each directed hop (hops that sent nothing are left out)."""
        return {hop: sum(b.values()) for hop, b in self._bins.items() if b}

    def write_links_csv(self, path: str) -> None:
        write_links_csv(path, self.iter_links())

    def link_summary(self) -> dict | None:
        """:func:`testbed.core.metrics.link_summary` of ``links`` (as ``LinkSampler.summary()``
        makes of its samples), from the sparse counts; None when nothing moved."""
        active = {k for bins in self._bins.values() for k, b in bins.items() if b > 0}
        if not active:
            return None
        lo, hi = min(active), max(active)
        width = hi - lo + 1
        peak, means = 0.0, []
        for hop, bins in self._bins.items():
            total, moved = 0.0, False
            for k, b in bins.items():
                if not b:
                    continue
                u = self._row(k, hop, b)["util"]
                peak = max(peak, u)
                if lo <= k <= hi and u:
                    total += u
                    moved = True
            if moved:
                means.append(total / width)
        return metrics.link_summary(means, peak)
