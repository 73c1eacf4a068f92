"""Does the emulator's pace drift within one bring-up, and which carrying order cancels it?

    .venv/bin/python benchmarks/bench_drift.py RUN [RUN ...] [--block 8] [--pair 8]

Each RUN is one run's folder (holding summary.json; a scenario's output folder holds one per
fabric and placement) of many repetitions of one fabric, e.g. ``sudo .venv/bin/zcube run demo
--fabrics zcube --repetitions 40 --no-report -o DIR`` (DIR/zcube).  Per run, for the
repetitions' median FCT (``per_rep[i].fct_ms.p50``) and the median one-way delay of the
datapath probe (``per_rep[i].fidelity.probe.p50_ms``), in the order they were carried:

- blocks of ``--block`` consecutive repetitions: the standard deviation of the block means
  over the standard error each block's own spread gives, and a one-way analysis of variance
  (F and its p value).  Repetitions whose pace does not drift give about 1 and a p value
  spread evenly over 0-1; a pace that wanders over minutes gives more and a small p;
- the lag-1 autocorrelation of the series;
- what the drift would do to a comparison: the series stands for a pace both fabrics share,
  and each carrying order draws ``--pair`` repetitions for each of two fabrics from a window
  of the series sliding over it: one fabric after the other (``fabric``), mirrored halves
  A1 B1 B2 A2 (``mirrored``, the scenario key ``order``) or every repetition alternated
  (``alternate``, which needs both fabrics up at once); printed is the standard deviation of
  the log of the ratio of the two means, in percent.  It holds the per-repetition noise as
  well as the drift, so it is a bound on what an order removes, not a prediction.

No root, no emulator; prints, asserts nothing.
"""
import argparse
import json
import os
import sys

import numpy as np
from scipy import stats


def series(run_dir: str) -> dict:
    with open(os.path.join(run_dir, "summary.json")) as f:
        doc = json.load(f)
    reps = doc.get("per_rep") or []
    fct = [(r.get("fct_ms") or {}).get("p50") for r in reps]
    probe = [(((r.get("fidelity") or {}).get("probe") or {}).get("p50_ms")) for r in reps]
    return {"name": doc.get("run") or os.path.basename(run_dir), "fct": fct, "probe": probe}


def blocks(xs, size: int) -> dict | None:
    """Block means against the within-block spread (one-way ANOVA over consecutive blocks)."""
    k = len(xs) // size
    if k < 2 or size < 2:
        return None
    b = np.asarray(xs[:k * size], float).reshape(k, size)
    within = b.var(axis=1, ddof=1).mean()
    if within <= 0:
        return None
    between = b.mean(axis=1).var(ddof=1)
    f = size * between / within
    return {"ratio": float(np.sqrt(between) / np.sqrt(within / size)), "F": float(f),
            "p": float(stats.f.sf(f, k - 1, k * (size - 1))), "blocks": k}


def lag1(xs) -> float:
    x = np.asarray(xs, float) - np.mean(xs)
    return float((x[:-1] * x[1:]).sum() / (x * x).sum())


def orders(n: int) -> dict:
    """Positions (within a window of 2n repetitions) each order gives fabric A and B."""
    h = n // 2
    return {"fabric": (list(range(n)), list(range(n, 2 * n))),
            "mirrored": (list(range(h)) + list(range(2 * n - (n - h), 2 * n)),
                         list(range(h, 2 * n - (n - h)))),
            "alternate": (list(range(0, 2 * n, 2)), list(range(1, 2 * n, 2)))}


def order_error(xs, n: int) -> dict:
    """Standard deviation (%) of log(mean B / mean A) over every window, per order."""
    x = np.asarray(xs, float)
    out = {}
    for name, (a, b) in orders(n).items():
        errs = [np.log(x[[s + i for i in b]].mean() / x[[s + i for i in a]].mean())
                for s in range(len(x) - 2 * n + 1)]
        out[name] = float(np.std(errs) * 100) if len(errs) > 1 else None
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="a run's folder (summary.json)")
    p.add_argument("--block", type=int, default=8, help="repetitions per block (default 8)")
    p.add_argument("--pair", type=int, default=8,
                   help="repetitions per fabric in the order comparison (default 8)")
    args = p.parse_args(argv)
    for run in args.runs:
        s = series(run)
        print(f"{run}: {len(s['fct'])} repetitions")
        for key, label in (("fct", "FCT p50"), ("probe", "probe p50")):
            xs = [v for v in s[key] if v is not None]
            if len(xs) < 2 * args.block:
                print(f"  {label}: {len(xs)} repetitions, too few for blocks of {args.block}")
                continue
            b = blocks(xs, args.block)
            if b is None:
                print(f"  {label}: mean {np.mean(xs):.3f}; no spread inside its blocks")
                continue
            e = order_error(xs, args.pair)
            print(f"  {label}: mean {np.mean(xs):.3f}; {b['blocks']} blocks of {args.block}: "
                  f"block means {b['ratio']:.2f}x their standard error (F {b['F']:.2f}, "
                  f"p {b['p']:.3f}); lag-1 autocorrelation {lag1(xs):.2f}; ratio error by "
                  "order " + ", ".join(f"{k} {v:.2f}%" for k, v in e.items() if v is not None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
