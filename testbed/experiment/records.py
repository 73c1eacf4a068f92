"""Results of a run on disk: ``transfers.csv`` (one row per transfer) and ``summary.json``."""
from __future__ import annotations

import csv
import json
import os

from traffic.workload import percentile, ttft_s

from testbed.core.rows import ROW_FIELDS


REP_FIELDS = ("rep", "seed", "hops")     # added by ``zcube run``: repetition, its seed, switches


def write_transfers_csv(rows: list[dict], path: str, extra: tuple = ()) -> None:
    write_csv(rows, ROW_FIELDS + tuple(extra), path)


def _stats(values, qs) -> dict | None:
    if not values:
        return None
    out = {f"p{str(q).replace('.', '')}": round(percentile(values, q), 3) for q in qs}
    out["mean"] = round(sum(values) / len(values), 3)
    return out


def request_ttfts(workload, rows: list[dict]) -> tuple[list[float], float]:
    """TTFT (ms) of every request whose transfers all verified, and the span (s) from the
    first arrival to the last request's completion."""
    by_request: dict[int, list] = {}
    for r in rows:
        by_request.setdefault(r["request"], []).append(r)
    ttft, ends = [], []
    for s in workload.schedule:
        mine = by_request.get(s.request.id, [])
        if mine and not all(r["verified"] for r in mine):
            continue                                  # a request with a failed transfer has no TTFT
        end = max((r["end_s"] for r in mine), default=None)
        ttft.append(ttft_s(s, end, workload.model) * 1000)
        ends.append(end if end is not None else s.prefill_end_s)
    first = min((s.request.arrival_s for s in workload.schedule), default=0.0)
    return ttft, (max(ends) - first) if ends else 0.0


REQUEST_FIELDS = ("rep", "request", "arrival_s", "queue_s", "prefill_s", "kv_bytes",
                  "transfers", "transfers_end_s", "ttft_ms")


def request_rows(workload, rows: list[dict]) -> list[dict]:
    """One row per request: when it arrived, waited, was prefilled, and its TTFT (empty when
    a transfer of it failed)."""
    by_request: dict[int, list] = {}
    for r in rows:
        by_request.setdefault(r["request"], []).append(r)
    out = []
    for s in workload.schedule:
        mine = by_request.get(s.request.id, [])
        ok = all(r["verified"] for r in mine)
        end = max((r["end_s"] for r in mine if r["end_s"] is not None), default=None)
        out.append({"request": s.request.id, "arrival_s": round(s.request.arrival_s, 6),
                    "queue_s": round(s.queue_s, 6),
                    "prefill_s": round(s.prefill_end_s - s.prefill_start_s, 6),
                    "kv_bytes": s.kv_bytes, "transfers": len(mine),
                    "transfers_end_s": end,
                    "ttft_ms": round(ttft_s(s, end if mine else None, workload.model) * 1000, 3)
                    if ok else None})
    return out


def write_csv(rows: list[dict], fields, path: str) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k) for k in fields})
    os.chmod(path, 0o644)


def summarize(workload, rows: list[dict], nic_mbps: float, skipped_trace_lines: int = 0) -> dict:
    """The run's figures.  Slowdown is FCT over the time the bytes need at the emulated NIC
    rate alone; TTFT uses the measured end of each request's last transfer."""
    done = [r for r in rows if r["verified"]]
    fct = [r["fct_ms"] for r in done]
    slowdown = [r["fct_ms"] / (r["bytes"] * 8 / (nic_mbps * 1e6) * 1000) for r in done if r["bytes"]]
    ttft, span = request_ttfts(workload, rows)
    return {
        "transfers_total": len(rows),
        "transfers_completed": sum(1 for r in rows if r["status"] not in ("unfinished",)),
        "transfers_verified": len(done),
        "bytes_total": sum(r["bytes"] for r in rows),
        "fct_ms": _stats(fct, (50, 99, 99.9)),
        "slowdown": _stats(slowdown, (50, 99)),
        "ttft_ms": _stats(ttft, (50, 99)),
        "requests_total": len(workload.schedule),
        "requests_completed": len(ttft),
        "requests_per_s": round(len(ttft) / span, 3) if span > 0 else None,
        "slo_throughput_per_s": None,
        "scale": workload.scale.to_dict(),
        "skipped_trace_lines": skipped_trace_lines,
        "failed": [{"request": r["request"], "src": r["src"], "dst": r["dst"],
                    "status": r["status"]} for r in rows if not r["verified"]][:20],
    }


