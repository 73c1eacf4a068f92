"""How much the flow-level model, carried on the same ECMP draws, narrows another backend's
intervals as a control variate (no root; seconds on the model beside a finished run).

    .venv/bin/python benchmarks/bench_control.py SCENARIO RUN_DIR [--model-draws N]
                                 [--blocks 5,10,16] [--samples N] [--against OTHER_DIR]

RUN_DIR is a finished run of SCENARIO on a backend that puts each kept-open connection on
the path the model draws for it (:mod:`testbed.core.ecmp`): ns-3, and the emulation, whose
controller pins each connection to that path (``$ZCUBE_ECMP=hash`` leaves it to OVS's
select groups, whose draws are not the model's).  With the same seed a
repetition carries the same requests over the same paths on both, so what makes one draw's
Clos tail long (two connections of a leaf on one spine) makes it long on both: the model's
per-draw ratios follow the measured ones, and the model's mean over N other draws (seconds)
tells how lucky the measured run's few draws were.  This carries SCENARIO on the model over
RUN_DIR's seeds and over the N seeds after them, and prints, per fabric after the first and
per figure: the correlation of the per-draw log ratios, the paired ratio over all of
RUN_DIR's draws, and, over consecutive blocks of its draws as a run with fewer would have
had them, each block's plain interval (:func:`testbed.core.metrics.paired_ratio`) against
the one with the control (:func:`testbed.core.metrics.controlled_ratio`): half-widths as a
share of the value, and in how many blocks each holds the whole run's ratio (with the
control, the narrowest estimate there is of the measured backend's mean).  ``--samples``
adds, per block size, that many sets of draws taken at random: how often their half-width
is under 7.5% and how often their interval holds the answer; ``--against`` takes the answer
from another run of SCENARIO on other seeds, so no set shares a draw with it.  Asserts
nothing.
"""
import argparse
import json
import math
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.analysis.compare import PAIRED, load_runs, log_ratios, per_seed  # noqa: E402
from testbed.core.metrics import NARROW, controlled_ratio, paired_ratio  # noqa: E402
from testbed.experiment.pipeline import load_scenario  # noqa: E402
from testbed.experiment.runner import run_scenario  # noqa: E402


def on_model(scenario: str, seed: int | None, draws: int) -> dict:
    """Run name -> summary of ``scenario`` carried on the model over ``draws`` seeds from
    ``seed`` (None: the scenario's own), without its sweep."""
    sc = load_scenario(scenario)
    sc.seed = sc.seed if seed is None else seed
    sc.repetitions, sc.sweep = draws, None
    for f in sc.fabrics:            # every fabric over every draw, whatever its own count
        f.repetitions = None
    with tempfile.TemporaryDirectory() as out:
        run_scenario(sc, out, backend="model", log=lambda m: None)
        return {r["run"]: r for r in load_runs([out])}


def half(p: dict) -> float:
    return (p["hi"] - p["lo"]) / 2 / p["ratio"]


def estimates(ys: list, xs: list, big: list) -> tuple[dict, dict]:
    """The plain paired ratio of draws with log ratios ``ys`` and the one with the control."""
    return (paired_ratio([1.0] * len(ys), [math.exp(v) for v in ys]),
            controlled_ratio(ys, xs, big))


def blocks(ys: list, xs: list, big: list, k: int, whole: float) -> str:
    """One line on consecutive blocks of ``k`` draws: half-width ranges and how many hold
    ``whole``, plain and with the control."""
    got = [estimates(ys[i:i + k], xs[i:i + k], big) for i in range(0, len(ys) - k + 1, k)]
    if not got:
        return ""
    plain, ctl = [p for p, _ in got], [c for _, c in got]

    def held(ps):
        return sum(p["lo"] <= whole <= p["hi"] for p in ps)

    def widths(ps):
        return f"{min(map(half, ps)):.1%}-{max(map(half, ps)):.1%}" if ps else "-"
    return (f"    blocks of {k:>2} ({len(plain)}): half-width plain {widths(plain)}, holding "
            f"the whole run's ratio in {held(plain)}; with the control {widths(ctl)}, holding "
            f"it in {held(ctl)}")


def samples(ys: list, xs: list, big: list, k: int, count: int, whole: float, what: str) -> str:
    """One line on ``count`` sets of ``k`` of the draws taken at random (the same sets for
    every figure): how often the half-width is under 7.5% and the interval holds ``whole``
    (``what`` says what that is), plain and with the control."""
    rng = random.Random(k)
    got = [estimates([ys[i] for i in pick], [xs[i] for i in pick], big)
           for pick in (rng.sample(range(len(ys)), k) for _ in range(count))]

    def share(test):
        return f"{sum(map(test, got)) / count:.0%}"
    return (f"    {count} random sets of {k:>2}: half-width under {NARROW:.1%} plain "
            f"{share(lambda g: half(g[0]) < NARROW)}, with the control "
            f"{share(lambda g: half(g[1]) < NARROW)}; holding {what} plain "
            f"{share(lambda g: g[0]['lo'] <= whole <= g[0]['hi'])}, with the control "
            f"{share(lambda g: g[1]['lo'] <= whole <= g[1]['hi'])}")


