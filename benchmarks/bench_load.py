"""Where, if anywhere, do the fabrics separate?  A scenario at rising load on the flow-level
model (no root; minutes for the 1,024-GPU scenarios on one core).

    .venv/bin/python benchmarks/bench_load.py production-gqa --factors 1 2 4
    .venv/bin/python benchmarks/bench_load.py cross-rail --factors 0.5 1 2

Each factor multiplies the offered load: a trace's arrivals come that many times faster
(``time_scale`` divided by it), Poisson or bursty arrivals at that many times the rate.  For
each load and each fabric after the first: the paired ratio to the first fabric (the same
requests, seed by seed) of FCT p50, FCT p99 and TTFT p99 with its 95% interval and verdict,
and the busiest link (mean over repetitions of each repetition's highest 0.5 s
utilisation).  Asserts nothing; the verdicts are findings, whichever way they go.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.analysis.compare import (  # noqa: E402
    PAIRED,
    comparison,
    load_runs,
    paired_of,
    verdict_words,
)
from testbed.experiment.pipeline import load_scenario  # noqa: E402
from testbed.experiment.runner import run_scenario  # noqa: E402


def at_load(sc, factor: float) -> None:
    w = sc.workload
    if w.arrivals == "trace":
        w.time_scale = w.time_scale / factor
    else:
        w.rate = w.rate * factor


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario")
    p.add_argument("--factors", type=float, nargs="+", default=[1.0, 2.0, 4.0],
                   help="load multipliers (default 1 2 4)")
    args = p.parse_args()
    for factor in args.factors:
        sc = load_scenario(args.scenario)
        sc.sweep = None
        at_load(sc, factor)
        w = sc.workload
        load = (f"time_scale {w.time_scale:g}" if w.arrivals == "trace" else
                f"rate {w.rate:g}/s")
        t0 = time.time()
        with tempfile.TemporaryDirectory() as out:
            run_scenario(sc, out, backend="model", log=lambda m: None)
            groups = comparison(load_runs([out]))
        print(f"load x{factor:g} ({load}), {sc.repetitions} repetitions, "
              f"{time.time() - t0:.0f} s", flush=True)
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
                                 f"{pr['hi']:.3f}) {verdict_words(pr, names[0], name)}")
                print(f"  {name}/{names[0]}: busiest link {util[i]:.2f}; " + "; ".join(cells),
                      flush=True)


if __name__ == "__main__":
    main()
