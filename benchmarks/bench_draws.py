"""How much of a comparison is the ECMP hash draw?  Many draws on the flow-level model (no
root, seconds).

    .venv/bin/python benchmarks/bench_draws.py [SCENARIO] [--draws N]   # default cross-rail, 100

With kept-open connections each repetition pins every connection to one path by a hash
drawn afresh for it (its seed), as RoCE pins a queue pair by its UDP source port, so a
Clos with ECMP is a different network in every repetition: in one draw no two connections
of a leaf share a spine, in another two do.  This carries the scenario on the model with
N repetitions (N draws, each with its own requests too) and prints, per placement, figure
and fabric after the first: the per-draw ratios to the first fabric (paired by seed) as
quantiles, the share of draws where the ratio is above 1.15, the paired mean with its 95%
interval over the N draws, and how many repetitions an interval of half-width 7.5% would
need at that spread (what the emulation, at about 30 s per repetition and fabric, can
afford is far fewer).  Asserts nothing.
"""
import argparse
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.analysis.compare import (  # noqa: E402
    METRICS,
    PAIRED,
    comparison,
    load_runs,
    paired_of,
    per_seed,
)
from testbed.core.metrics import t95  # noqa: E402
from testbed.experiment.pipeline import load_scenario  # noqa: E402
from testbed.experiment.runner import run_scenario  # noqa: E402

NARROW = math.log(1.075)


def per_draw(runs: dict, ref: str, other: str, metric: str) -> list:
    """Per-seed ratios other / ref of ``metric`` (lower is better)."""
    get = next(g for label, g, *_ in METRICS if label == metric)
    a, b = per_seed(runs[ref], get), per_seed(runs[other], get)
    return [b[k] / a[k] for k in a if a[k] and b.get(k) is not None]


def quantiles(xs: list, qs=(0.05, 0.25, 0.5, 0.75, 0.95)) -> list:
    xs = sorted(xs)
    return [xs[min(len(xs) - 1, int(q * len(xs)))] for q in qs]


def needed(ratios: list) -> int:
    """Repetitions for a 95% half-width of 7.5% on the log ratio at this spread."""
    logs = [math.log(r) for r in ratios]
    m = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
    n = 2
    while t95(n) * sd / math.sqrt(n) > NARROW and n < 100_000:
        n += 1
    return n


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="cross-rail")
    p.add_argument("--draws", type=int, default=100, help="repetitions (default 100)")
    args = p.parse_args()
    sc = load_scenario(args.scenario)
    sc.repetitions = args.draws
    for f in sc.fabrics:            # every fabric over every draw, whatever its own count
        f.repetitions = None
    sc.sweep = None
    print(f"{sc.name} on the model backend, {args.draws} draws (repetitions, seeds "
          f"{sc.seed}-{sc.seed + args.draws - 1})")
    with tempfile.TemporaryDirectory() as out:
        run_scenario(sc, out, backend="model", log=lambda m: None)
        found = load_runs([out])
    runs = {r["run"]: r for r in found}
    for g in comparison(found):
        names, rows = g["runs"], {r["metric"]: r for r in g["rows"]}
        print(f"placement {g['placement']}: ratio run / {names[0]}, paired by seed")
        print(f"  {'run':<12} {'figure':<9} {'q05':>6} {'q25':>6} {'q50':>6} {'q75':>6} "
              f"{'q95':>6}  {'>1.15':>6}  {'mean (95%)':<22} {'reps for 7.5%':>13}")
        for i, name in enumerate(names[1:], start=1):
            for metric in PAIRED:
                ratios = per_draw(runs, names[0], name, metric)
                pr = paired_of(rows[metric], i)
                above = sum(r > 1.15 for r in ratios) / len(ratios)
                mean = f"{pr['ratio']:.3f} ({pr['lo']:.3f}-{pr['hi']:.3f})"
                print(f"  {name:<12} {metric[:-3]:<9} "
                      + " ".join(f"{q:6.3f}" for q in quantiles(ratios))
                      + f"  {above:6.2f}  {mean:<22} {needed(ratios):>13}", flush=True)


if __name__ == "__main__":
    main()
