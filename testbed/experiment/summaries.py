"""A run's results on disk and the figures they sum to: ``transfers.csv``, ``requests.csv`` and
``summary.json``, whose figures (all from :mod:`testbed.core.metrics`) the comparison and the
report show without computing any of their own.
"""
from __future__ import annotations

import json
import os

from testbed.core import metrics
from testbed.core.records import ROW_FIELDS
from testbed.core.tables import write_csv
from traffic.workload import ttft_s

__all__ = ["REQUEST_FIELDS", "SPREAD_KEYS", "pool", "request_rows", "summarize", "write_csv",
           "write_summary", "write_transfers_csv"]

REQUEST_FIELDS = ("rep", "request", "arrival_s", "queue_s", "prefill_s", "kv_bytes",
                  "transfers", "transfers_end_s", "ttft_ms")


def write_transfers_csv(rows: list[dict], path: str) -> None:
    """transfers.csv: a column per field of :class:`testbed.core.records.TransferRecord` (those
    ``zcube run`` fills in too: ``rep``, ``seed``, ``hops``), on every backend."""
    write_csv(rows, ROW_FIELDS, path)


def _requests(workload, rows: list[dict]) -> tuple[list[dict], float]:
    """One row per request (see :func:`request_rows`) and the span (s) from the first
    arrival to the last completed request's end (its last transfer, or its prefill when
    nothing moved)."""
    by_request: dict[int, list] = {}
    for r in rows:
        by_request.setdefault(r["request"], []).append(r)
    out, ends = [], []
    for s in workload.schedule:
        mine = by_request.get(s.request.id, [])
        ok = all(r["verified"] for r in mine)
        end = max((r["end_s"] for r in mine if r["end_s"] is not None), default=None)
        if ok:
            ends.append(end if end is not None else s.prefill_end_s)
        out.append({"request": s.request.id, "arrival_s": round(s.request.arrival_s, 6),
                    "queue_s": round(s.queue_s, 6),
                    "prefill_s": round(s.prefill_end_s - s.prefill_start_s, 6),
                    "kv_bytes": s.kv_bytes, "transfers": len(mine),
                    "transfers_end_s": end,
                    "ttft_ms": round(ttft_s(s, end, workload.model) * 1000, 3) if ok else None})
    first = min((s.request.arrival_s for s in workload.schedule), default=0.0)
    return out, (max(ends) - first) if ends else 0.0


def request_rows(workload, rows: list[dict]) -> list[dict]:
    """One row per request: when it arrived, waited, was prefilled, and its TTFT (empty when
    a transfer of it failed)."""
    return _requests(workload, rows)[0]


def _slowdown(r: dict, nic_mbps: float) -> float:
    return r["fct_ms"] / (r["bytes"] * 8 / (nic_mbps * 1e6) * 1000)


def _ttfb_ms(r: dict):
    fb, start = r.get("first_byte_s"), r.get("start_s")
    return None if fb is None or start is None else (fb - start) * 1000


def _figures(rows: list[dict], reqs: list[dict], nic_mbps: float) -> dict:
    """The per-transfer and per-request figures: over verified transfers ``fct_ms``,
    ``slowdown`` (FCT over the time its bytes need at the emulated NIC rate alone) and
    ``ttfb_ms`` (start to first byte at the receiver); ``hops_mean``, the rows' mean switches
    crossed; over requests whose transfers all verified ``ttft_ms`` and
    ``prefill_share_of_ttft`` (queueing plus prefill over TTFT, summed over requests)."""
    done = [r for r in rows if r["verified"]]
    ttfb = [v for v in map(_ttfb_ms, done) if v is not None]
    answered = [q for q in reqs if q["ttft_ms"] is not None]
    ttft_total = sum(q["ttft_ms"] for q in answered)
    prefill_total = sum((q["queue_s"] + q["prefill_s"]) * 1000 for q in answered)
    return {
        "fct_ms": metrics.stats([r["fct_ms"] for r in done], (50, 99, 99.9)),
        "slowdown": metrics.stats([_slowdown(r, nic_mbps) for r in done if r["bytes"]]),
        "ttft_ms": metrics.stats([q["ttft_ms"] for q in answered]),
        "ttfb_ms": metrics.stats(ttfb),
        "hops_mean": metrics.mean(r.get("hops") for r in rows),
        "prefill_share_of_ttft": round(prefill_total / ttft_total, 4) if ttft_total else None,
    }


# summary.json's key -> the key of :func:`testbed.experiment.scenario.requests.skips`
SKIPPED_KEYS = {"skipped_trace_lines": "count", "skipped_trace_line_list": "lines",
                "trace_lines_out_of_order": "out_of_order"}


