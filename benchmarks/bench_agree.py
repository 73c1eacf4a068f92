"""Do runs of one scenario agree with each other, within what each run's intervals say?

    .venv/bin/python benchmarks/bench_agree.py DIR [DIR ...] [--all] [--code DIGEST]
        [--rule separation|band] [--tries 3] [--draws 20000] [--as-if 12,16,32] [--probe]

Each DIR is one run (a scenario's output folder, holding run.json) or a folder of runs as
``bench_repeat.py -o DIR`` keeps them (DIR/run<k>, one try of that benchmark; runs it set
aside or moved aside are left out).  For each placement, figure (FCT p50, FCT p99, TTFT p99)
and fabric against the group's first, over the runs whose fabrics were all faithful (``--all``:
every run; ``--code``: only runs made by that code), from each run's ratio paired by seed and
its 95% interval (Student's t on the log ratios, so a standard error is read back from it):

- the runs' ratios pooled with inverse-variance weights, and how far they disagree beyond
  their intervals: Cochran's Q and its p value, I^2 (the share of the spread between runs that
  their own intervals do not explain) and tau, the standard deviation of the log ratio from
  run to run beyond that (DerSimonian and Laird), beside the median within-run standard error;
- in how many runs the interval holds the pooled ratio, and how many runs gave each verdict
  (``--rule separation``, issue 12's, the product's and ``bench_repeat.py``'s since
  2026-12-05: a winner where the interval lies on one side of 1, else ``level`` where its
  half-width is under 7.5% of the ratio, else ``unclear``; ``--rule band``, the product's
  before: ``level`` wherever the interval lies inside 1 +/- 7.5%, even off 1, else as the
  other);
- the chance that ``--tries`` runs give the same verdict, drawn ``--draws`` times from those
  figures (each run's own ratio off the pooled one by tau, its estimate off that by a standard
  error and a repetition count drawn from the runs'), beside the share of tries (folders of
  runs) whose runs all did; with ``--as-if N,...``, the same chance were each run N
  repetitions long (its standard error scaled by the square root of its repetitions over N;
  tau, being from run to run, stays).

With ``--probe``, run by run over the same runs: each fabric's median FCT against the median
one-way delay of its datapath probe in that run (``fidelity.probe.p50_ms``: how fast the
emulator's forwarding thread passed a datagram across a bridge carrying nothing else), as a
correlation (Pearson and Spearman) and a slope, and each pair's FCT p50 ratio against the
difference of the two probe medians: whether what moves a run's figures from bring-up to
bring-up is the datapath's own speed.

What it tells: where I^2 is well above 0, a run's interval understates what another run of
the same scenario would show (each bring-up of the emulator measures a little differently);
where the pooled ratio sits near a verdict's boundary (1, or 1 +/- 7.5%), the verdicts of
separate runs differ however narrow each run's interval is.  The draws assume the figures are
independent of each other; the FCT p50 and P99 of one run are not quite.  No root, no emulator;
prints, asserts nothing.
"""
import argparse
import math
import os
import statistics
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_repeat import code_of  # noqa: E402

from testbed.analysis.compare import comparison, load_runs, paired_of  # noqa: E402
from testbed.core.metrics import NARROW, band_verdict, paired_verdict, t95  # noqa: E402

METRICS = ("FCT p50 ms", "FCT p99 ms", "TTFT p99 ms")
WORDS = {"other": "{other} lower", "ref": "{ref} lower", "level": "level", "unclear": "unclear"}


def run_dirs(path: str) -> list[str]:
    """The runs in ``path``: itself when it holds run.json, else its ``run<k>`` folders that
    do (in k's order), leaving out those bench_repeat set or moved aside."""
    if os.path.isfile(os.path.join(path, "run.json")):
        return [path]
    if not os.path.isdir(path):
        raise ValueError(f"{path}: no such folder")
    found = [n for n in os.listdir(path) if n.startswith("run") and n[3:].isdigit()
             and os.path.isfile(os.path.join(path, n, "run.json"))]
    if not found:
        raise ValueError(f"{path}: no run here (no run.json in it or in its run<k> folders)")
    return [os.path.join(path, n) for n in sorted(found, key=lambda n: int(n[3:]))]


def collect(paths: list[str], code=None) -> list[dict]:
    """Every run in ``paths`` (made by ``code``, when given), read and compared once:
    ``{"try", "code", "docs", "groups"}`` each."""
    out = []
    for path in paths:
        for run in run_dirs(path):
            made_by = code_of(run)
            if code and made_by != code:
                continue
            docs = load_runs([run])
            out.append({"try": path, "code": made_by, "docs": docs, "groups": comparison(docs)})
    return out


RULES = {"band": band_verdict, "separation": paired_verdict}


def kept(runs: list[dict], faithful_only: bool):
    """``(run, group)`` for every placement group of ``runs`` (:func:`collect`), only those
    whose fabrics were all faithful with ``faithful_only``."""
    for run in runs:
        for g in run["groups"]:
            if not (faithful_only and any(m is False for m in g.get("faithful") or [])):
                yield run, g


