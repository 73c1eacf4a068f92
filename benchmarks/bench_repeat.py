"""Does a scenario's verdict repeat?  Run it from scratch N times and compare the runs.

    sudo .venv/bin/python benchmarks/bench_repeat.py demo --runs 3 [-o DIR] [--backend B]
        [--repetitions N] [--order mirrored] [--host-retries N] [--quiet-s 30]
        [--wait-max 600] [--resume] [--faithful-reps] [--control N]
    .venv/bin/python benchmarks/bench_repeat.py demo --runs 3 --from DIR   # report again

For each placement, each metric (FCT p50, FCT p99, TTFT p99) and each fabric after the
group's first: every run's ratio to the first fabric, the spread of that ratio across runs
(max / min), every run's 95% confidence half-width as a share of each value, and the verdict
of each run.  Repetitions of the two fabrics carry the same requests (seed by seed), so the
verdict comes from the ratio paired by seed, by issue 12's rule: a winner where its 95%
interval lies wholly on one side of 1, ``level`` where it holds 1 and its half-width is
under 7.5% of the ratio (narrow enough to see a 15% difference), else ``unclear``.  Beside
it, the verdicts of the product's rule before 2026-12-05 (``level`` wherever the interval
lies within 1 +/- 7.5%, even off 1) and whether they were the same in every run.  Runs
without repetitions fall back on the two intervals: a winner where they do not overlap,
``level`` where they do and both half-widths are under 7.5% of their values.  Last, whether
every run gave the same verdict, whether every run was faithful, and, for each run's
fabrics, how many of the slowest 1% of transfers went through a datapath stall (the fidelity
record's ``stalled``: over half marks an FCT P99 verdict ``datapath stalls``).  Prints; asserts
nothing.  ``bench_agree.py DIR ...`` reads the runs of one or many such calls and says how far
they disagree beyond their intervals, and how often three runs would give one verdict.

An emulated run measures the machine's host too.  Before each one the benchmark waits
(``--wait-max`` seconds at most) for ``--quiet-s`` seconds in which the hypervisor took
under 15% of the CPUs in every 100 ms window (watched with every CPU waking every half
millisecond, as the emulator's do: a machine at rest sees no steal), and a run whose fidelity
record says it was not faithful while the hypervisor took that much is set aside (kept as
DIR/run<k>-aside<j>, and counted) and run again, ``--host-retries`` times at most (2, or none with
``--faithful-reps``, which judges a run by the repetitions that were faithful); the last one
counts whatever it gave.  Both choices go by the host's steal and the record, never by the ratios.

A long repeat (a 200-draw run takes about an hour here) need not happen in one sitting:
``--resume`` with ``-o DIR`` keeps every DIR/run<k> that an earlier call finished and runs
only the others, as long as the product's code is the same (``versions.code`` in each run's
run.json, a digest of the installed packages); a run made by other code is moved aside and
run again, and the report's last line says which code made the runs.  ``--faithful-reps``
judges each run over the seeds that every fabric carried faithfully (each repetition's own
fidelity record) instead of over the whole run, which an hour on a busy host rarely leaves
faithful; it says how many seeds it kept.

``--control N`` also carries the scenario on the flow-level model over N draws (seconds; the
control's mean is over those other than the runs' own) and gives each run's paired ratios
with the model on the same draws as a control variate
(:func:`testbed.analysis.compare.controlled`; docs/cross-rail.md, "Fewer draws with the
model beside them"), their half-widths and verdicts, and whether those repeat: for a backend
that puts each connection on the path the model draws for it.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testbed.analysis.compare import (  # noqa: E402
    comparison,
    controlled,
    load_runs,
    paired_of,
    verdict_words,
)
from testbed.core.fidelity import runs_held_back  # noqa: E402
from testbed.core.metrics import NARROW, band_verdict, paired_verdict  # noqa: E402
from testbed.errors import UsageError  # noqa: E402
from testbed.experiment.provenance import code_digest  # noqa: E402

METRICS = ("FCT p50 ms", "FCT p99 ms", "TTFT p99 ms")


def verdict(names, row, i, band: bool = False) -> str:
    """From the ratio paired by seed where the run has one, else from the two intervals;
    with ``band``, by the rule before 2026-12-05 (level wherever inside 1 +/- 7.5%)."""
    paired = paired_of(row, i)
    if paired and paired["lo"] is not None:
        v = (band_verdict if band else paired_verdict)(paired)
        return {"ref": names[0], "other": names[i]}.get(v, v)
    a, b = row["values"][0], row["values"][i]
    ca, cb = row["ci95"][0] or 0.0, row["ci95"][i] or 0.0
    if a is None or b is None:
        return "unclear"
    if abs(b - a) > ca + cb:
        return names[0] if a < b else names[i]
    return "level" if ca < NARROW * a and cb < NARROW * b else "unclear"


def one_run(scenario, out, backend, repetitions=None, order=None) -> list[dict]:
    cmd = [sys.executable, "-m", "testbed.cli", "run", scenario, "-o", out, "--no-report",
           "--force"]
    if backend:
        cmd += ["--backend", backend]
    if repetitions:
        cmd += ["--repetitions", str(repetitions)]
    if order:
        cmd += ["--order", order]
    # its own session, so that an interrupt reaches it once, from here, as SIGTERM (which
    # the testbed tears its fabric down on, like Ctrl-C); subprocess.run would kill it
    # mid-teardown
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        raise SystemExit(f"interrupted during {out}; its fabric was torn down") from None
    try:
        return load_runs([out])
    except UsageError as err:
        raise SystemExit(f"run {out} wrote no results (exit status {code}): {err}") from None


def quiet_run(args, out, emulated) -> list[dict]:
    """One run, after a quiet spell of the host, and again while the host held it back."""
    from testbed.emulation.fidelity import wait_quiet
    for j in range(args.host_retries + 1):
        if emulated:
            try:
                quiet, waited = wait_quiet(args.quiet_s, args.wait_max)
            except KeyboardInterrupt:
                raise SystemExit(f"interrupted while waiting for a quiet host before {out}; "
                                 "nothing was running") from None
            print(f"  host {'quiet' if quiet else 'still busy'} after {waited:.0f} s"
                  + ("" if quiet else ": running anyway"), flush=True)
        docs = one_run(args.scenario, out, args.backend, args.repetitions, args.order)
        held = runs_held_back(docs)
        if not held or j == args.host_retries:
            return docs
        aside = f"{out}-aside{j + 1}"
        os.rename(out, aside)
        print(f"  set aside -> {aside}: not faithful while the host was busy "
              f"({', '.join(held)}); running it again", flush=True)
    raise AssertionError("unreachable: the last try returns")


def finished(out) -> list[dict] | None:
    """The results a run kept in ``out`` once it finished (its run.json, written last, lists
    every fabric's run and each has its summary), else None: never run, or cut short."""
    try:
        with open(os.path.join(out, "run.json")) as f:
            meta = json.load(f)
        docs = load_runs([out])
    except (OSError, ValueError, UsageError):
        return None
    names = meta.get("runs") if isinstance(meta, dict) else None
    if not names or "finished" not in meta or sorted(d["run"] for d in docs) != sorted(names):
        return None
    return docs


def code_of(out) -> str | None:
    """The product code a kept run was made by (``versions.code`` in its run.json)."""
    try:
        with open(os.path.join(out, "run.json")) as f:
            return (json.load(f).get("versions") or {}).get("code")
    except (OSError, ValueError, AttributeError):
        return None


def keep(out, here: str) -> list[dict] | None:
    """With ``--resume``: a run an earlier call finished under this code, else None. A finished
    run made by other code is moved aside (``run<k>-code<digest>``) and run again, so that the
    runs compared all come from one version."""
    docs = finished(out)
    made_by = code_of(out) if docs else None
    if docs and made_by != here:
        aside = f"{out}-code{made_by or 'unknown'}"
        os.rename(out, aside)
        print(f"  {out} was made by other code ({made_by or 'not recorded'}, now {here}): "
              f"moved to {aside}, running it again", flush=True)
        return None
    return docs


def one_code(outs: list[str]) -> str:
    """The line saying which code made the runs compared."""
    codes = [code_of(o) or "not recorded" for o in outs]
    if len(set(codes)) == 1:
        return f"code: {codes[0]} in every run"
    return "code: NOT one version: " + ", ".join(
        f"{os.path.basename(o)} {c}" for o, c in zip(outs, codes))


def cut(docs: list[dict], faithful_only: bool) -> list[dict]:
    """``docs``, or with ``faithful_only`` the seeds every run carried faithfully (said)."""
    if not faithful_only:
        return docs
    from testbed.analysis.faithful import faithful_reps, note
    try:
        docs = faithful_reps(docs)
    except UsageError as err:
        raise SystemExit(str(err)) from None
    print(f"  {note(docs)}", flush=True)
    return docs


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def report(runs: list) -> None:
    for g0_index, g0 in enumerate(runs[0]):
        names = g0["runs"]
        print(f"placement {g0['placement']}")
        for metric in METRICS:
            for i in range(1, len(names)):
                ratios, shares, verdicts, paired, band = [], [], [], [], []
                for groups in runs:
                    row = next(r for r in groups[g0_index]["rows"] if r["metric"] == metric)
                    ratios.append(row["ratios"][i])
                    shares.append([None if v is None or c is None or not v else c / v
                                   for v, c in zip(row["values"], row["ci95"])])
                    verdicts.append(verdict(names, row, i))
                    band.append(verdict(names, row, i, band=True))
                    p = paired_of(row, i)
                    paired.append("-" if not p or p["lo"] is None
                                  else f"{p['ratio']:.3f} ({p['lo']:.3f}-{p['hi']:.3f})")
                good = [r for r in ratios if r]
                spread = max(good) / min(good) if good else None
                same = _same(verdicts)
                print(f"  {metric:<12} {names[i]}/{names[0]}: ratios "
                      + ", ".join("-" if r is None else f"{r:.3f}" for r in ratios)
                      + f"; spread {'-' if spread is None else f'{spread:.2f}'}; half-width "
                      + ", ".join("/".join("-" if x is None else f"{100 * x:.1f}%" for x in s)
                                  for s in shares)
                      + f"; paired {', '.join(paired)}"
                      + f"; verdicts {', '.join(verdicts)}; same in every run: "
                      + ("yes" if same else "no")
                      + f" (by the rule before: {', '.join(band)}; "
                      + f"{'yes' if _same(band) else 'no'})")
        faithful = [f for groups in runs for f in groups[g0_index].get("faithful", [])]
        if all(f is None for f in faithful):
            print("  fidelity: not measured (the model backend has no record)")
        else:
            print(f"  every run faithful: {'yes' if all(faithful) else 'no'}"
                  + _whole_runs([groups[g0_index] for groups in runs]))


def _same(verdicts: list[str]) -> bool:
    return len(set(verdicts)) == 1 and verdicts[0] != "unclear"


def stall_tails(all_docs: list[list[dict]]) -> str | None:
    """Each run's fabrics: how many of the slowest 1% of transfers went through a datapath
    stall (``fidelity.stalled``; what marks an FCT P99 verdict ``datapath stalls``)."""
    several = len({d.get("placement") for docs in all_docs for d in docs}) > 1
    parts = []
    for k, docs in enumerate(all_docs):
        cells = [f"{d['run']}{'/' + str(d.get('placement')) if several else ''} "
                 f"{sd['tail']}/{sd['tail_of']}" for d in docs
                 if (sd := (d.get("fidelity") or {}).get("stalled") or {}).get("tail_of")]
        if cells:
            parts.append(f"run{k} " + ", ".join(cells))
    return ("slowest 1% of transfers through a datapath stall: " + "; ".join(parts)
            if parts else None)


def _whole_runs(groups: list[dict]) -> str:
    """With ``--faithful-reps``: what the whole runs' own records said."""
    cuts = [c for g in groups for c in (g.get("faithful_reps") or {}).values()]
    if not cuts:
        return ""
    whole = sum(1 for c in cuts if c["whole_run"]["faithful"] is not False)
    return (f" over the seeds kept ({min(c['kept'] for c in cuts)}-"
            f"{max(c['kept'] for c in cuts)} of {max(c['of'] for c in cuts)}); as whole runs, "
            f"{whole} of {len(cuts)} faithful")


def control_report(all_docs: list[list[dict]], model: list[dict]) -> None:
    """Per placement, pair and paired figure: each run's controlled ratio, half-width and
    verdict, and whether the verdict is the same in every run."""
    def key(c):
        return c["placement"], c["metric"], c["ref"], c["run"]
    per_run = [{key(c): c for c in controlled(docs, model)} for docs in all_docs]
    keys = list(dict.fromkeys(k for cs in per_run for k in cs))
    if not keys:
        print("with the model as a control: nothing to control (the runs are not the model's "
              "run names)")
        return
    many = next(c["many"] for cs in per_run for c in cs.values())
    print(f"with the model as a control ({many} other draws on the model, besides the runs' "
          "own):")
    for where, metric, ref, name in keys:
        got = [cs.get((where, metric, ref, name)) for cs in per_run]
        words = [verdict_words(c, ref, name) if c else "-" for c in got]
        print(f"  {where} {metric:<12} {name}/{ref}: "
              + ", ".join("-" if c is None else f"{c['ratio']:.3f} ({c['lo']:.3f}-{c['hi']:.3f})"
                          for c in got)
              + "; half-width " + ", ".join("-" if c is None else
                                            f"{50 * (c['hi'] - c['lo']) / c['ratio']:.1f}%"
                                            for c in got)
              + "; correlation " + ", ".join("-" if c is None or c["rho"] is None
                                             else f"{c['rho']:.2f}" for c in got)
              + f"; verdicts {', '.join(words)}; same in every run: "
              + ("yes" if len(set(words)) == 1 and words[0] not in ("-", "not separated")
                 else "no"))


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--backend", default=None)
    p.add_argument("-o", "--output", default=None, help="keep the runs here (DIR/run<k>)")
    p.add_argument("--host-retries", type=int, default=None, metavar="N",
                   help="run an emulated run again, N times at most, when its fidelity record "
                        "says the host held it back (default 2, or 0 with --faithful-reps, "
                        "which judges a run by its faithful seeds; 0 never)")
    p.add_argument("--quiet-s", type=float, default=30.0, metavar="S",
                   help="before each emulated run, wait for S seconds in which the hypervisor "
                        "took under 15%% of the CPUs in every 100 ms window, watched with "
                        "every CPU waking every half millisecond at nice 19, as the "
                        "emulator's do (a machine at rest sees no steal) (default 30)")
    p.add_argument("--wait-max", type=float, default=600.0, metavar="S",
                   help="wait that long at most, then run anyway (default 600; 0: watch one "
                        "span only)")
    p.add_argument("--repetitions", type=int, default=None, metavar="N",
                   help="repetitions per run, every fabric as many (default: the scenario's)")
    p.add_argument("--order", choices=("fabric", "mirrored"), default=None,
                   help="emulation: each fabric's repetitions in one bring-up, one fabric after "
                        "the other (fabric), or in two halves carried in mirrored order, which "
                        "cancels a drift of the host between bring-ups (mirrored) (default: "
                        "the scenario's)")
    p.add_argument("--resume", action="store_true",
                   help="with -o DIR: keep each DIR/run<k> an earlier call finished under the "
                        "same code and run only the others")
    p.add_argument("--faithful-reps", action="store_true",
                   help="judge each run over the seeds whose repetition every fabric carried "
                        "faithfully (zcube compare --faithful-reps), not over the whole run")
    p.add_argument("--control", type=int, default=0, metavar="N",
                   help="also carry the scenario on the flow-level model over N draws and "
                        "give each run's paired ratios with the model on the same draws as a "
                        "control variate (0, the default: not)")
    p.add_argument("--from", dest="previous", metavar="DIR", default=None,
                   help="run nothing: report on the runs an earlier call kept in DIR/run<k>")
    args = p.parse_args(argv)
    if args.host_retries is None:
        args.host_retries = 0 if args.faithful_reps else 2
    if args.host_retries < 0:
        p.error(f"--host-retries must be 0 or more, got {args.host_retries}")
    if args.repetitions is not None and args.repetitions < 1:
        p.error(f"--repetitions must be 1 or more, got {args.repetitions}")
    if args.control < 0:
        p.error(f"--control must be 0 or more, got {args.control}")
    if args.resume and not args.output:
        p.error("--resume needs -o DIR (where the earlier call kept its runs)")
    return args


def main():
    args = parse()
    signal.signal(signal.SIGTERM, _interrupt)
    base = args.previous or args.output or tempfile.mkdtemp(prefix="bench-repeat-")
    runs, all_docs = [], []
    here = code_digest()
    emulated = not args.previous and (args.backend or _backend(args.scenario)) == "emulation"
    for k in range(args.runs):
        out = os.path.join(base, f"run{k}")
        if args.previous:
            all_docs.append(cut(load_runs([out]), args.faithful_reps))
            runs.append(comparison(all_docs[-1]))
            continue
        kept = keep(out, here) if args.resume else None
        print(f"run {k + 1}/{args.runs} -> {out}" + (" (kept from an earlier call)"
                                                      if kept else ""), flush=True)
        all_docs.append(cut(kept or quiet_run(args, out, emulated), args.faithful_reps))
        runs.append(comparison(all_docs[-1]))
    report(runs)
    if tails := stall_tails(all_docs):
        print(tails)
    if args.control:
        from bench_control import on_model  # this folder's, on sys.path
        control_report(all_docs, list(on_model(args.scenario, None, args.control).values()))
    print(one_code([os.path.join(base, f"run{k}") for k in range(args.runs)]))
    aside = sorted(n for n in os.listdir(base) if "-aside" in n)
    if aside:
        print(f"set aside (the host busy, run again): {len(aside)} run(s): {', '.join(aside)}")


def _backend(scenario: str) -> str:
    from testbed.experiment.pipeline import load_scenario
    try:
        return load_scenario(scenario).backend
    except UsageError as err:
        raise SystemExit(str(err)) from None


if __name__ == "__main__":
    main()
