"""Where do a light-load run's slow requests come from?  Watch one run with one observer and
line the observer's record up with the run's requests.

    sudo .venv/bin/python benchmarks/bench_episodes.py SCENARIO -o DIR --observe WHAT
    .venv/bin/python benchmarks/bench_episodes.py --from DIR --observe WHAT   # read again

Runs ``zcube run SCENARIO -o DIR/run --no-report --force`` once and records, beside it:

``probertt``  BBR's ProbeRTT: the kernel's ``tcp:tcp_probe`` tracepoint (tracefs), only the
              acknowledgements a sender takes in with a congestion window of 4 packets or
              less, which is where BBR holds a connection while it measures its minimum RTT
              again (every 10 s without a lower sample).  Near no cost: the filter runs in
              the kernel and keeps a few events.
``bbr``       every second, ``ss -tin`` in each host agent's namespace: each KV connection's
              BBR bandwidth estimate and pacing rate.  A transfer is matched with the last
              record of its connection(s) before it started.
``oneway``    a UDP datagram every ``--probe-ms`` (5) from one host of each fabric to another
              (``--probe-hosts``, by index: the demo's last host, a decode GPU, to its first,
              a prefill GPU, whose ports carry only the transfers' acknowledgements that way),
              stamped when sent; the hosts share the machine's clock, so the receiver has its
              one-way delay through the datapath.  If the slow requests were the datapath
              stalling, these would stall with them.  (Not ``ping``: iputils' ping spins a
              core at intervals under 10 ms, and an echo's way back shares the transfers'
              queues.)  The datagrams count in the emulator's packet account, so the few in
              flight when a repetition's counters are read can mark a run not faithful.

``stalls``    nothing beside the run: the fidelity record's datapath probe (every emulated
              run has it since 2026-12-04) puts in transfers.csv's ``stall_ms`` the longest
              stall over 2 ms each transfer was in flight through.  Also how many of the
              slowest 1% of transfers went through one, and the FCT P99 without them; per
              run, the paired p50 and p99 ratios over all transfers and without them.
              ``--from`` reads any run directory made since (a ``bench_repeat.py`` run's too).

``--idle SECONDS`` runs no scenario: it brings up the demo's ZCube (n=4, 100 Mb/s per GPU)
with nothing on it and sends the one-way probe from g15 to g0 for that long, beside the
fidelity record's datapath probe (a bridge of the same datapath carrying nothing else, both
ends stamped by the kernel; with ``--monitors``, the record's datapath monitor and the link
sampler running as in a run), and prints both probes' delays: what the emulator does on its
own.  With ``--sched``, ``perf sched record`` watches every CPU meanwhile, and each of the
datapath probe's stalls (over 2 ms) is put down to the tasks that ran 1 ms or more on a CPU
while it was in flight.

Then, for each fabric's run: its requests by how much their slowest transfer took over the
run's median FCT, and what the observer saw for the slowest ten and for the rest.  Rows are
lined up through ``per_rep[i].t0_unix`` in summary.json.  Prints; asserts nothing.
"""
import argparse
import bisect
import csv
import glob
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from episode_observers import (  # noqa: E402
    PROBE_PORT,
    RECEIVER,
    SENDER,
    OneWay,
    SchedRecord,
    Tracefs,
    agents,
    bbr_records,
    end,
    holders,
    idle_zcube,
    in_ns,
    long_stretches,
    oneway,
    probertt_events,
    through_stalls,
    without_stalls,
)

from traffic.kvpool import POOL_PORT  # noqa: E402


def watch(proc, args, out_dir):
    """While the run goes: the chosen observer's records into ``out_dir``."""
    probe, seen, n, before = None, (), 0, []
    ss_log = open(os.path.join(out_dir, "ss.txt"), "w") if args.observe == "bbr" else None
    while proc.poll() is None:
        now = agents(proc.pid)
        if args.observe == "bbr":
            for pid in now:
                got = in_ns(pid, "ss", "-tin", "state", "established",
                            f"( dport = :{POOL_PORT} )", check=False)
                ss_log.write(f"@@ {time.time():.6f} {pid}\n{got.stdout}")
            ss_log.flush()
        steady, before = now == before, now         # every agent of the fabric is up
        if args.observe == "oneway" and steady and len(now) >= 2 and now[0] not in seen:
            end(probe.procs if probe else [])
            seen, n = now, n + 1
            probe = OneWay(now, args, os.path.join(out_dir, f"oneway{n}.txt"))
            print(f"  fabric {n}: probing {probe.label}", flush=True)
        time.sleep(1.0 if args.observe == "bbr" else 0.5)
    end(probe.procs if probe else [])
    if ss_log:
        ss_log.close()


