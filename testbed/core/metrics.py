"""Every figure the testbed reports, computed once: percentiles (numpy's default, linear
interpolation), spreads and 95% intervals over repetitions (Student's t), paired and controlled
ratios, Jain's index (:func:`controller.verify.jain`) and link utilisation summaries.
Summaries, comparisons and the report read these and compute none of their own.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

import numpy as np

from controller.verify import jain

__all__ = ["percentile", "pkey", "stats", "mean", "t95", "spread", "jain", "estimate",
           "MEAN_OF_REPS", "POOLED", "controlled_ratio", "link_means", "link_summary",
           "link_summary_of_rows"]

MEAN_OF_REPS = "mean_of_reps"        # estimator: mean of the per-repetition figures
POOLED = "pooled"                    # estimator: over every transfer/request of the run


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of a non-empty sequence, numpy's default method."""
    if len(values) == 0:
        raise ValueError("percentile of no values")
    return float(np.percentile(np.asarray(values, dtype=float), q))


def pkey(q: float) -> str:
    """The key a percentile is stored under: 50 -> p50, 99.9 -> p999."""
    return "p" + f"{q:g}".replace(".", "")


def stats(values: Sequence[float], qs: Iterable[float] = (50, 99)) -> Optional[dict]:
    """``{p50: .., p99: .., mean: ..}`` of ``values`` (None when there are none), rounded to
    three decimals."""
    if len(values) == 0:
        return None
    arr = np.asarray(values, dtype=float)
    out = {pkey(q): round(float(np.percentile(arr, q)), 3) for q in qs}
    out["mean"] = round(float(arr.mean()), 3)
    return out


def mean(values: Iterable[Optional[float]], digits: int = 4) -> Optional[float]:
    """Arithmetic mean of the values that are not None, rounded (None when there are none)."""
    xs = [float(v) for v in values if v is not None]
    return round(sum(xs) / len(xs), digits) if xs else None


def t95(n: int) -> Optional[float]:
    """Two-sided 95% Student-t quantile for the mean of ``n`` values (None below two)."""
    if n < 2:
        return None
    # imported here: at the top it cost every command (even --help) about a second
    from scipy import stats
    return float(stats.t.ppf(0.975, n - 1))


