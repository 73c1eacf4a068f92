"""Can the emulator tell a fabric from itself?  An A/A test of one fabric of a scenario.

    sudo .venv/bin/python benchmarks/bench_aa.py cross-rail --fabric zcube [--copies 3]
        [--runs 1] [--repetitions N] [--backend B] [-o DIR]
    .venv/bin/python benchmarks/bench_aa.py --from DIR [DIR ...]

It writes DIR/aa.yaml, the scenario with its fabrics replaced by ``--copies`` copies of the
one named (``NAME``, ``NAME-2``, ...: the same entry each), and carries it with
``bench_repeat.py`` (``--runs`` runs, each after a quiet spell of the host, its report
printed as it goes).  A run brings each copy up, carries it and tears it down before the
next, as it carries different fabrics, on the same requests, seeds and ECMP paths; so what
differs between copies is the emulator's, from one bring-up to the next.  The copies are
compared as the product compares two fabrics (paired by seed, issue 12's rule).

Last it prints, for each figure, every copy's paired ratio to the first with its interval
and verdict, how many of those named a winner (a fabric found faster than itself), and the
largest difference between copies: what one bring-up differs from the next for that figure
at that load on this machine.  A difference between two fabrics smaller than that is not
one a run here can show, whatever its interval within the run says.  ``--from`` reads
folders of an earlier call (or of ``zcube run`` on such a scenario) again.  Prints; asserts
nothing.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_agree import run_dirs  # noqa: E402

from testbed.analysis.compare import (  # noqa: E402
    PAIRED,
    comparison,
    load_runs,
    paired_of,
    verdict_words,
)
from testbed.core.metrics import paired_verdict  # noqa: E402
from testbed.errors import UsageError  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def aa_doc(doc: dict, fabric: str, copies: int) -> dict:
    """The scenario ``doc`` with its fabrics replaced by ``copies`` copies of ``fabric``'s
    entry, named ``fabric``, ``fabric-2``, ..."""
    names = [f.get("name") for f in doc.get("fabrics") or []]
    if fabric not in names:
        raise SystemExit(f"bench_aa.py: no fabric {fabric!r} in the scenario (it has: "
                         f"{', '.join(map(str, names))})")
    entry = doc["fabrics"][names.index(fabric)]
    return dict(doc, name=f"{doc.get('name', 'scenario')}-aa",
                fabrics=[dict(entry, name=fabric if k == 0 else f"{fabric}-{k + 1}")
                         for k in range(copies)])


def resolution(groups_by_run: list[list[dict]]) -> list[str]:
    """For each paired figure: every copy's ratio to the first in every run, the verdicts
    that named a winner, and the largest difference between copies."""
    out = []
    for metric in PAIRED:
        said, diffs, winners = [], [], 0
        for k, groups in enumerate(groups_by_run):
            for g in groups:
                row = next(r for r in g["rows"] if r["metric"] == metric)
                names = g["runs"]
                for i in range(1, len(names)):
                    p = paired_of(row, i)
                    if not p or p["lo"] is None:
                        continue
                    winners += paired_verdict(p) in ("ref", "other")
                    diffs.append(abs(math.log(p["ratio"])))
                    said.append(f"  run {k + 1} {names[i]}/{names[0]} {p['ratio']:.3f} "
                                f"({p['lo']:.3f}-{p['hi']:.3f}) "
                                f"{verdict_words(p, names[0], names[i])}")
        if not diffs:
            out.append(f"{metric}: no copies paired by seed")
            continue
        out += [f"{metric}:", *said]
        out.append(f"  a winner named between copies of one fabric in {winners} of "
                   f"{len(diffs)}; the largest difference between copies "
                   f"{math.expm1(max(diffs)):.1%}")
    return out


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", help="scenario file or shipped name")
    p.add_argument("--fabric", help="the fabric (its name in the scenario) to copy")
    p.add_argument("--copies", type=int, default=3, help="copies of it (default 3, at least 2)")
    p.add_argument("--runs", type=int, default=1, help="runs from scratch (default 1)")
    p.add_argument("--repetitions", type=int, help="repetitions of each copy (default: the "
                                                   "scenario's, or the fabric's own)")
    p.add_argument("--backend", choices=("emulation", "model", "ns3"),
                   help="carry it on this backend (default: the scenario's)")
    p.add_argument("-o", "--output", help="folder for aa.yaml and the runs (default: a new "
                                          "temporary folder)")
    p.add_argument("--from", dest="previous", nargs="+", metavar="DIR",
                   help="read the runs of earlier calls (or zcube run folders) instead")
    args = p.parse_args(argv)
    if not args.previous and not (args.scenario and args.fabric):
        p.error("give SCENARIO and --fabric NAME, or --from DIR ...")
    if args.copies < 2 or args.runs < 1:
        p.error("--copies must be at least 2 and --runs at least 1")
    return args


def main(argv=None) -> None:
    args = parse(argv)
    if args.previous:
        try:
            folders = [r for d in args.previous for r in run_dirs(d)]
        except ValueError as err:
            raise SystemExit(f"bench_aa.py: {err}") from None
    else:
        from testbed.experiment.pipeline import load_scenario
        try:
            path = load_scenario(args.scenario).path
        except UsageError as err:
            raise SystemExit(str(err)) from None
        with open(path) as f:
            doc = aa_doc(yaml.safe_load(f), args.fabric, args.copies)
        base = args.output or tempfile.mkdtemp(prefix="bench-aa-")
        os.makedirs(base, exist_ok=True)
        aa = os.path.join(base, "aa.yaml")
        with open(aa, "w") as f:
            f.write(f"# {args.copies} copies of {args.fabric} from {path} (bench_aa.py)\n")
            yaml.safe_dump(doc, f, sort_keys=False)
        cmd = [sys.executable, os.path.join(HERE, "bench_repeat.py"), aa, "--runs",
               str(args.runs), "-o", base]
        if args.repetitions:
            cmd += ["--repetitions", str(args.repetitions)]
        if args.backend:
            cmd += ["--backend", args.backend]
        if subprocess.run(cmd).returncode:
            raise SystemExit("bench_aa.py: bench_repeat.py failed")
        folders = run_dirs(base)
    print("\nA/A: copies of one fabric, each in a bring-up of its own, paired by seed")
    print("\n".join(resolution([comparison(load_runs([d])) for d in folders])))


if __name__ == "__main__":
    main()