def idle(args):
    """The probes on the demo's ZCube with no workload (``--idle``)."""
    import contextlib

    from testbed.core.fidelity import STALL_MS
    from testbed.emulation.dpprobe import DatapathProbe
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "idle.txt")
    with idle_zcube(args.ovs_config) as emu, contextlib.ExitStack() as extra:
        if args.monitors:
            from testbed.emulation.fidelity import DatapathMonitor
            from testbed.emulation.linkstats import LinkSampler
            extra.enter_context(DatapathMonitor(emu.vswitchd_pid()))
            extra.enter_context(LinkSampler(emu, t0=time.time()))
        probe = extra.enter_context(DatapathProbe(emu))
        procs = [emu.net.get("g0").popen([sys.executable, "-c", RECEIVER,
                                          str(PROBE_PORT), path])]
        time.sleep(0.3)
        procs.append(emu.net.get("g15").popen(
            [sys.executable, "-c", SENDER, emu.fabric.host("g0").ports[0].ip,
             str(PROBE_PORT), str(args.probe_ms)]))
        sched = SchedRecord(os.path.join(args.out, "sched.data"), args.idle) \
            if args.sched else None
        time.sleep(args.idle)
        end(procs)
    _, delay = oneway(path)
    where = (f"idle ZCube{' with the monitors' if args.monitors else ''}"
             + "".join(f", {kv}" for kv in args.ovs_config) + f", {args.idle:.0f} s")
    print(f"{where}, host g15 -> g0, stamped by the processes: {len(delay)} probes, "
          f"{delays_text(delay)}")
    recs = [(a, b) for a, b in probe.records() if b is not None]
    print(f"{where}, the datapath probe, stamped by the kernel: {len(recs)} probes, "
          f"{delays_text([(b - a) * 1000 for a, b in recs])}")
    if sched:
        stalls = [(a, b) for a, b in recs if (b - a) * 1000 > STALL_MS]
        runs = sched.runs()
        tasks = holders(stalls, runs)
        print(f"  what ran 1 ms or more on a CPU during its {len(stalls)} stalls: "
              + ", ".join(f"{k} {v}" for k, v in tasks.items()))
        print(f"  stretches of 1 ms or more on a CPU over the {args.idle:.0f} s: "
              + long_stretches(runs))


def delays_text(delays: list) -> str:
    """One-way delays (ms): median, p99, maximum and how many were over 2 ms."""
    xs = sorted(delays)
    return (f"one-way median {xs[len(xs) // 2]:.2f} ms, p99 {xs[int(0.99 * (len(xs) - 1))]:.2f}, "
            f"max {xs[-1]:.2f}; over 2 ms: {sum(d > 2 for d in xs)}")


def run(args):
    os.makedirs(args.out, exist_ok=True)
    cmd = [sys.executable, "-m", "testbed.cli", "run", args.scenario, "-o",
           os.path.join(args.out, "run"), "--no-report", "--force"]
    started = time.time()

    def go():
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            watch(proc, args, args.out)
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
            raise SystemExit("interrupted; the run's fabric was torn down") from None
        return proc.returncode

    if args.observe == "probertt":
        with Tracefs() as tr:
            code = go()
            with open(os.path.join(args.out, "tcp_probe.txt"), "w") as f:
                f.write(f"# offset {tr.offset:.6f}\n" + tr.events())
    else:
        code = go()
    print(f"run finished (exit status {code}) in {time.time() - started:.0f} s", flush=True)


# -- reading a finished run ------------------------------------------------------------------
def load_fabric(d: str):
    """(rows with absolute start and end, each request's rows, port IPs by host) of one
    fabric's run directory."""
    with open(os.path.join(d, "summary.json")) as f:
        s = json.load(f)
    with open(os.path.join(d, "fabric.json")) as f:
        nodes = json.load(f)["nodes"]
    ips = {n["id"]: [p["ip"] for p in n["ports"]] for n in nodes if n.get("kind") == "host"}
    dil = (s.get("scale") or {}).get("time_dilation") or 1
    t0 = [rep.get("t0_unix") for rep in s.get("per_rep") or []]
    if not t0 or None in t0:
        raise SystemExit(f"{d}: summary.json has no per_rep t0_unix (an emulated run made "
                         "since 2026-12-04 has)")
    with open(os.path.join(d, "transfers.csv"), newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["fct_ms"]]
    reqs = defaultdict(list)
    for r in rows:
        base = r["t0"] = t0[int(r["rep"])]
        r["a"], r["b"] = base + float(r["start_s"]) * dil, base + float(r["end_s"]) * dil
        r["fct"] = float(r["fct_ms"])
        reqs[(int(r["rep"]), int(r["request"]))].append(r)
    return rows, reqs, ips


