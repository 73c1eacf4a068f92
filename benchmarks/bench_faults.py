"""Randomised single failures under PD traffic, on ZCube n=4 and ROFT 4x4 (root).

Each repetition takes one random element down (a switch-to-switch cable, a NIC port or a
whole switch, seeded) for two seconds while KV transfers run, restores it, and counts the
transfers in flight through it, those started again over another port pairing, those lost
although their GPUs stayed connected (must be 0) and those cut off.  Prints figures;
asserts nothing.  Usage: sudo .venv/bin/python benchmarks/bench_faults.py [--reps N]
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.core.metrics import percentile  # noqa: E402
from testbed.experiment.runner import run_scenario  # noqa: E402
from testbed.experiment.scenario import loads  # noqa: E402

SCENARIO = """\
name: bench-faults
link_mbps: 100
repetitions: {reps}
verify_sample: 20
fabrics:
  - {{name: zcube, builder: zcube, params: {{n: 4, gpus_per_server: 4}}, policy: zcube}}
  - {{name: roft, builder: roft, params: {{servers: 4, gpus_per_server: 4}}, policy: ecmp}}
# a prefill 20x faster than the preset's keeps the network busy: transfers are in flight
# when the fault strikes
model: {{preset: llama3-70b, prefill_tokens_per_s: 400000}}
deployment: {{placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: 8, count: 40, input_tokens: 32768}}
faults:
  - {{at_s: 2.0, element: "random:{kind}", duration_s: 2}}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=4, help="failures per fabric and kind")
    args = ap.parse_args()
    from mininet.log import setLogLevel
    setLogLevel("warning")
    print(f"{'fabric':<10} {'kind':<12} {'injected':>8} {'affected':>8} {'again':>6} "
          f"{'lost':>5} {'cut off':>7} {'reroute ms p50':>14} {'max':>6}")
    for kind in ("fabric-link", "nic", "switch"):
        with tempfile.TemporaryDirectory() as out:
            sc = loads(SCENARIO.format(reps=args.reps, kind=kind), "bench-faults.yaml")
            runs = run_scenario(sc, out, log=lambda m: None)
        for name, s in runs.items():
            downs = [f for f in s.get("faults", []) if f["action"] == "down"]
            times = [1000 * f["since_injection_s"] for f in downs if f.get("since_injection_s")]
            print(f"{name:<10} {kind:<12} {len(downs):>8} "
                  f"{sum(f['transfers_affected'] for f in downs):>8} "
                  f"{sum(f['transfers_retried'] for f in downs):>6} "
                  f"{sum(f['transfers_lost'] for f in downs):>5} "
                  f"{sum(f['transfers_cut_off'] for f in downs):>7} "
                  f"{percentile(times, 50) if times else float('nan'):>14.1f} "
                  f"{max(times) if times else float('nan'):>6.1f}", flush=True)


if __name__ == "__main__":
    main()
