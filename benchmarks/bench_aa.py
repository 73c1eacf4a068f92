"""Can the emulator tell a fabric from itself?  An A/A test of one fabric of a scenario: the
margin a verdict between two fabrics needs.

    sudo .venv/bin/python -m benchmarks.bench_aa cross-rail --fabric zcube [--copies 3]
        [--runs 1] [--repetitions N] [--seed S] [--backend B] [-o DIR] [--run-limit S]
    .venv/bin/python -m benchmarks.bench_aa --from DIR [DIR ...]
    .venv/bin/python -m benchmarks.bench_aa --quick

It writes DIR/aa.yaml, the scenario with its fabrics replaced by ``--copies`` copies of the
one named (``NAME``, ``NAME-2``, ...: the same entry each), and carries it ``--runs`` times
from scratch with ``zcube run`` (DIR/run<k>).  An emulated run starts after a quiet spell of
the host, and one whose fidelity record says the busy host held it back is set aside
(DIR/run<k>-aside<j>) and run again, twice at most.  A run brings each copy up, carries it
and tears it down before the next, as it carries different fabrics, on the same requests,
seeds and ECMP paths; so what differs between copies is the emulator's, from one bring-up
to the next.  The copies are compared as the product compares two fabrics (paired by seed).

Figures, for FCT p50, FCT p99 and TTFT p99: every copy's paired ratio to the first with its
interval and verdict, how many of those named a winner (a fabric found faster than itself),
and the largest difference between copies: what one bring-up differs from the next for that
figure at that load on this machine, which testbed/core/verdict.py's margins hold.  Target:
no winner named between copies, and the largest difference within the margin the verdicts
use for that figure and backend.  ``--from`` reads folders of an earlier call (or of ``zcube
run`` on such a scenario) again.  ``--quick`` (seconds, no root): two copies of the demo's
ROFT at two repetitions on the flow model, where copies are the same computation: a check of
the comparison, not a measure of the emulator.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import yaml

from benchmarks.common import end_process, fail, need_root, target, terminate_cleanly
from testbed.analysis.compare import (
    PAIRED,
    comparison,
    load_runs,
    paired_of,
)
from testbed.core import verdict
from testbed.errors import UsageError

HOST_RETRIES = 2                # an emulated run the busy host held back, run again at most
QUIET_S, WAIT_MAX_S = 30.0, 600.0   # before an emulated run: a quiet spell, waited for at most


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


def run_dirs(path: str) -> list[str]:
    """The runs in ``path``: itself when it holds run.json, else its ``run<k>`` folders that
    do (in k's order), leaving out those set aside (``run<k>-aside<j>``)."""
    if os.path.isfile(os.path.join(path, "run.json")):
        return [path]
    if not os.path.isdir(path):
        raise ValueError(f"{path}: no such folder")
    found = [n for n in os.listdir(path) if n.startswith("run") and n[3:].isdigit()
             and os.path.isfile(os.path.join(path, n, "run.json"))]
    if not found:
        raise ValueError(f"{path}: no run here (no run.json in it or in its run<k> folders)")
    return [os.path.join(path, n) for n in sorted(found, key=lambda n: int(n[3:]))]


def resolution(groups_by_run: list[list[dict]]) -> list[str]:
    """For each paired figure: every copy's ratio to the first in every run, the verdicts
    that named a winner, and the largest difference between copies, against the target."""
    out = []
    for metric in PAIRED:
        said, diffs, margins, winners = [], [], [], 0
        for k, groups in enumerate(groups_by_run):
            for g in groups:
                row = next(r for r in g["rows"] if r["metric"] == metric)
                names = g["runs"]
                for i in range(1, len(names)):
                    p = paired_of(row, i)
                    if not p or p["lo"] is None:
                        continue
                    winners += verdict.verdict(p) in verdict.WINNERS
                    diffs.append(abs(math.log(p["ratio"])))
                    margins.append(p.get("margin"))
                    said.append(f"  run {k + 1} {names[i]}/{names[0]} {p['ratio']:.3f} "
                                f"({p['lo']:.3f}-{p['hi']:.3f}) "
                                f"{verdict.words(p, names[0], names[i])}")
        if not diffs:
            out.append(f"{metric}: no copies paired by seed")
            continue
        largest = math.expm1(max(diffs))
        margin = max((m for m in margins if m is not None), default=None)
        aim = "no winner named" + ("" if margin is None else
                                   f", the largest difference within the margin {margin:.1%}")
        out += [f"{metric}:", *said]
        out.append(f"  a winner named between copies of one fabric in {winners} of "
                   f"{len(diffs)}; the largest difference between copies {largest:.1%}; "
                   + target(winners == 0 and (margin is None or largest <= margin), aim))
    return out


def one_run(aa: str, out: str, args) -> list[dict]:
    """One ``zcube run`` of ``aa`` into ``out`` under ``--run-limit``: its results."""
    cmd = [sys.executable, "-m", "testbed.cli", "run", aa, "-o", out, "--no-report", "--force"]
    if args.backend:
        cmd += ["--backend", args.backend]
    if args.repetitions:
        cmd += ["--repetitions", str(args.repetitions)]
    if args.seed:
        cmd += ["--seed", str(args.seed)]
    # its own session, so that an interrupt reaches it once, from here, as SIGTERM (which
    # the testbed tears its fabric down on, like Ctrl-C)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=args.run_limit)
    except subprocess.TimeoutExpired:
        end(proc)
        fail(f"{out}: not done within {args.run_limit:g} s; its fabric was torn down", 1)
    except (KeyboardInterrupt, SystemExit):
        end(proc)
        raise SystemExit(f"bench_aa: interrupted during {out}; its fabric was torn down") \
            from None
    try:
        return load_runs([out])
    except UsageError as err:
        fail(f"run {out} wrote no results (exit status {code}): {err}", 1)


def end(proc: subprocess.Popen) -> None:
    """SIGTERM (the run tears its fabric down), then SIGKILL two minutes later."""
    end_process(proc, 120)


def quiet_run(aa: str, out: str, args, emulated: bool) -> None:
    """One run into ``out``, when emulated after a quiet spell of the host, and again (up to
    :data:`HOST_RETRIES` times) while its record says the busy host held it back."""
    from testbed.core.fidelity import runs_held_back
    for j in range(HOST_RETRIES + 1):
        if emulated:
            from testbed.emulation.load_monitor import wait_quiet
            quiet, waited = wait_quiet(QUIET_S, WAIT_MAX_S)
            print(f"  host {'quiet' if quiet else 'still busy'} after {waited:.0f} s"
                  + ("" if quiet else ": running anyway"), flush=True)
        held = runs_held_back(one_run(aa, out, args))
        if not held or j == HOST_RETRIES:
            return
        aside = f"{out}-aside{j + 1}"
        os.rename(out, aside)
        print(f"  set aside -> {aside}: not faithful while the host was busy "
              f"({', '.join(held)}); running it again", flush=True)


def carry(args) -> list[str]:
    """Write aa.yaml and carry it ``--runs`` times: the runs' folders."""
    from testbed.experiment.pipeline import load_scenario
    try:
        sc = load_scenario(args.scenario)
    except UsageError as err:
        fail(str(err))
    emulated = (args.backend or sc.backend) == "emulation"
    if emulated:
        need_root()
    else:
        terminate_cleanly()
    with open(sc.path) as f:
        doc = aa_doc(yaml.safe_load(f), args.fabric, args.copies)
    base = args.output or tempfile.mkdtemp(prefix="bench-aa-")
    os.makedirs(base, exist_ok=True)
    aa = os.path.join(base, "aa.yaml")
    with open(aa, "w") as f:
        f.write(f"# {args.copies} copies of {args.fabric} from {sc.path} (bench_aa.py)\n")
        yaml.safe_dump(doc, f, sort_keys=False)
    outs = [os.path.join(base, f"run{k}") for k in range(args.runs)]
    for k, out in enumerate(outs):
        print(f"run {k + 1}/{args.runs} -> {out}", flush=True)
        quiet_run(aa, out, args, emulated)
    return outs


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", help="scenario file or shipped name")
    p.add_argument("--fabric", help="the fabric (its name in the scenario) to copy")
    p.add_argument("--copies", type=int, default=None, help="copies of it (default 3, at "
                                                            "least 2)")
    p.add_argument("--runs", type=int, default=1, help="runs from scratch (default 1)")
    p.add_argument("--repetitions", type=int, help="repetitions of each copy (default: the "
                                                   "scenario's, or the fabric's own)")
    p.add_argument("--seed", type=int, help="the scenario's first seed in place of its own: "
                                            "check a margin on seeds it was not measured on")
    p.add_argument("--backend", choices=("emulation", "model", "ns3"),
                   help="carry it on this backend (default: the scenario's)")
    p.add_argument("-o", "--output", help="folder for aa.yaml and the runs (default: a new "
                                          "temporary folder)")
    p.add_argument("--run-limit", type=float, default=7200.0, metavar="S",
                   help="a run's time limit, past which it is torn down (default 7200)")
    p.add_argument("--from", dest="previous", nargs="+", metavar="DIR",
                   help="read the runs of earlier calls (or zcube run folders) instead")
    p.add_argument("--quick", action="store_true",
                   help="demo --fabric roft --copies 2 --repetitions 2 --backend model")
    args = p.parse_args(argv)
    if args.quick and not args.previous:
        args.scenario, args.fabric = args.scenario or "demo", args.fabric or "roft"
        args.copies, args.repetitions = args.copies or 2, args.repetitions or 2
        args.backend = args.backend or "model"
    args.copies = args.copies or 3
    if not args.previous and not (args.scenario and args.fabric):
        p.error("give SCENARIO and --fabric NAME, or --from DIR ..., or --quick")
    if args.copies < 2 or args.runs < 1 or args.run_limit <= 0:
        p.error("--copies must be at least 2, --runs at least 1 and --run-limit above 0")
    return args


def main(argv=None) -> None:
    args = parse(argv)
    if args.previous:
        try:
            folders = [r for d in args.previous for r in run_dirs(d)]
        except ValueError as err:
            fail(str(err))
    else:
        folders = carry(args)
    print("\nA/A: copies of one fabric, each in a bring-up of its own, paired by seed")
    print("\n".join(resolution([comparison(load_runs([d])) for d in folders])))


if __name__ == "__main__":
    main()