def ranked(rows, reqs):
    """Requests slowest first: (slowest transfer's FCT over the run's median, key, rows)."""
    med = statistics.median(r["fct"] for r in rows)
    return sorted(((max(r["fct"] for r in rs) / med, k, rs) for k, rs in reqs.items()),
                  key=lambda x: -x[0])


def pairings(r, ips):
    return [(s, d) for s in ips[r["src"]] for d in ips[r["dst"]]]


def show(v) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def summarise(label, slow, rest):
    def text(xs):
        xs = [x for x in xs if x is not None]
        if not xs:
            return "none"
        return f"median {statistics.median(xs):.2f}, max {max(xs):.2f} (n {len(xs)})"
    print(f"    {label}: slowest ten {text(slow)}; the rest {text(rest)}")


def per_request(observe: str, out_dir: str, ips, fabric_no: int):
    """A function of a request's rows giving what the observer saw during it, and a unit."""
    if observe == "probertt":
        ev = probertt_events(os.path.join(out_dir, "tcp_probe.txt"))

        def seen(rs):       # transfers of the request that took an ACK in ProbeRTT
            hit = 0
            for r in rs:
                ts = [t for p in pairings(r, ips) for t in ev.get(p, [])]
                hit += any(r["a"] <= t <= r["b"] for t in ts)
            return hit
        return seen, "transfers in ProbeRTT"
    if observe == "bbr":
        rec = bbr_records(os.path.join(out_dir, "ss.txt"))

        def pacing(rs):     # the lowest pacing rate among its connections, last seen before
            low = None
            for r in rs:
                for p in pairings(r, ips):
                    xs = rec.get(p, [])
                    i = bisect.bisect_right(xs, (r["a"], float("inf"), 0)) - 1
                    if i >= 0 and xs[i][0] >= r["t0"]:
                        low = xs[i][1] if low is None else min(low, xs[i][1])
            return low
        return pacing, "Mb/s pacing (lowest of the request's connections)"
    if observe == "stalls":
        def stall(rs):      # the longest datapath stall one of its transfers went through
            got = [float(r["stall_ms"]) for r in rs if r.get("stall_ms")]
            return max(got) if got else None
        return stall, "ms, the longest datapath stall one of its transfers went through"
    path = os.path.join(out_dir, f"oneway{fabric_no}.txt")
    sent, delay = oneway(path) if os.path.exists(path) else ([], [])

    def worst(rs):          # the longest one-way delay of a datagram sent during the request
        a, b = min(r["a"] for r in rs), max(r["b"] for r in rs)
        xs = delay[bisect.bisect_left(sent, a):bisect.bisect_right(sent, b)]
        return max(xs) if xs else None
    return worst, "ms, longest one-way delay of a probe sent during the request"


def quiet_probes(rows, path):
    """The probes sent inside a repetition's workload while no transfer was in flight: what
    the datapath does on its own."""
    if not os.path.exists(path):
        return
    sent, delay = oneway(path)
    spans = sorted((r["a"], r["b"]) for r in rows)
    reps = defaultdict(float)
    for r in rows:
        reps[r["t0"]] = max(reps[r["t0"]], r["b"])
    starts, ends = [a for a, _ in spans], [b for _, b in spans]
    reach = list(itertools.accumulate(ends, max))             # latest end so far
    quiet = []
    for t, d in zip(sent, delay):
        if not any(t0 <= t <= last for t0, last in reps.items()):
            continue
        i = bisect.bisect_right(starts, t) - 1
        if i < 0 or reach[i] < t:
            quiet.append(d)
    if quiet:
        print(f"    probes sent with no transfer in flight: {len(quiet)}, {delays_text(quiet)}")