def write_summary(doc: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    os.chmod(path, 0o644)


# Student's t, two-sided 95%, by degrees of freedom (n - 1); 1.96 beyond the table.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def spread(values) -> dict | None:
    """Mean, standard deviation, 95% confidence half-width (t), min and max of per-repetition
    values (None values are left out; the half-width is None with fewer than two)."""
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    n = len(xs)
    mean = sum(xs) / n
    sd = (sum((x - mean) ** 2 for x in xs) / (n - 1)) ** 0.5 if n > 1 else None
    t = next((_T95[k] for k in sorted(_T95) if k >= n - 1), 1.96) if n > 1 else None
    return {"n": n, "mean": round(mean, 4), "sd": None if sd is None else round(sd, 4),
            "ci95": None if sd is None else round(t * sd / n ** 0.5, 4),
            "min": round(min(xs), 4), "max": round(max(xs), 4)}


SPREAD_KEYS = {"fct_p50_ms": ("fct_ms", "p50"), "fct_p99_ms": ("fct_ms", "p99"),
               "ttft_p50_ms": ("ttft_ms", "p50"), "ttft_p99_ms": ("ttft_ms", "p99"),
               "requests_per_s": ("requests_per_s", None),
               "link_util_max": ("link_util", "max"), "link_util_mean": ("link_util", "mean")}


def _pick(doc, key, sub):
    v = doc.get(key)
    return v if sub is None else (v or {}).get(sub)


def pool(per_rep: list, nic_mbps: float) -> dict:
    """One summary over repetitions ``[(summary, workload, rows), ...]``: counts summed,
    percentiles over all transfers and requests together, link utilisation max of maxima and
    mean of means, and ``spread``: each headline metric's spread across repetitions."""
    docs = [d for d, _, _ in per_rep]
    rows = [r for _, _, rs in per_rep for r in rs]
    done = [r for r in rows if r["verified"]]
    ttft = [t for _, w, rs in per_rep for t in request_ttfts(w, rs)[0]]
    slowdown = [r["fct_ms"] / (r["bytes"] * 8 / (nic_mbps * 1e6) * 1000) for r in done if r["bytes"]]
    utils = [d["link_util"] for d in docs if d.get("link_util")]
    rates = [d["requests_per_s"] for d in docs if d["requests_per_s"] is not None]
    out = {
        "transfers_total": sum(d["transfers_total"] for d in docs),
        "transfers_completed": sum(d["transfers_completed"] for d in docs),
        "transfers_verified": sum(d["transfers_verified"] for d in docs),
        "bytes_total": sum(d["bytes_total"] for d in docs),
        "fct_ms": _stats([r["fct_ms"] for r in done], (50, 99, 99.9)),
        "slowdown": _stats(slowdown, (50, 99)),
        "ttft_ms": _stats(ttft, (50, 99)),
        "requests_total": sum(d["requests_total"] for d in docs),
        "requests_completed": sum(d["requests_completed"] for d in docs),
        "requests_per_s": round(sum(rates) / len(rates), 3) if rates else None,
        "slo_throughput_per_s": None,
        "link_util": None if not utils else {
            "max": max(u["max"] for u in utils),
            "mean": round(sum(u["mean"] for u in utils) / len(utils), 4),
            "jain": round(sum(u["jain"] for u in utils) / len(utils), 4)},
        "scale": docs[0]["scale"],
        "skipped_trace_lines": docs[0]["skipped_trace_lines"],
        "failed": [f for d in docs for f in d["failed"]][:20],
        "spread": {k: spread([_pick(d, *v) for d in docs]) for k, v in SPREAD_KEYS.items()},
        "per_rep": [{k: d.get(k) for k in ("seed", "transfers_total", "transfers_verified",
                                            "fct_ms", "ttft_ms", "requests_per_s",
                                            "link_util")} for d in docs],
    }
    return out
