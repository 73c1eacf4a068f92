"""How much the flow-level model, carried on the same ECMP draws, narrows another backend's
intervals as a control variate (no root; seconds on the model beside a finished run).

    .venv/bin/python benchmarks/bench_control.py SCENARIO RUN_DIR [--model-draws N]
                                                 [--blocks 5,10,16]

RUN_DIR is a finished run of SCENARIO on a backend that puts each kept-open connection on
the path the model draws for it (:mod:`testbed.core.ecmp`): ns-3, and the emulation, whose
controller pins each connection to that path (``$ZCUBE_ECMP=hash`` leaves it to OVS's
select groups, whose draws are not the model's).  With the same seed a
repetition carries the same requests over the same paths on both, so what makes one draw's
Clos tail long (two connections of a leaf on one spine) makes it long on both: the model's
per-draw ratios follow the measured ones, and the model's mean over N draws (seconds) tells
how lucky the measured run's few draws were.  This carries SCENARIO on the model over
RUN_DIR's seeds and over N draws, and prints, per fabric after the first and per figure:
the correlation of the per-draw log ratios, the paired ratio over all of RUN_DIR's draws,
and, over consecutive blocks of its draws as a run with fewer would have had them, each
block's plain interval (:func:`testbed.core.metrics.paired_ratio`) against the one with the
control (:func:`testbed.core.metrics.controlled_ratio`): half-widths as a share of the
value, and in how many blocks each holds the whole run's ratio (with the control, the
narrowest estimate there is of the measured backend's mean).  Asserts nothing.
"""
import argparse
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.analysis.compare import PAIRED, load_runs, log_ratios, per_seed  # noqa: E402
from testbed.core.metrics import controlled_ratio, paired_ratio  # noqa: E402
from testbed.experiment.pipeline import load_scenario  # noqa: E402
from testbed.experiment.runner import run_scenario  # noqa: E402


def on_model(scenario: str, seed: int | None, draws: int) -> dict:
    """Run name -> summary of ``scenario`` carried on the model over ``draws`` seeds from
    ``seed`` (None: the scenario's own), without its sweep."""
    sc = load_scenario(scenario)
    sc.seed = sc.seed if seed is None else seed
    sc.repetitions, sc.sweep = draws, None
    with tempfile.TemporaryDirectory() as out:
        run_scenario(sc, out, backend="model", log=lambda m: None)
        return {r["run"]: r for r in load_runs([out])}


def half(p: dict) -> float:
    return (p["hi"] - p["lo"]) / 2 / p["ratio"]


def blocks(ys: list, xs: list, mu: float, k: int, whole: float) -> str:
    """One line on consecutive blocks of ``k`` draws: half-width ranges and how many hold
    ``whole``, plain and with the control."""
    plain, ctl = [], []
    for i in range(0, len(ys) - k + 1, k):
        y, x = ys[i:i + k], xs[i:i + k]
        plain.append(paired_ratio([1.0] * k, [math.exp(v) for v in y]))
        ctl.append(controlled_ratio(y, x, mu))
    if not plain:
        return ""
    flat = sum(c is None for c in ctl)
    ctl = [c for c in ctl if c is not None]

    def held(ps):
        return sum(p["lo"] <= whole <= p["hi"] for p in ps)

    def widths(ps):
        return f"{min(map(half, ps)):.1%}-{max(map(half, ps)):.1%}" if ps else "-"
    return (f"    blocks of {k:>2} ({len(plain)}): half-width plain {widths(plain)}, holding "
            f"the whole run's ratio in {held(plain)}; with the control {widths(ctl)}, holding "
            f"it in {held(ctl)}" + (f" ({flat} where the model's ratio did not vary)"
                                 if flat else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", help="the scenario RUN_DIR carried (a file or a shipped name)")
    p.add_argument("run_dir", help="a finished run of it on another backend")
    p.add_argument("--model-draws", type=int, default=400,
                   help="draws of the model whose mean is the control's (default 400)")
    p.add_argument("--blocks", default="5,10,16",
                   help="block sizes, comma-separated (default 5,10,16)")
    args = p.parse_args()
    with open(os.path.join(args.run_dir, "run.json")) as f:
        meta = json.load(f)
    seeds = meta["seeds"]
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        sys.exit("bench_control: RUN_DIR's seeds are not consecutive")
    if meta.get("scenario") != load_scenario(args.scenario).name:
        sys.exit(f"bench_control: RUN_DIR is a run of {meta.get('scenario')}, not of "
                 f"{args.scenario}")
    measured = {r["run"]: r for r in load_runs([args.run_dir])}
    same = on_model(args.scenario, seeds[0], len(seeds))
    many = on_model(args.scenario, seeds[0], args.model_draws)
    names = meta["runs"]
    for name in names:
        if per_seed(measured[name], lambda s: s["transfers_total"]) != \
                per_seed(same[name], lambda s: s["transfers_total"]):
            sys.exit(f"bench_control: {name}'s repetitions carried other transfers than the "
                     f"model's: is RUN_DIR a run of {args.scenario}?")
    print(f"{args.scenario}: {meta['backend']} over {len(seeds)} draws ({args.run_dir}) "
          f"against the model on the same draws and over {args.model_draws}")
    for other in names[1:]:
        for metric in PAIRED:
            ym = log_ratios(measured[names[0]], measured[other], metric)
            xm = log_ratios(same[names[0]], same[other], metric)
            keys = sorted(set(ym) & set(xm))
            ys, xs = [ym[k] for k in keys], [xm[k] for k in keys]
            big = list(log_ratios(many[names[0]], many[other], metric).values())
            mu = sum(big) / len(big)
            whole = paired_ratio([1.0] * len(ys), [math.exp(v) for v in ys])
            ctl = controlled_ratio(ys, xs, mu)
            if ctl is None:
                print(f"  {other}/{names[0]} {metric}: the model's ratio does not vary")
                continue
            print(f"  {other}/{names[0]} {metric}: correlation {ctl['rho']:.3f}; "
                  f"{meta['backend']} {whole['ratio']:.3f} ({whole['lo']:.3f}-"
                  f"{whole['hi']:.3f}), with the control {ctl['ratio']:.3f} ({ctl['lo']:.3f}-"
                  f"{ctl['hi']:.3f}); the model {math.exp(sum(xs) / len(xs)):.3f} on these "
                  f"draws, {math.exp(mu):.3f} over {len(big)}")
            for k in (int(v) for v in args.blocks.split(",")):
                line = blocks(ys, xs, mu, k, ctl["ratio"])
                if line:
                    print(line, flush=True)


if __name__ == "__main__":
    main()
