"""A scenario's rate sweep (its ``sweep`` section) on one fabric: P99 TTFT at each rate and
the SLO throughput, the largest rate whose P99 TTFT meets the objective.

With one draw the rates run from the highest down until one meets the objective, as a lower
rate cannot change the answer.  With ``draws`` or ``until_miss`` the sweep is a serving
curve, as serving benchmarks plot it: every rate, lowest first, on each draw (seed
``seed + k``), continued past the listed rates, ``until_miss`` times faster each time,
until every draw misses the objective, so the curve reaches saturation; the SLO throughput
then has an interval over the draws."""
from __future__ import annotations

from testbed.core.metrics import spread
from testbed.experiment.repetitions import run_dilated
from testbed.experiment.scenario import limits as L
from testbed.experiment.scenario.requests import requests_for
from testbed.experiment.summaries import summarize
from traffic.workload import slo_throughput

MAX_EXTRA_RATES = 8       # rates a curve adds past the listed ones, at most
KNEE = 2.0                # the knee: the last rate before P99 TTFT passes this many times
                          # its value at the lowest rate


def run_sweep(sc, sess, work_for, log, slower: float = 1.0, first: tuple | None = None) -> dict:
    """The sweep on session ``sess``; ``work_for(seed, requests)`` builds a workload and
    ``first`` is the (workload, WorkloadResult) of the scenario's first repetition, if run
    already: a point whose workload is that one is read from it, not run again."""
    point = _Points(sc, sess, work_for, slower, first)
    if sc.sweep.draws == 1 and not sc.sweep.until_miss:
        return _down(sc, point, log)
    return _curve(sc, point, log)


class _Points:
    """Runs one (seed, rate) point of the sweep."""

    def __init__(self, sc, sess, work_for, slower, first):
        self.sc, self.sess, self.work_for, self.slower, self.first = \
            sc, sess, work_for, slower, first

    def __call__(self, seed: int, rate: float) -> dict:
        sc = self.sc
        reqs, _ = requests_for(sc, seed, rate=rate, count=sc.sweep.count)
        work = self.work_for(seed, reqs)
        first = self.first
        same = first is not None and (first[0].requests, first[0].transfers) == (
            work.requests, work.transfers)
        rows = (first[1].rows if same else
                run_dilated(self.sess, work, None, sc.time_dilation, self.slower).rows)
        doc = summarize(work, rows, sc.link_mbps)
        return {"rate_per_s": rate, "ttft_p99_ms": (doc["ttft_ms"] or {}).get("p99"),
                "verified": doc["transfers_verified"], "total": doc["transfers_total"],
                "repetition": 0 if same else None}


def _met(point: dict, slo: float) -> bool:
    return point["ttft_p99_ms"] is not None and point["ttft_p99_ms"] <= slo


def _best(points: list[dict], slo: float) -> float | None:
    return slo_throughput([p["rate_per_s"] for p in points],
                          [p["ttft_p99_ms"] if p["ttft_p99_ms"] is not None else float("inf")
                           for p in points], slo)


def _down(sc, point, log) -> dict:
    points, slo = [], sc.sweep.slo_ttft_ms
    for rate in sorted(sc.sweep.rates, reverse=True):
        if points and not sc.sweep.every_rate and _met(points[-1], slo):
            break
        p = point(sc.seed, rate)
        points.append(p)
        log(f"  sweep {rate:g} requests/s: TTFT p99 {p['ttft_p99_ms']} ms, "
            f"{p['verified']}/{p['total']} transfers verified"
            + (" (the first repetition's: the same requests)" if p["repetition"] == 0 else ""))
    best = _best(points, slo)
    below = sorted({r for r in sc.sweep.rates if r < points[-1]["rate_per_s"]})
    log(f"  SLO throughput (largest rate with TTFT p99 <= {slo:g} ms): "
        f"{'none of the rates' if best is None else f'{best:g} requests/s'}"
        + (f" ({', '.join(f'{r:g}' for r in below)}/s not run: a lower rate cannot change "
           "it; every_rate: true runs every rate)" if below else ""))
    return {"slo_ttft_ms": slo, "points": points[::-1], "not_run": below,
            "slo_throughput_per_s": best}


def _curve(sc, point, log) -> dict:
    sw, slo = sc.sweep, sc.sweep.slo_ttft_ms
    rates, draws = sorted(sw.rates), [[] for _ in range(sw.draws)]
    k = 0
    while k < len(rates):
        got = [point(sc.seed + d, rates[k]) for d in range(sw.draws)]
        for d, p in enumerate(got):
            draws[d].append(p)
        missed = sum(1 for p in got if not _met(p, slo))
        log(f"  curve {rates[k]:g} requests/s: TTFT p99 "
            + ", ".join(str(p["ttft_p99_ms"]) for p in got)
            + f" ms over {sw.draws} draw(s), {missed} over the objective")
        nxt = float(f"{rates[k] * (sw.until_miss or 0):.3g}")     # three figures
        if (k == len(rates) - 1 and sw.until_miss and missed < sw.draws
                and len(rates) < len(sw.rates) + MAX_EXTRA_RATES and nxt <= L.RATE):
            rates.append(nxt)
        k += 1
    per_draw = [_best(ps, slo) for ps in draws]
    s = spread([b or 0.0 for b in per_draw])
    points = [_combine([ps[i] for ps in draws]) for i in range(len(rates))]
    best = s["mean"] if any(b is not None for b in per_draw) else None
    log(f"  SLO throughput (largest rate with TTFT p99 <= {slo:g} ms): "
        + (f"{best:g} requests/s" + (f" ±{s['ci95']:g}" if s["ci95"] else "")
           + f" over {sw.draws} draw(s)" if best is not None else "none of the rates")
        + f"; knee {knee(points)} requests/s")
    return {"slo_ttft_ms": slo, "points": points, "not_run": [], "draws": sw.draws,
            "seeds": [sc.seed + d for d in range(sw.draws)],
            "slo_throughput_per_s": best, "slo_throughput_draws": per_draw,
            "slo_throughput_ci95": s["ci95"], "knee_per_s": knee(points),
            "saturated": all(not _met(ps[-1], slo) for ps in draws)}


def _combine(points: list[dict]) -> dict:
    """One rate's points over the draws: the mean P99 TTFT and its 95% half-width."""
    s = spread(p["ttft_p99_ms"] for p in points)
    return {"rate_per_s": points[0]["rate_per_s"],
            "ttft_p99_ms": s["mean"] if s else None, "ttft_p99_ci95": s["ci95"] if s else None,
            "ttft_p99_draws": [p["ttft_p99_ms"] for p in points],
            "verified": sum(p["verified"] for p in points),
            "total": sum(p["total"] for p in points), "repetition": points[0]["repetition"]}


def knee(points: list[dict]) -> float | None:
    """The last rate before the mean P99 TTFT passes :data:`KNEE` times its value at the
    lowest rate (the highest rate when it never does; None without a first value)."""
    base = points[0]["ttft_p99_ms"] if points else None
    if not base:
        return None
    out = points[0]["rate_per_s"]
    for p in points[1:]:
        if p["ttft_p99_ms"] is None or p["ttft_p99_ms"] > KNEE * base:
            break
        out = p["rate_per_s"]
    return out