def spread(values: Iterable[Optional[float]]) -> Optional[dict]:
    """Mean, sd, 95% confidence half-width of the mean, min and max of per-repetition
    values; None values are left out; sd and ci95 are None with fewer than two values."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    n = len(xs)
    avg = sum(xs) / n
    sd = math.sqrt(sum((x - avg) ** 2 for x in xs) / (n - 1)) if n > 1 else None
    t = t95(n)
    return {"n": n, "mean": round(avg, 4), "sd": None if sd is None else round(sd, 4),
            "ci95": None if sd is None else round(t * sd / math.sqrt(n), 4),
            "min": round(min(xs), 4), "max": round(max(xs), 4)}


def estimate(pooled: Optional[float], rep_spread: Optional[dict],
             repetitions: int) -> tuple[Optional[float], Optional[float], str]:
    """``(value, ci95, estimator)`` a comparison shows for one metric of one run: with more
    than one repetition (and a spread over them), the mean of the per-repetition figures
    and its 95% half-width (``MEAN_OF_REPS``); otherwise the pooled figure and no interval
    (``POOLED``)."""
    if repetitions > 1 and rep_spread and rep_spread.get("n", 0) > 1:
        return rep_spread["mean"], rep_spread["ci95"], MEAN_OF_REPS
    return pooled, None, POOLED


def paired_ratio(ref: Sequence[Optional[float]],
                 other: Sequence[Optional[float]]) -> Optional[dict]:
    """The ratio ``other / ref`` over repetitions paired by seed (the same requests on both
    runs): the geometric mean of the per-repetition ratios and its 95% interval (Student's
    t on the log ratios), ``{"n", "ratio", "lo", "hi"}``; ``lo``/``hi`` None below two
    pairs; None without a pair of positive values."""
    logs = [math.log(b / a) for a, b in zip(ref, other)
            if a is not None and b is not None and a > 0 and b > 0]
    if not logs:
        return None
    n, m = len(logs), sum(logs) / len(logs)
    out = {"n": n, "ratio": round(math.exp(m), 4), "lo": None, "hi": None}
    if n > 1:
        half = t95(n) * math.sqrt(sum((x - m) ** 2 for x in logs) / (n - 1)) / math.sqrt(n)
        out.update(lo=round(math.exp(m - half), 4), hi=round(math.exp(m + half), 4))
    return out


def controlled_ratio(logs: Sequence[float], controls: Sequence[float],
                     many: Sequence[float]) -> Optional[dict]:
    """:func:`paired_ratio` narrowed by a control variate: ``logs`` are the per-repetition log
    ratios of the backend measured, ``controls`` a cheaper backend's log ratios on the same
    draws (the same requests and the same ECMP paths, repetition by repetition), and
    ``many`` that backend's log ratios over many other draws.  The estimate is the mean of
    the per-draw differences plus the cheap backend's mean over ``many``: the measured mean
    moved by how far its draws' controls stray from the cheap backend's own mean.  With the
    control's coefficient fixed at 1 (the two backends measure the same thing) it is unbiased
    whatever the relation between the two, where a slope fitted to a few draws is not; its
    95% interval (Student's t on the differences) adds the spread of the mean over ``many``.
    It estimates the measured backend's own mean, not the cheap one's: only which draws
    happened is corrected for; it is as narrow as the two agree draw by draw, and wider than
    the plain interval where they do not.  ``{"n", "ratio", "lo", "hi", "rho"}`` (``rho``:
    the correlation of the two, None where either does not vary); None below two pairs or
    two of ``many``."""
    n, big = len(logs), len(many)
    if n != len(controls) or n < 2 or big < 2:
        return None
    diffs = [y - x for y, x in zip(logs, controls)]
    dm, mu = sum(diffs) / n, sum(many) / big
    var = (sum((d - dm) ** 2 for d in diffs) / (n - 1) / n
           + sum((x - mu) ** 2 for x in many) / (big - 1) / big)
    half, m = t95(n) * math.sqrt(var), dm + mu
    ym, xm = sum(logs) / n, sum(controls) / n
    sxx = sum((x - xm) ** 2 for x in controls)
    syy = sum((y - ym) ** 2 for y in logs)
    sxy = sum((x - xm) * (y - ym) for x, y in zip(controls, logs))
    flat = sxx <= 1e-12 * n or syy <= 1e-12 * n     # the same in every draw, to rounding
    return {"n": n, "ratio": round(math.exp(m), 4), "lo": round(math.exp(m - half), 4),
            "hi": round(math.exp(m + half), 4),
            "rho": None if flat else round(sxy / math.sqrt(sxx * syy), 4)}


def link_means(rows: Sequence[dict]) -> dict:
    """Each directed link's mean utilisation over the samples between the first and the
    last in which anything moved (links.csv rows: ``t_s``, ``src``, ``dst``, ``bytes``,
    ``util``, numbers); ``{}`` when nothing moved."""
    active_t = sorted({r["t_s"] for r in rows if r["bytes"] > 0})
    if not active_t:
        return {}
    lo, hi = active_t[0], active_t[-1]
    per_link: dict = {}
    for r in rows:
        if lo <= r["t_s"] <= hi:
            per_link.setdefault((r["src"], r["dst"]), []).append(r["util"])
    return {k: sum(v) / len(v) for k, v in per_link.items()}


def link_summary(per_link_means: Sequence[float], peak: float) -> Optional[dict]:
    """The link summary from each active link's mean utilisation over the active window
    (:func:`link_means`) and the highest utilisation of any sample ``peak``: ``max`` is
    ``peak``, ``mean`` and ``jain`` are over the links' means."""
    means = [m for m in per_link_means if m]
    return {"max": peak,
            "mean": round(sum(means) / len(means), 4) if means else 0.0,
            "jain": round(jain(means), 4) if means else 1.0}


def link_summary_of_rows(rows: Sequence[dict]) -> Optional[dict]:
    """The link summary of link samples (as :func:`link_means`); None when nothing moved."""
    means = link_means(rows)
    if not means:
        return None
    return link_summary(list(means.values()), max(r["util"] for r in rows))
