"""Exports against fabric size: ``zcube topo ... --format simai|clab``, each in a process
of its own, timed, with its peak memory and file size (no root).

    .venv/bin/python -m benchmarks.bench_exports [--quick]

SimAI's file grows with the number of GPUs and cables, so its time should too (it was
quadratic: n=96 with one GPU per server took 51 s).  containerlab's grows with GPUs squared
(every GPU's static neighbours); it is written node by node and refused above 1,024 GPUs,
so its memory should stay flat while its time and size grow as GPUs squared.

Figures: seconds, peak MB and MB written per export.  Targets: SimAI under 20 s for every
fabric up to 65,024 GPUs (quadratic, it took minutes); containerlab under 60 s and 300 MB
for every fabric up to 1,024 GPUs (built in memory, it took 120 s and 5.4 GB at 576 GPUs).
``--quick`` (about 20 s): the two smallest of each series.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

from benchmarks.common import fail, target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (format, fabric options): up to the largest fabric each accepts
CASES = [("simai", ["zcube", "--n", str(n), "--gpus-per-server", "1"])
         for n in (32, 64, 128, 254)] + \
        [("simai", ["roft", "--servers", str(s), "--gpus-per-server", "8", "--radix", "1024"])
         for s in (128, 512, 2048, 8128)] + \
        [("clab", ["zcube", "--n", str(n)]) for n in (8, 16, 24, 32)]
QUICK = [CASES[0], CASES[1], CASES[4], CASES[5], CASES[8], CASES[9]]
TARGETS = {"simai": (20.0, None), "clab": (60.0, 300.0)}     # seconds, peak MB
LIMIT_S = 600         # one export, at most


# the CLI in a child that reports its own peak memory (the parent's pages, which a forked
# child starts with, would count in a peak measured from outside)
CHILD = ("import resource, runpy, sys\n"
         "sys.argv[0] = 'zcube'\n"
         "try:\n"
         "    runpy.run_module('testbed.cli', run_name='__main__')\n"
         "finally:\n"
         "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")


def _zcube(argv: list, what: str) -> subprocess.CompletedProcess:
    """``zcube ARGV`` in a child, under :data:`LIMIT_S`; a failure ends the benchmark."""
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, *argv], cwd=ROOT,
                              capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        fail(f"{what}: not done within {LIMIT_S} s", 1)
    if proc.returncode:
        fail(f"{what}: {(proc.stderr.strip().splitlines() or ['failed'])[0]}", 1)
    return proc


def _one(fmt: str, fabric: list) -> tuple[float, float, int]:
    """Seconds, peak MB (the child's own max RSS) and bytes of one export."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        t = time.perf_counter()
        proc = _zcube(["topo", *fabric, "--format", fmt, "-o", out],
                      f"zcube topo {' '.join(fabric)} --format {fmt}")
        took = time.perf_counter() - t
        return took, int(proc.stderr.split()[-1]) / 1024, os.path.getsize(out)


def _gpus(fabric: list) -> int:
    """GPUs of a fabric, from ``zcube topo --format summary`` in a child: building it here
    would make this process large, and a child's peak memory starts from its parent's."""
    out = _zcube(["topo", *fabric], f"zcube topo {' '.join(fabric)}").stdout
    return int(out.splitlines()[1].split()[0])


def aim(fmt: str, took: float, peak: float) -> str:
    """The target of an export of ``fmt`` beside its figures."""
    secs, mb = TARGETS[fmt]
    if mb is None:
        return target(took < secs, f"under {secs:g} s")
    return target(took < secs and peak < mb, f"under {secs:g} s and {mb:g} MB")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the two smallest of each series")
    args = ap.parse_args(argv)
    print(f"{'format':<6} {'fabric':<52} {'GPUs':>7} {'s':>7} {'peak MB':>8} {'MB out':>8}")
    for fmt, fabric in QUICK if args.quick else CASES:
        gpus = _gpus(fabric)
        took, peak, size = _one(fmt, fabric)
        print(f"{fmt:<6} {' '.join(fabric):<52} {gpus:>7,} {took:>7.2f} {peak:>8.0f} "
              f"{size / 1e6:>8.1f}  {aim(fmt, took, peak)}", flush=True)


if __name__ == "__main__":
    main()