def report(args):
    dirs = sorted(os.path.dirname(p) for where in (("run", "*"), ("*",)) for p in glob.glob(
        os.path.join(args.out, *where, "summary.json")))
    if not dirs:
        raise SystemExit(f"no finished run under {args.out}/run or {args.out}")
    for k, d in enumerate(sorted(dirs, key=lambda d: os.path.getmtime(
            os.path.join(d, "summary.json"))), start=1):
        rows, reqs, ips = load_fabric(d)
        order = ranked(rows, reqs)
        seen, unit = per_request(args.observe, args.out, ips, k)
        vals = [seen(rs) for _, _, rs in order]
        xs = sorted(x for x, _, _ in order)
        print(f"== {os.path.basename(d)}: {len(order)} requests; median FCT "
              f"{statistics.median(r['fct'] for r in rows):.2f} ms; request slowdown p90 "
              f"{xs[int(0.9 * (len(xs) - 1))]:.3f}, max {xs[-1]:.3f}, at 1.15x or more "
              f"{sum(x >= 1.15 for x in xs)}")
        print("    slowest: " + ", ".join(
            f"rep {key[0]} req {key[1]} {x:.2f}x ({show(v)})" for (x, key, _), v in
            zip(order[:10], vals[:10])))
        summarise(unit, vals[:10], vals[10:])
        both = [(x, v) for (x, _, _), v in zip(order, vals) if v is not None]
        if len(both) > 2 and len({v for _, v in both}) > 1:
            from scipy.stats import spearmanr
            rho, p = spearmanr([x for x, _ in both], [v for _, v in both])
            print(f"    rank correlation of a request's slowdown with it over {len(both)} "
                  f"requests: {rho:+.2f} (p {p:.1g})")
        if args.observe == "oneway":
            quiet_probes(rows, os.path.join(args.out, f"oneway{k}.txt"))
        if args.observe == "stalls":
            through_stalls(rows)
        if args.observe == "probertt":
            hit = [x for (x, _, _), v in zip(order, vals) if v]
            print(f"    requests with a transfer in ProbeRTT: {len(hit)} of {len(order)}"
                  + (f", at {', '.join(f'{x:.2f}x' for x in hit)} the median" if hit else ""))
    if args.observe == "stalls":
        without_stalls(dirs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="?", default="demo",
                    help="scenario name or file to run (default: demo)")
    ap.add_argument("-o", "--out", default="/tmp/zcube-episodes",
                    help="directory for the run and the observer's record")
    ap.add_argument("--observe", choices=("probertt", "bbr", "oneway", "stalls"),
                    help="what to record beside the run (see above)")
    ap.add_argument("--probe-ms", type=float, default=5.0,
                    help="with --observe oneway: ms between datagrams (at least 1; default 5)")
    ap.add_argument("--probe-hosts", type=int, nargs=2, default=(-1, 0), metavar=("FROM", "TO"),
                    help="with --observe oneway: the hosts, by index in the fabric's host "
                         "order (default: -1 0, the last to the first)")
    ap.add_argument("--idle", type=float, metavar="SECONDS",
                    help="run no scenario: the one-way probe on an idle ZCube for SECONDS")
    ap.add_argument("--monitors", action="store_true",
                    help="with --idle: the datapath monitor and the link sampler running")
    ap.add_argument("--sched", action="store_true",
                    help="with --idle: record the scheduler (perf sched, linux-perf) and name "
                         "what ran on a CPU during each of the datapath probe's stalls")
    ap.add_argument("--ovs-config", action="append", default=[], metavar="KEY=VALUE",
                    help="with --idle: set other_config:KEY=VALUE on the testbed's own OVS "
                         "first (repeatable; e.g. stats-update-interval=60000)")
    ap.add_argument("--from", dest="again", metavar="DIR",
                    help="read a finished DIR again instead of running")
    args = ap.parse_args()
    if args.probe_ms < 1:
        ap.error("--probe-ms must be at least 1")
    if args.idle is not None:
        if os.geteuid() != 0 or not 1 <= args.idle <= 3600:
            ap.error("--idle needs root and 1 to 3600 seconds")
        if args.sched and not shutil.which("perf"):
            ap.error("--sched needs perf (apt install linux-perf)")
        return idle(args)
    if args.observe is None:
        ap.error("--observe is required (or --idle)")
    if args.again:
        args.out = args.again
    else:
        if os.geteuid() != 0:
            ap.error("running a scenario needs root (sudo); --from DIR reads one without")
        run(args)
    report(args)


if __name__ == "__main__":
    main()
