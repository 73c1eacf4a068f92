"""The records every backend returns: a transfer's row of transfers.csv, declared once
(:class:`TransferRecord`) and made once (:func:`transfer_row`), and a link sample's row of
links.csv.  A plain dataclass, as its attribute dict is the row itself, in field order.
"""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class TransferRecord:
    """One transfer as run: one row of transfers.csv.  Times are seconds from the
    workload's time 0; a field a backend does not measure is None."""
    request: int                    # the request whose KV cache it moves
    chunk: int                      # which chunk of that request's KV cache
    src: str                        # the sending GPU (host)
    dst: str                        # the receiving GPU (host)
    pairings: int                   # NIC port pairings (pieces) it was split over
    bytes: int                      # its size
    ready_s: float                  # when it was posted (the workload's plan)
    start_s: float | None           # when its first piece started sending
    first_byte_s: float | None      # when its first byte reached the receiver
    end_s: float | None             # when its last byte was delivered (emulation: verdict back)
    fct_ms: float | None            # flow completion time, end_s - start_s (:func:`fct_ms`)
    bytes_received: int             # the bytes the receiver counted
    verified: bool                  # every byte arrived (emulation: and its digest matched)
    status: str                     # "ok", or what went wrong
    attempts: int                   # tries of its most-tried piece (over 1: started again)
    rep: int | None = None          # zcube run: the repetition
    seed: int | None = None         # zcube run: the repetition's seed
    hops: float | None = None       # zcube run: switches crossed, mean over its paths
    steal: float | None = None      # emulation: most CPU share a hypervisor took, in flight
    stall_ms: float | None = None   # emulation: longest datapath stall (over 2 ms), in flight
    wake_ms: float | None = None    # emulation: how late the probe's timer woke, while waiting
    cwnd: int | None = None         # emulation: its flows' least congestion window at start
    cwnd_end: int | None = None     # emulation: the same as their verdicts came back
    lateness_ms: float | None = None        # start_s - ready_s: how late it started sending
    pacing_mbps: float | None = None        # emulation: its flows' least pacing rate at start
    retry_first_byte_s: float | None = None  # faults: first byte of the last piece started again
    avoided: bool | None = None     # faults: a piece started off its own pairing, that was down
    moves: int | None = None        # faults: moves of its pieces off a pairing that went down
    gap_s: float | None = None      # faults: longest wait between two blocks of a piece
    gap_end_s: float | None = None  # faults: when that wait ended
    received_s: float | None = None  # emulation: when the receivers had every byte (no verdict)

    def row(self) -> dict:
        """The record as a row: every field, in :data:`ROW_FIELDS` order."""
        return dict(vars(self))


# transfers.csv's columns, on every backend
ROW_FIELDS = tuple(f.name for f in fields(TransferRecord))


def fct_ms(start, end, completed: bool) -> float | None:
    """The flow completion time (ms) of a transfer started at ``start`` whose last byte was
    delivered at ``end`` (seconds, on one clock): ``end - start``, as networking defines
    it; None unless it ``completed`` (and both times are known)."""
    if not completed or start is None or end is None:
        return None
    return round((end - start) * 1000, 3)


def lateness_ms(ready, start) -> float | None:
    """How late (ms) a transfer posted at ``ready`` started, at ``start`` (seconds, on one
    clock); None when it never started."""
    return None if start is None else round((start - ready) * 1000, 3)


def transfer_row(t, *, pairings: int, start, first_byte, end, bytes_received: int,
                 verified: bool, status: str, attempts: int, t0: float = 0.0,
                 **extra) -> dict:
    """The one way a backend makes a transfer's row: transfer ``t`` (its request, chunk,
    pair, size and ready time), when its first piece started sending, its first byte
    arrived and its last byte was delivered (``start``, ``first_byte``, ``end``: seconds on a
    clock whose workload time 0 is ``t0``, None when it never did), and ``extra``, fields of
    :class:`TransferRecord` only some backends measure, as they are.  The FCT is
    :func:`fct_ms`'s, None unless ``verified``."""
    def at(x):
        return None if x is None else round(x - t0, 6)
    # the new record's own attribute dict is the row (no copy: the record is not kept)
    return vars(TransferRecord(
        request=t.request, chunk=t.chunk, src=t.src, dst=t.dst, pairings=pairings,
        bytes=t.bytes, ready_s=round(t.ready_s, 6), start_s=at(start),
        first_byte_s=at(first_byte), end_s=at(end), fct_ms=fct_ms(start, end, verified),
        bytes_received=bytes_received, verified=verified, status=status, attempts=attempts,
        lateness_ms=lateness_ms(t0 + t.ready_s, start), **extra))


# one row per directed link and sampling interval (links.csv, before ``rep``)
LINK_FIELDS = ("t_s", "src", "dst", "bytes", "mbps", "util")


def link_row(t_s: float, hop: tuple, nbytes: int, seconds: float, capacity_mbps: float) -> dict:
    """One links.csv row: ``nbytes`` sent on directed ``hop`` in ``seconds`` ending at
    ``t_s``, against ``capacity_mbps``."""
    mbps = nbytes * 8 / seconds / 1e6 if seconds > 0 else 0.0
    return {"t_s": round(t_s, 3), "src": hop[0], "dst": hop[1], "bytes": nbytes,
            "mbps": round(mbps, 3),
            "util": round(mbps / capacity_mbps, 4) if capacity_mbps else 0.0}
