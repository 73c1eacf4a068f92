"""Where, if anywhere, do the fabrics separate?  A scenario at rising load on the flow-level
model (no root; minutes for the 1,024-GPU scenarios on one core).

    .venv/bin/python -m benchmarks.bench_load [SCENARIO] [--factors 1 2 4] [--quick]
    .venv/bin/python -m benchmarks.bench_load cross-rail --factors 0.5 1 2

Each factor multiplies the offered load: a trace's arrivals come that many times faster
(``time_scale`` divided by it), Poisson or bursty arrivals at that many times the rate.
Figures, for each load and each fabric after the first: the paired ratio to the first
fabric (the same requests, seed by seed) of FCT p50, FCT p99 and TTFT p99 with its 95%
interval and verdict, and the busiest link (mean over repetitions of each repetition's
highest 0.5 s utilisation); the verdicts are findings, whichever way they go.  Target: each
load of ``production-gqa`` (the default scenario: four 1,024-GPU fabrics, three
repetitions) carried in under 60 s; other scenarios have none.  ``--quick``: loads x1 and
x2 only.
"""
import argparse
import tempfile
import time

from benchmarks.common import fail, limit, target
from testbed.analysis.compare import (
    PAIRED,
    comparison,
    load_runs,
    paired_of,
)
from testbed.core import verdict
from testbed.errors import UsageError
from testbed.experiment.pipeline import load_scenario
from testbed.experiment.runner import run_scenario

TARGETS_S = {"production-gqa": 60.0}


def at_load(sc, factor: float) -> None:
    w = sc.workload
    if w.arrivals == "trace":
        w.time_scale = w.time_scale / factor
    else:
        w.rate = w.rate * factor


def one_load(scenario: str, factor: float) -> None:
    """Carry ``scenario`` at ``factor`` times its load on the model and print the ratios."""
    sc = load_scenario(scenario)
    sc.sweep = None
    at_load(sc, factor)
    w = sc.workload
    load = f"time_scale {w.time_scale:g}" if w.arrivals == "trace" else f"rate {w.rate:g}/s"
    t0 = time.time()
    with tempfile.TemporaryDirectory() as out, limit(1800, f"load x{factor:g}"):
        run_scenario(sc, out, backend="model", log=lambda m: None)
        groups = comparison(load_runs([out]))
    took, goal = time.time() - t0, TARGETS_S.get(sc.name)
    print(f"load x{factor:g} ({load}), {sc.repetitions} repetitions, {took:.0f} s; "
          + ("no target" if goal is None else target(took < goal, f"under {goal:g} s")),
          flush=True)
    for g in groups:
        rows = {r["metric"]: r for r in g["rows"]}
        util = rows["link util max"]["values"]
        names = g["runs"]
        print(f"  {names[0]}: busiest link {util[0]:.2f}, TTFT p99 "
              f"{rows['TTFT p99 ms']['values'][0]:,.1f} ms")
        for i, name in enumerate(names[1:], start=1):
            cells = []
            for metric in PAIRED:
                pr = paired_of(rows[metric], i)
                if not pr or pr["lo"] is None:
                    cells.append(f"{metric[:-3]} -")
                    continue
                cells.append(f"{metric[:-3]} {pr['ratio']:.3f} ({pr['lo']:.3f}-"
                             f"{pr['hi']:.3f}) {verdict.words(pr, names[0], name)}")
            print(f"  {name}/{names[0]}: busiest link {util[i]:.2f}; " + "; ".join(cells),
                  flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="production-gqa",
                   help="scenario file or shipped name (default production-gqa)")
    p.add_argument("--factors", type=float, nargs="+", default=None,
                   help="load multipliers (default 1 2 4; --quick: 1 2)")
    p.add_argument("--quick", action="store_true", help="loads x1 and x2 only")
    args = p.parse_args(argv)
    factors = args.factors or ([1.0, 2.0] if args.quick else [1.0, 2.0, 4.0])
    if any(f <= 0 for f in factors):
        p.error("--factors must be above 0")
    try:
        load_scenario(args.scenario)
    except UsageError as err:
        fail(str(err))
    for factor in factors:
        one_load(args.scenario, factor)


if __name__ == "__main__":
    main()