def entries(runs: list[dict], faithful_only: bool, rule: str = "separation") -> dict:
    """(placement, metric, other, ref) -> one entry per run: its try (the DIR it came from),
    log ratio, standard error, repetitions and verdict."""
    out: dict = {}
    for run, g in kept(runs, faithful_only):
        names = g["runs"]
        for row in g["rows"]:
            if row["metric"] not in METRICS:
                continue
            for i in range(1, len(names)):
                p = paired_of(row, i)
                if not p or p["lo"] is None or p["lo"] <= 0:
                    continue
                se = math.log(p["hi"] / p["lo"]) / 2 / t95(p["n"])
                key = (g["placement"], row["metric"], names[i], names[0])
                out.setdefault(key, []).append(
                    {"try": run["try"], "m": math.log(p["ratio"]), "se": se, "n": p["n"],
                     "verdict": RULES[rule](p)})
    return out


def heterogeneity(ms: list[float], ses: list[float]) -> dict:
    """Inverse-variance pooled log ratio, Cochran's Q with its p value, I^2 and tau (the
    DerSimonian-Laird between-run standard deviation)."""
    from scipy import stats
    w = [1 / s ** 2 if s > 0 else 1e12 for s in ses]
    sw = sum(w)
    pooled = sum(wi * m for wi, m in zip(w, ms)) / sw
    q = sum(wi * (m - pooled) ** 2 for wi, m in zip(w, ms))
    df = len(ms) - 1
    tau2 = max(0.0, (q - df) / (sw - sum(wi * wi for wi in w) / sw)) if df else 0.0
    return {"pooled": pooled, "q": q, "df": df,
            "p": float(stats.chi2.sf(q, df)) if df else None,
            "i2": max(0.0, (q - df) / q) if q > 0 and df else 0.0, "tau": math.sqrt(tau2)}


def chance_same(pooled: float, tau: float, ses: list[float], ns: list[int], tries: int,
                draws: int, seed: int = 1, rule: str = "separation") -> float:
    """The share of ``draws`` sets of ``tries`` runs that give one verdict (not unclear):
    each run's own log ratio drawn about ``pooled`` with ``tau``, its estimate about that
    with a (standard error, repetitions) pair drawn from the runs', its interval as a run's."""
    import numpy as np
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(ses), size=(draws, tries))
    se, t = np.asarray(ses)[pick], np.asarray([t95(n) for n in ns])[pick]
    est = pooled + tau * rng.standard_normal((draws, tries)) + se * rng.standard_normal(
        (draws, tries))
    half = t * se
    lo, hi = np.exp(est - half), np.exp(est + half)
    level = ((lo >= 1 - NARROW) & (hi <= 1 + NARROW) if rule == "band"
             else (hi - lo) / 2 < NARROW * np.exp(est))
    side = np.where(hi < 1, 1, np.where(lo > 1, 2, 3))
    verdict = np.where(level, 0, side) if rule == "band" else np.where(side < 3, side,
                                                                          np.where(level, 0, 3))
    same = (verdict == verdict[:, :1]).all(axis=1) & (verdict[:, 0] != 3)
    return float(same.mean())


def tries_same(rows: list[dict], tries: int) -> tuple[int, int]:
    """(tries whose ``tries`` runs gave one verdict, not unclear; tries with that many runs)."""
    by: dict = {}
    for r in rows:
        by.setdefault(r["try"], []).append(r["verdict"])
    full = [v for v in by.values() if len(v) == tries]
    return sum(1 for v in full if len(set(v)) == 1 and v[0] != "unclear"), len(full)


def line(key, rows: list[dict], tries: int, draws: int, rule: str = "separation",
         as_if: tuple = ()) -> str:
    placement, metric, other, ref = key
    ms, ses, ns = [r["m"] for r in rows], [r["se"] for r in rows], [r["n"] for r in rows]
    h = heterogeneity(ms, ses)
    held = sum(1 for r in rows
               if abs(r["m"] - h["pooled"]) <= t95(r["n"]) * r["se"])
    verdicts = Counter(WORDS[r["verdict"]].format(other=other, ref=ref) for r in rows)
    say = (f"  {metric:<12} {other}/{ref}: {len(rows)} runs, pooled {math.exp(h['pooled']):.3f}; "
           f"intervals holding it {held} of {len(rows)}")
    if h["df"]:
        say += (f"; log ratio from run to run: tau {h['tau']:.4f} against a median within-run "
                f"standard error {statistics.median(ses):.4f} (Q {h['q']:.1f} on {h['df']} df, "
                f"p {h['p']:.3g}, I^2 {h['i2']:.2f})")
    say += "; verdicts " + ", ".join(f"{v} {c}" for v, c in verdicts.most_common())
    chance = chance_same(h["pooled"], h["tau"], ses, ns, tries, draws, rule=rule)
    met, of = tries_same(rows, tries)
    say += f"; the same verdict in {tries} runs: {100 * chance:.0f}% drawn"
    say += f", {met} of {of} tries" if of else ""
    if as_if:
        drawn = [chance_same(h["pooled"], h["tau"],
                             [se * math.sqrt(n / k) for se, n in zip(ses, ns)], [k] * len(ns),
                             tries, draws, rule=rule) for k in as_if]
        say += (f"; as if {', '.join(map(str, as_if))} repetitions a run: "
                + ", ".join(f"{100 * c:.0f}%" for c in drawn))
    return say