def draws(scenario: str, run_dir: str, after: int, model_draws: int) -> tuple[dict, dict]:
    """A finished run's metadata and, per (fabric after the first, figure), its per-draw log
    ratios, the model's on the same draws and the model's over ``model_draws`` seeds from
    ``after``; exits in one line where RUN_DIR is not a run of ``scenario`` the model
    repeats."""
    with open(os.path.join(run_dir, "run.json")) as f:
        meta = json.load(f)
    seeds = meta["seeds"]
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        sys.exit(f"bench_control: {run_dir}'s seeds are not consecutive")
    if meta.get("scenario") != load_scenario(scenario).name:
        sys.exit(f"bench_control: {run_dir} is a run of {meta.get('scenario')}, not of "
                 f"{scenario}")
    measured = {r["run"]: r for r in load_runs([run_dir])}
    same = on_model(scenario, seeds[0], len(seeds))
    many = on_model(scenario, after, model_draws)
    names = meta["runs"]
    for name in names:
        if per_seed(measured[name], lambda s: s["transfers_total"]) != \
                per_seed(same[name], lambda s: s["transfers_total"]):
            sys.exit(f"bench_control: {name}'s repetitions carried other transfers than the "
                     f"model's: is {run_dir} a run of {scenario}?")
    out = {}
    for other in names[1:]:
        for metric in PAIRED:
            ym = log_ratios(measured[names[0]], measured[other], metric)
            xm = log_ratios(same[names[0]], same[other], metric)
            keys = sorted(set(ym) & set(xm))
            out[(other, metric)] = ([ym[k] for k in keys], [xm[k] for k in keys],
                                    list(log_ratios(many[names[0]], many[other],
                                                    metric).values()))
    return meta, out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", help="the scenario RUN_DIR carried (a file or a shipped name)")
    p.add_argument("run_dir", help="a finished run of it on another backend")
    p.add_argument("--model-draws", type=int, default=1000,
                   help="other draws of the model, whose mean is the control's (default 1000)")
    p.add_argument("--blocks", default="5,10,16",
                   help="block sizes, comma-separated (default 5,10,16)")
    p.add_argument("--samples", type=int, default=0, metavar="N",
                   help="also N sets of each block size drawn at random from RUN_DIR's draws "
                        "(default 0: none)")
    p.add_argument("--against", metavar="OTHER_DIR",
                   help="another run of SCENARIO on other seeds: hold every block and set "
                        "against its whole-run estimate with the control (one that shares "
                        "no draw with them) instead of RUN_DIR's own")
    args = p.parse_args()
    sizes = [int(v) for v in args.blocks.split(",")]
    last = 0
    for d in [args.run_dir] + ([args.against] if args.against else []):
        if not os.path.isfile(os.path.join(d, "run.json")):
            sys.exit(f"bench_control: {d} is not a finished run (no run.json)")
        with open(os.path.join(d, "run.json")) as f:
            last = max(last, json.load(f)["seeds"][-1])
    meta, figs = draws(args.scenario, args.run_dir, last + 1, args.model_draws)
    theirs = draws(args.scenario, args.against, last + 1, args.model_draws)[1] \
        if args.against else {}
    print(f"{args.scenario}: {meta['backend']} over {len(meta['seeds'])} draws "
          f"({args.run_dir}) against the model on the same draws and over "
          f"{args.model_draws} others" + (f"; the answer from {args.against}" if args.against
                                          else ""))
    for (other, metric), (ys, xs, big) in figs.items():
        whole, ctl = estimates(ys, xs, big)
        if ctl is None:
            print(f"  {other}/{meta['runs'][0]} {metric}: fewer than two draws")
            continue
        rho = "-" if ctl["rho"] is None else f"{ctl['rho']:.3f}"
        print(f"  {other}/{meta['runs'][0]} {metric}: correlation {rho}; "
              f"{meta['backend']} {whole['ratio']:.3f} ({whole['lo']:.3f}-"
              f"{whole['hi']:.3f}), with the control {ctl['ratio']:.3f} ({ctl['lo']:.3f}-"
              f"{ctl['hi']:.3f}); the model {math.exp(sum(xs) / len(xs)):.3f} on these "
              f"draws, {math.exp(sum(big) / len(big)):.3f} over {len(big)}")
        answer, what = ctl["ratio"], "the whole run's ratio"
        if (other, metric) in theirs:
            them = estimates(*theirs[(other, metric)])[1]
            answer, what = them["ratio"], f"the other run's {them['ratio']:.3f}"
            print(f"    the other run, {len(theirs[(other, metric)][0])} draws: with the "
                  f"control {them['ratio']:.3f} ({them['lo']:.3f}-{them['hi']:.3f})")
        for k in sizes:
            line = blocks(ys, xs, big, k, answer)
            if line:
                print(line, flush=True)
            if args.samples and k <= len(ys):
                print(samples(ys, xs, big, k, args.samples, answer, what), flush=True)


if __name__ == "__main__":
    main()
