"""Results of a run on disk: ``transfers.csv`` (one row per transfer) and ``summary.json``."""
from __future__ import annotations

import csv
import json
import os

from traffic.workload import percentile, ttft_s

from .transfers import ROW_FIELDS


def write_transfers_csv(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ROW_FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k) for k in ROW_FIELDS})
    os.chmod(path, 0o644)


def _stats(values, qs) -> dict | None:
    if not values:
        return None
    out = {f"p{str(q).replace('.', '')}": round(percentile(values, q), 3) for q in qs}
    out["mean"] = round(sum(values) / len(values), 3)
    return out


def summarize(workload, rows: list[dict], nic_mbps: float, skipped_trace_lines: int = 0) -> dict:
    """The run's figures.  Slowdown is FCT over the time the bytes need at the emulated NIC
    rate alone; TTFT uses the measured end of each request's last transfer."""
    done = [r for r in rows if r["verified"]]
    fct = [r["fct_ms"] for r in done]
    slowdown = [r["fct_ms"] / (r["bytes"] * 8 / (nic_mbps * 1e6) * 1000) for r in done if r["bytes"]]
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
    span = (max(ends) - first) if ends else 0.0
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
        "scale": workload.scale.to_dict(),
        "skipped_trace_lines": skipped_trace_lines,
        "failed": [{"request": r["request"], "src": r["src"], "dst": r["dst"],
                    "status": r["status"]} for r in rows if not r["verified"]][:20],
    }


def write_summary(doc: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    os.chmod(path, 0o644)
