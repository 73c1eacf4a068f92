"""What the live view costs the run it watches (root).

    sudo .venv/bin/python benchmarks/bench_web.py [--n 4 8] [--gpus-per-server 4]

For each ZCube size, runs ``zcube up zcube --n N --kv --placement cross-rail --rate 8
--count 60 --input-tokens 8192 --web 127.0.0.1:0`` while a client keeps ``/events`` open
and reads ``/api/links`` and ``/api/status`` once a second, as an open page and a script
would; prints the server's CPU over the workload (``web_cpu_s``, ``web_cpu_share`` of one
core, from the run's fidelity record) against the record's 5% threshold.  Asserts nothing.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZCUBE = [sys.executable, "-m", "testbed.cli"]


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
    out = tempfile.mkdtemp(prefix="bench-web-")
    proc = subprocess.Popen(ZCUBE + [
        "up", "zcube", "--n", str(n), "--gpus-per-server", str(gps), "--kv", "--placement",
        "cross-rail", "--rate", "8", "--count", "60", "--input-tokens", "8192", "--no-report",
        "--web", "127.0.0.1:0", "-o", out], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    url = None
    for line in proc.stderr:
        if "live view: " in line:
            url = line.split("live view: ")[1].split()[0]
            break
    stop = threading.Event()
    clients = [threading.Thread(target=f, args=(url, stop), daemon=True)
               for f in (_read, _events)] if url else []
    for c in clients:
        c.start()
    began = time.time()
    proc.stderr.read()                   # until the command ends
    proc.wait()
    stop.set()
    with open(os.path.join(out, "zcube", "summary.json")) as f:
        fid = json.load(f)["fidelity"]
    keys = ("web_cpu_s", "web_cpu_share", "faithful")
    return {"n": n, "s": round(time.time() - began, 1), **{k: fid.get(k) for k in keys}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[4, 8])
    p.add_argument("--gpus-per-server", type=int, default=4)
    args = p.parse_args()
    print("| ZCube | web_cpu_s | web_cpu_share (of one core) | under 5% |")
    print("|---|---|---|---|")
    for n in args.n:
        r = one(n, args.gpus_per_server)
        share = r["web_cpu_share"]
        print(f"| n={n} | {r['web_cpu_s']} | {share} | "
              f"{'yes' if share is not None and share <= 0.05 else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
