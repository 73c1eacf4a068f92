"""Every benchmark in its quick size, one after another (``make bench``).

    .venv/bin/python -m benchmarks [NAME ...]          # as root for the emulation's too

Each runs in a process of its own under a time limit (past it: SIGTERM, which tears the
emulation down, and SIGKILL a minute later); those that need root, or the ns3 package, are
skipped with a line saying so where they cannot run.  Last, a table: each benchmark's
outcome, wall-clock seconds and how many of its targets it met.  Exits 1 if any failed or ran
out of time; a missed target is a finding, not a failure.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name, arguments of its quick run, what it needs ("root", "ns3" or None), limit in seconds
BENCHMARKS = (
    ("bench_fabric", ["--quick"], None, 120),
    ("bench_routes", ["--quick"], None, 300),
    ("bench_model", ["--quick"], None, 300),
    ("bench_exports", ["--quick"], None, 300),
    ("bench_load", ["--quick"], None, 300),
    ("bench_aa", ["--quick"], None, 300),
    ("bench_ns3", ["--quick"], "ns3", 300),
    ("bench_emulation", ["--quick"], "root", 600),
    ("bench_agents", ["--quick"], "root", 300),
    ("bench_fidelity", ["--quick"], "root", 300),
    ("bench_faults", ["--quick"], "root", 600),
    ("bench_web", ["--quick"], "root", 300),
)
NAMES = [b[0] for b in BENCHMARKS]


def why_not(needs: str | None) -> str | None:
    """Why a benchmark needing ``needs`` cannot run here, or None."""
    if needs == "root" and os.geteuid() != 0:
        return "needs root (it starts Open vSwitch and Mininet): sudo make bench"
    if needs == "ns3" and importlib.util.find_spec("ns") is None:
        return "needs the ns3 package (make setup installs it)"
    return None


def run_one(name: str, cmd: list[str], limit_s: float) -> dict:
    """Run one benchmark's ``cmd``, its output passed through as it comes; its outcome."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"),
                            start_new_session=True)
    lines: list[str] = []

    def copy():
        for line in proc.stdout:
            lines.append(line)
            sys.stdout.write(line)
            sys.stdout.flush()
    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    outcome = None
    try:
        code = proc.wait(timeout=limit_s)
        outcome = "ok" if code == 0 else f"FAILED (exit {code})"
    except subprocess.TimeoutExpired:
        outcome = f"TIMED OUT after {limit_s:g} s"
        stop(proc)
    reader.join(timeout=5)
    said = "".join(lines)
    return {"name": name, "outcome": outcome, "s": time.monotonic() - started,
            "met": said.count(": met\n"), "missed": said.count(": MISSED\n")}


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the benchmark tears its emulation down), then SIGKILL to its whole session
    a minute later if it is still there."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        print("benchmarks: killed; 'sudo .venv/bin/zcube clean' removes what it left",
              flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME", help=f"only these ({', '.join(NAMES)})")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in NAMES]
    if unknown:
        p.error(f"no benchmark {', '.join(unknown)} (there are: {', '.join(NAMES)})")
    results = []
    for name, quick, needs, limit_s in BENCHMARKS:
        if args.names and name not in args.names:
            continue
        print(f"\n== {name} {' '.join(quick)}", flush=True)
        if (why := why_not(needs)) is not None:
            print(f"skipped: {why}", flush=True)
            results.append({"name": name, "outcome": f"skipped: {why}", "s": 0.0,
                            "met": 0, "missed": 0})
            continue
        results.append(run_one(name, [sys.executable, "-m", f"benchmarks.{name}", *quick],
                               limit_s))
    print("\nbenchmark        seconds  targets met  outcome")
    for r in results:
        print(f"{r['name']:<16} {r['s']:7.1f}  {r['met']:>4} of {r['met'] + r['missed']:<4}  "
              f"{r['outcome']}")
    bad = [r for r in results if not (r["outcome"] == "ok" or r["outcome"].startswith("skip"))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