def skipped_fields(skipped: dict | None) -> dict:
    """The trace lines a replay did not take, under summary.json's keys (none: zeros)."""
    empty = {"count": 0, "lines": [], "out_of_order": 0}
    return {k: (skipped or empty)[v] for k, v in SKIPPED_KEYS.items()}


def summarize(workload, rows: list[dict], nic_mbps: float, skipped: dict | None = None) -> dict:
    """The figures of one repetition (:func:`_figures`, with counts); TTFT uses the measured end
    of each request's last transfer."""
    reqs, span = _requests(workload, rows)
    completed = sum(1 for q in reqs if q["ttft_ms"] is not None)
    return {
        "transfers_total": len(rows),
        "transfers_completed": sum(1 for r in rows if r["status"] not in ("unfinished",)),
        "transfers_verified": sum(1 for r in rows if r["verified"]),
        "bytes_total": sum(r["bytes"] for r in rows),
        **_figures(rows, reqs, nic_mbps),
        "requests_total": len(workload.schedule),
        "requests_completed": completed,
        "requests_per_s": round(completed / span, 3) if span > 0 else None,
        "slo_throughput_per_s": None,
        "scale": workload.scale.to_dict(),
        **skipped_fields(skipped),
        "failed": [{"request": r["request"], "src": r["src"], "dst": r["dst"],
                    "status": r["status"]} for r in rows if not r["verified"]][:20],
    }


def write_summary(doc: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    os.chmod(path, 0o644)


# spread key -> where a repetition's summary holds the figure (key, sub-key or None)
SPREAD_KEYS = {"fct_p50_ms": ("fct_ms", "p50"), "fct_p99_ms": ("fct_ms", "p99"),
               "fct_p999_ms": ("fct_ms", "p999"),
               "slowdown_p50": ("slowdown", "p50"), "slowdown_p99": ("slowdown", "p99"),
               "ttft_p50_ms": ("ttft_ms", "p50"), "ttft_p99_ms": ("ttft_ms", "p99"),
               "ttfb_p50_ms": ("ttfb_ms", "p50"),
               "requests_per_s": ("requests_per_s", None),
               "link_util_max": ("link_util", "max"), "link_util_mean": ("link_util", "mean"),
               "link_util_jain": ("link_util", "jain")}

# what ``per_rep`` keeps of each repetition's summary
PER_REP_KEYS = ("seed", "transfers_total", "transfers_verified", "fct_ms", "slowdown",
                "ttft_ms", "ttfb_ms", "hops_mean", "prefill_share_of_ttft",
                "requests_completed", "requests_per_s", "link_util")


def _pick(doc, key, sub):
    v = doc.get(key)
    return v if sub is None else (v or {}).get(sub)


def spreads(docs: list[dict]) -> dict:
    """Each headline figure's spread over repetitions' summaries (or their ``per_rep``
    entries): :data:`SPREAD_KEYS` -> :func:`testbed.core.metrics.spread`."""
    return {k: metrics.spread([_pick(d, *v) for d in docs]) for k, v in SPREAD_KEYS.items()}


def _pooled_links(docs: list[dict]) -> dict | None:
    """Link utilisation over repetitions: max of maxima, mean of means and of Jain's."""
    utils = [d["link_util"] for d in docs if d.get("link_util")]
    if not utils:
        return None
    return {"max": max(u["max"] for u in utils),
            "mean": metrics.mean(u["mean"] for u in utils),
            "jain": metrics.mean(u["jain"] for u in utils)}


def pool(per_rep: list, nic_mbps: float) -> dict:
    """One summary over repetitions ``[(summary, workload, rows), ...]``: counts summed,
    percentiles over all transfers and requests together (pooled), requests/s the mean of
    the repetitions', link utilisation as :func:`_pooled_links`, ``spread``: each headline
    figure's spread across repetitions (:func:`testbed.core.metrics.spread`), and
    ``per_rep``: each repetition's own figures."""
    docs = [d for d, _, _ in per_rep]
    rows = [r for _, _, rs in per_rep for r in rs]
    reqs = [q for _, w, rs in per_rep for q in request_rows(w, rs)]
    total = {k: sum(d[k] for d in docs) for k in (
        "transfers_total", "transfers_completed", "transfers_verified", "bytes_total")}
    return {
        **total,
        **_figures(rows, reqs, nic_mbps),
        "requests_total": sum(d["requests_total"] for d in docs),
        "requests_completed": sum(d["requests_completed"] for d in docs),
        "requests_per_s": metrics.mean((d["requests_per_s"] for d in docs), 3),
        "slo_throughput_per_s": None,
        "link_util": _pooled_links(docs),
        "scale": docs[0]["scale"],
        **{k: docs[0][k] for k in SKIPPED_KEYS},
        "failed": [f for d in docs for f in d["failed"]][:20],
        "spread": spreads(docs),
        "per_rep": [{k: d.get(k) for k in PER_REP_KEYS} for d in docs],
    }
