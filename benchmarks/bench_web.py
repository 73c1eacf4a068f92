"""What the live view costs the run it watches (root).

    sudo .venv/bin/python -m benchmarks.bench_web [--n 4 8] [--gpus-per-server 4] [--quick]

For each ZCube size, runs ``zcube up zcube --n N --kv --placement cross-rail --rate 8
--count 60 --input-tokens 8192 --web 127.0.0.1:0`` while a client keeps ``/events`` open
and reads ``/api/links`` and ``/api/status`` once a second, as an open page and a script
would.  Figure: the server's CPU over the workload (``web_cpu_s``, and ``web_cpu_share`` of
one core, from the run's fidelity record).  Target: under 5% of one core (the record's own
threshold; it was 0.07% on n=4 and 0.3% on n=8).  ``--quick`` (about a minute): n=4 only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from benchmarks.common import end_process, fail, limit, need_root, target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZCUBE = [sys.executable, "-m", "testbed.cli"]
SHARE = 0.05          # of one core


def _read(url, stop):
    while not stop.is_set():
        for path in ("api/links", "api/status"):
            try:
                urllib.request.urlopen(url + path, timeout=5).read()
            except OSError:
                return
        stop.wait(1.0)


def _events(url, stop):
    try:
        with urllib.request.urlopen(url + "events", timeout=5) as res:
            while not stop.is_set() and res.readline():
                pass
    except OSError:
        pass


def one(n: int, gps: int) -> dict:
    """One ``zcube up`` watched as a page would: its fidelity record's web figures."""
    out = tempfile.mkdtemp(prefix="bench-web-")
    proc = subprocess.Popen(ZCUBE + [
        "up", "zcube", "--n", str(n), "--gpus-per-server", str(gps), "--kv", "--placement",
        "cross-rail", "--rate", "8", "--count", "60", "--input-tokens", "8192", "--no-report",
        "--web", "127.0.0.1:0", "-o", out], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    try:
        with limit(600, f"zcube up zcube --n {n} --web"):
            said, began = watch(proc, stop)
    finally:
        stop.set()
        end(proc)
    if proc.returncode:
        fail(f"zcube up zcube --n {n} exited with status {proc.returncode}: "
             f"{(said.strip().splitlines() or ['(nothing on stderr)'])[-1]}", 1)
    with open(os.path.join(out, "zcube", "summary.json")) as f:
        fid = json.load(f)["fidelity"]
    keys = ("web_cpu_s", "web_cpu_share", "faithful")
    return {"n": n, "s": round(time.time() - began, 1), **{k: fid.get(k) for k in keys}}


def watch(proc, stop) -> tuple[str, float]:
    """Start the clients once the live view says where it is; wait for the run to end.
    What it said on stderr, and when the clients started."""
    url, head = None, []
    for line in proc.stderr:
        head.append(line)
        if "live view: " in line:
            url = line.split("live view: ")[1].split()[0]
            break
    for f in (_read, _events) if url else ():
        threading.Thread(target=f, args=(url, stop), daemon=True).start()
    began = time.time()
    said = proc.stderr.read()                   # until the command ends
    proc.wait()
    return "".join(head) + said, began


def end(proc) -> None:
    """Stop ``zcube up`` if it is still running: SIGTERM (it tears down), then SIGKILL."""
    end_process(proc, 60)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=None, help="ZCube sizes (4 8)")
    p.add_argument("--gpus-per-server", type=int, default=4)
    p.add_argument("--quick", action="store_true", help="n=4 only")
    args = p.parse_args(argv)
    need_root()
    for n in args.n or ([4] if args.quick else [4, 8]):
        r = one(n, args.gpus_per_server)
        share = r["web_cpu_share"]
        aim = target(None if share is None else share < SHARE, f"under {SHARE:.0%}")
        print(f"ZCube n={n}: web_cpu_s {r['web_cpu_s']}, web_cpu_share {share} of one core "
              f"(run faithful: {r['faithful']}); {aim}", flush=True)


if __name__ == "__main__":
    main()
