"""How much of a scenario's fabric comparison is the emulator's per-switch cost (model, no
root, seconds).

    .venv/bin/python benchmarks/bench_hops.py [SCENARIO]      # default: the demo

Carries the scenario on the flow-level model backend twice, fabric only (no datapath
resource): once with the store-and-forward the model was fitted to in the emulation
(``DEFAULT_HOP_BYTES`` per switch crossed, at that hop's rate: TSO segments forwarded whole
at emulated rates), once without (``hop_bytes`` 0, as at real rates, where a frame crosses
a switch in nanoseconds).  Prints each run's FCT median and P99 (means over repetitions)
and each fabric's ratio to the first fabric per placement.  Where the ratios differ between
the two, the difference is a cost of emulating slowly, not of the fabrics.  Asserts nothing.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.experiment.pipeline import load_scenario  # noqa: E402
from testbed.experiment.runner import run_scenario  # noqa: E402
from testbed.model.simulate import DEFAULT_HOP_BYTES  # noqa: E402


def fct(summary: dict, q: str) -> float:
    return summary["fct_ms"][q]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="demo")
    args = p.parse_args()
    sc = load_scenario(args.scenario)
    ref = sc.fabrics[0].name
    print(f"{sc.name} on the model backend, {sc.repetitions} repetition(s), fabric only")
    for hop_bytes in (DEFAULT_HOP_BYTES, 0):
        opts = {f.name: {"hop_bytes": hop_bytes} for f in sc.fabrics}
        with tempfile.TemporaryDirectory() as out:
            got = run_scenario(sc, out, backend="model", model_options=opts,
                               log=lambda m: None)
        print(f"store-and-forward {hop_bytes:,} bytes per switch crossed:")
        for placement in sc.placements:
            base = got[f"{ref}-{placement}"]
            for spec in sc.fabrics:
                s = got[f"{spec.name}-{placement}"]
                run = f"{spec.name}-{placement}"
                print(f"  {run:<18} FCT p50 {fct(s, 'p50'):8.3f} ms "
                      f"p99 {fct(s, 'p99'):8.3f} ms   /{ref}: p50 "
                      f"{fct(s, 'p50') / fct(base, 'p50'):.3f} p99 "
                      f"{fct(s, 'p99') / fct(base, 'p99'):.3f}", flush=True)


if __name__ == "__main__":
    main()