def probe_points(runs: list[dict], faithful_only: bool) -> dict:
    """(placement, fabric) -> [(probe median ms, FCT p50 ms)] and (placement, other, ref) ->
    [(probe median difference other - ref, FCT p50 ratio)], one point per run with a probe."""
    out: dict = {}
    for run, g in kept(runs, faithful_only):
        probe = {(d.get("placement"), d["run"]): ((d.get("fidelity") or {}).get("probe")
                                                   or {}).get("p50_ms") for d in run["docs"]}
        row = next((r for r in g["rows"] if r["metric"] == "FCT p50 ms"), None)
        ms = [probe.get((g["placement"], n)) for n in g["runs"]]
        if row is None or any(m is None for m in ms):
            continue
        for name, m, v in zip(g["runs"], ms, row["values"]):
            out.setdefault((g["placement"], name), []).append((m, v))
        for i in range(1, len(g["runs"])):
            out.setdefault((g["placement"], g["runs"][i], g["runs"][0]), []).append(
                (ms[i] - ms[0], row["values"][i] / row["values"][0]))
    return out


def fit(points: list[tuple]) -> dict:
    """Pearson's and Spearman's r and the least-squares slope of y on x."""
    from scipy import stats
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return {"n": len(points), "pearson": float(stats.pearsonr(xs, ys)[0]),
            "spearman": float(stats.spearmanr(xs, ys)[0]),
            "slope": float(stats.linregress(xs, ys).slope)}


def probe_lines(found: dict) -> list[str]:
    """What :func:`probe_points` found, a line per fabric and pair (three runs at least)."""
    lines = []
    for key, pts in found.items():
        if len(pts) < 3 or len({p[0] for p in pts}) < 2:
            continue
        f = fit(pts)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        if len(key) == 2:
            lines.append(f"  {key[1]}: {f['n']} runs, median FCT {min(ys):.2f}-{max(ys):.2f} "
                         f"ms, probe median {min(xs):.3f}-{max(xs):.3f} ms: Pearson r "
                         f"{f['pearson']:.2f}, Spearman {f['spearman']:.2f}, "
                         f"{f['slope']:.1f} ms of FCT per ms of probe")
        else:
            lines.append(f"  FCT p50 {key[1]}/{key[2]} ({min(ys):.3f}-{max(ys):.3f}) against "
                         f"{key[1]}'s probe median minus {key[2]}'s: Pearson r "
                         f"{f['pearson']:.2f}, Spearman {f['spearman']:.2f}")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", metavar="DIR",
                   help="a run's folder, or a folder of run<k> folders (bench_repeat.py -o)")
    p.add_argument("--all", action="store_true",
                   help="every run, not only those whose fabrics were all faithful")
    p.add_argument("--code", default=None, metavar="DIGEST",
                   help="only runs made by this code (versions.code in run.json)")
    p.add_argument("--rule", choices=sorted(RULES), default="separation",
                   help="the verdict rule: separation (issue 12's and the product's, "
                        "default) or band (the product's before 2026-12-05); see above")
    p.add_argument("--tries", type=int, default=3, metavar="N",
                   help="runs per try whose verdicts must agree (default 3, as bench_repeat)")
    p.add_argument("--draws", type=int, default=20000, metavar="N",
                   help="draws behind the chance that N runs agree (default 20000)")
    p.add_argument("--probe", action="store_true",
                   help="also set each run's median FCT against its datapath probe's median")
    p.add_argument("--as-if", default="", metavar="N,...",
                   help="also draw the chance were each run N repetitions long")
    args = p.parse_args(argv)
    if args.tries < 2 or args.draws < 1:
        p.error("--tries must be 2 or more and --draws 1 or more")
    try:
        as_if = tuple(int(k) for k in args.as_if.split(",") if k.strip())
    except ValueError:
        as_if = (0,)
    if any(k < 2 for k in as_if):
        p.error(f"--as-if takes repetition counts of 2 or more, got {args.as_if!r}")
    try:
        runs = collect(args.dirs, args.code)
    except ValueError as err:
        p.error(str(err))
    found = entries(runs, not args.all, args.rule)
    if not found:
        p.error("no run with a paired ratio and an interval"
                + ("" if args.all else " among the faithful ones (--all: every run)"))
    codes = Counter(run["code"] or "not recorded" for run in runs)
    print("runs' code: " + ", ".join(f"{c} ({k})" for c, k in codes.most_common()))
    for placement in dict.fromkeys(k[0] for k in found):
        print(f"placement {placement}")
        for key, rows in found.items():
            if key[0] == placement:
                print(line(key, rows, args.tries, args.draws, args.rule, as_if))
    if args.probe:
        said = probe_lines(probe_points(runs, not args.all))
        print("the datapath probe's median one-way delay against the median FCT, run by run:"
              if said else "no three runs with a datapath probe (fidelity.probe.p50_ms)")
        print("\n".join(said))


if __name__ == "__main__":
    main()
