"""Failures under PD traffic, on ZCube n=4 and ROFT 4x4 (root, or ns-3 without it).

    sudo .venv/bin/python -m benchmarks.bench_faults [random|outage|overlap] [--reps N]
        [--kinds K,...] [--busy] [--time-dilation D] [--backend emulation|ns3] [--quick]

``random`` (the default): each repetition takes one random element down (a switch-to-switch
cable, a NIC port or a whole switch, seeded) for two seconds while KV transfers run,
restores it, and counts the transfers in flight through it, those started again over
another port pairing, those lost although their GPUs stayed connected (must be 0) and those
cut off.

``outage``: one switch down for 3 s on ZCube (b3), and on ROFT a spine (s1) and a leaf
uplink (l0-s1), each its own run, under the cross-rail TP4 layout (40 requests at 6/s, 16K
tokens): how fast the agents learned, how the transfers in flight and those started during
the outage fared, and their FCT against the same run's fault-free transfers and against
the transfers started in the same window of a control run with the same arrivals and seeds
and no fault (``no fault``: the windows before and after an outage carry other loads than
the outage's, which a Poisson burst can make two or three times heavier).  ``told``,
``reroute`` and ``resumed`` (the fault to when the last in-flight transfer got going again:
its first byte if it was started over, else the end of its longest wait between two blocks,
if that wait spans the fault, ``stalled``) are wall-clock ms; FCTs are in the undilated
system's ms.

``overlap``: a random switch at 1.0 s for 3 s, a random fabric cable at 1.5 s for 3 s and a
random NIC port from 2.0 s to the end, on ZCube: whether every event ran on time, and the
FCT p50 after the last restore against before the first fault.

``--time-dilation D`` runs ``outage`` and ``overlap`` with that time dilation and 64 KB
segments (as cross-rail.yaml; ``--busy`` implies 2): undilated, the issue's layout is not
faithful on a 2-core machine.

With ``--backend ns3`` the same runs are simulated packet by packet (no root): there the
control plane acts a fixed 50 ms after each event (``testbed/ns3/faults.py``), and times
are simulated ms.

Targets: no transfer lost while its GPUs stayed connected, in every mode; ``random``: the
controller's reroute under 100 ms at the median (it took 17-71 ms); ``overlap``: every
event carried out and every transfer verified.  ``--quick`` (about a minute): ``random``
with one whole switch down once per fabric.
"""
import argparse
import csv
import os
import tempfile

from benchmarks.common import limit, need_ns3, need_root, target
from testbed.core.metrics import percentile
from testbed.experiment.runner import run_scenario
from testbed.experiment.scenario import loads

KINDS = ("fabric-link", "nic", "switch")
REROUTE_MS = 100.0            # the target: the controller's reroute at the median
RUN_LIMIT_S = 900             # one scenario run (a fabric's repetitions), at most

SCENARIO = """\
name: bench-faults
link_mbps: 100
repetitions: {reps}
verify_sample: 20
fabrics:
  - {{name: zcube, builder: zcube, params: {{n: 4, gpus_per_server: 4}}, policy: zcube}}
  - {{name: roft, builder: roft, params: {{servers: 4, gpus_per_server: 4}}, policy: ecmp}}
# a prefill 20x faster than the preset's keeps the network busy: transfers are in flight
# when the fault strikes
model: {{preset: llama3-70b, prefill_tokens_per_s: 400000}}
deployment: {{placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: 8, count: 40, input_tokens: 32768}}
faults:
  - {{at_s: 2.0, element: "random:{kind}", duration_s: 2}}
"""


LAYOUT = """\
name: bench-{name}
link_mbps: {link_mbps}
repetitions: {reps}
verify_sample: 20
{extra}model: {{preset: llama3-70b, prefill_tokens_per_s: {prefill}}}
fabrics:
  - {fabric}
deployment: {{prefill_tp: 4, decode_tp: 4, placements: [cross-rail]}}
workload: {{arrivals: poisson, rate: {rate}, count: 40, input_tokens: {tokens}}}
faults:
{faults}
"""
# the issue's layout, and (--busy) cross-rail.yaml's regime, where transfers are always in
# flight: 32K tokens at 8/s, prefill 4x faster, twice as slow with 64 KB segments (what
# keeps the datapath up with it on two cores)
LOADS = {False: {"prefill": 100000, "rate": 6, "tokens": 16384, "extra": ""},
         True: {"prefill": 400000, "rate": 8, "tokens": 32768,
                "extra": "time_dilation: 2\nlarge_segments: true\n"}}
ZCUBE = "{name: zcube, builder: zcube, params: {n: 4, gpus_per_server: 4}, policy: zcube}"
ROFT = "{name: roft, builder: roft, params: {servers: 4, gpus_per_server: 4}, policy: ecmp}"
OUTAGES = [("zcube", ZCUBE, "b3"), ("roft", ROFT, "s1"), ("roft", ROFT, "l0-s1")]
OVERLAP = ['  - {at_s: 1.0, element: "random:switch", duration_s: 3}',
           '  - {at_s: 1.5, element: "random:fabric-link", duration_s: 3}',
           '  - {at_s: 2.0, element: "random:nic"}']


def _rows(folder: str) -> list[dict]:
    with open(os.path.join(folder, "transfers.csv")) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("start_s", "end_s", "fct_ms"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else None
        r["rep"] = int(r.get("rep") or 0)
    return rows


def _p(values, q):
    return percentile(values, q) if values else float("nan")


def _dilation(args) -> float:
    return args.time_dilation or (2 if args.busy else 1)


def _run(name, fabric, faults, args):
    out = tempfile.mkdtemp(prefix="zcube-bench-faults-")
    load = dict(LOADS[args.busy])
    if args.time_dilation:            # and 64 KB segments, as cross-rail.yaml
        load["extra"] = f"time_dilation: {args.time_dilation:g}\nlarge_segments: true\n"
    sc = loads(LAYOUT.format(name=name, reps=args.reps, fabric=fabric, faults=faults,
                             link_mbps=args.link_mbps, **load),
               f"bench-{name}.yaml")
    with limit(RUN_LIMIT_S, f"{name}: a run with faults"):
        runs = run_scenario(sc, out, backend=args.backend, log=lambda m: None)
    (run, summary), = runs.items()
    return summary, _rows(os.path.join(out, run))


def outage(args) -> None:
    print(f"{'fabric':<6} {'element':<8} {'rep':>3} {'faithful':>8} {'told ms':>7} "
          f"{'reroute ms':>10} {'in flight':>9} {'moved':>5} {'stalled':>7} {'resumed ms':>10} "
          f"{'started':>7} {'avoided':>7} {'again':>5} {'lost':>4} {'FCT p50 free':>12} "
          f"{'during':>6} {'FCT p99 free':>12} {'during':>6} {'p99 ratio':>9} "
          f"{'no fault':>8} {'ratio':>5}")
    controls = {}
    for name, fabric, element in OUTAGES:
        if name not in controls:          # the same arrivals and seeds, nothing failed
            controls[name] = _run(name, fabric, "  []", args)[1]
        summary, rows = _run(name, fabric,
                             f'  - {{at_s: 1.0, element: "{element}", duration_s: 3}}', args)
        fid = summary.get("fidelity") or {}
        faithful = fid.get("faithful")
        if fid and not faithful:          # (a simulation has no fidelity record)
            print(f"  ({name} not faithful: {'; '.join(fid.get('reasons', []))})")
        for f in summary["faults"]:
            if f["action"] != "down":
                continue
            rep = f.get("rep", 0)
            ups = [u["t_s"] for u in summary["faults"] if u["action"] == "up"
                   and u.get("rep", 0) == rep and u["t_s"] > f["t_s"]]
            back = min(ups) if ups else float("inf")
            mine = [r for r in rows if r["rep"] == rep and r["fct_ms"] is not None]
            free = [r["fct_ms"] for r in mine if r["end_s"] <= f["t_s"] or r["start_s"] >= back]
            during = [r["fct_ms"] for r in mine if f["t_s"] < r["start_s"] < back]
            control = [r["fct_ms"] for r in controls[name] if r["rep"] == rep
                       and r["fct_ms"] is not None and f["t_s"] < r["start_s"] < back]
            sd = f.get("started_during") or {}
            lost = sd.get("lost", 0) + f["transfers_lost"]
            resumed = (f.get("resumed_after_ms") or {}).get("max")
            if resumed is not None:       # wall-clock ms, as the agents' and reroute times
                resumed = round(resumed * _dilation(args), 1)
            print(f"{name:<6} {element:<8} {rep:>3} {str(faithful):>8} "
                  f"{1000 * (f.get('agents_told_s') or float('nan')):>7.0f} "
                  f"{1000 * (f.get('since_injection_s') or float('nan')):>10.0f} "
                  f"{f['transfers_affected']:>9} {f.get('transfers_moved_at_once', 0):>5} "
                  f"{f.get('transfers_stalled', 0):>7} "
                  f"{resumed if resumed is not None else '-':>10} "
                  f"{sd.get('transfers', 0):>7} {sd.get('avoided', 0):>7} "
                  f"{sd.get('retried', 0):>5} {lost:>4} "
                  f"{_p(free, 50):>12.1f} {_p(during, 50):>6.1f} {_p(free, 99):>12.1f} "
                  f"{_p(during, 99):>6.1f} {_p(during, 99) / _p(free, 99):>9.2f} "
                  f"{_p(control, 99):>8.1f} {_p(during, 99) / _p(control, 99):>5.2f}  "
                  + target(lost == 0, "none lost"), flush=True)


def overlap(args) -> None:
    summary, rows = _run("overlap", ZCUBE, "\n".join(OVERLAP), args)
    fid = summary.get("fidelity") or {}
    missed = summary.get("faults_not_run", 0)
    print(f"faithful: {fid.get('faithful')} {'; '.join(fid.get('reasons', []))}; "
          f"not carried out: {missed}; " + target(missed == 0, "every event carried out"))
    print(f"{'rep':>3} {'event':<24} {'t_s':>6} {'late ms':>7} {'note'}")
    for f in summary["faults"]:
        print(f"{f.get('rep', 0):>3} {f['element'] + ' ' + f['action']:<24} {f['t_s']:>6.2f} "
              f"{1000 * f['late_s'] if f.get('late_s') is not None else float('nan'):>7.1f} "
              + (f.get("error") or ("already down: nothing to change" if f.get("unchanged")
                                    else "")))
    print(f"{'rep':>3} {'FCT p50 before':>14} {'after last restore':>18} {'ratio':>6} "
          f"{'verified':>8}")
    for rep in sorted({r["rep"] for r in rows}):
        ev = [f for f in summary["faults"] if f.get("rep", 0) == rep and "error" not in f]
        first = min(f["t_s"] for f in ev if f["action"] == "down")
        last = max(f["t_s"] for f in ev if f["action"] == "up"
                   and f["element"] != "(all, at the end)")
        mine = [r for r in rows if r["rep"] == rep]
        before = [r["fct_ms"] for r in mine if r["fct_ms"] is not None and r["end_s"] <= first]
        after = [r["fct_ms"] for r in mine if r["fct_ms"] is not None and r["start_s"] >= last]
        ok = sum(1 for r in mine if r["verified"] == "True")
        print(f"{rep:>3} {_p(before, 50):>14.1f} {_p(after, 50):>18.1f} "
              f"{_p(after, 50) / _p(before, 50):>6.2f} {ok:>4}/{len(mine)}  "
              + target(ok == len(mine), "every transfer verified"), flush=True)


def random_failures(args) -> None:
    """One random element of each kind down per repetition, on both fabrics."""
    print(f"{'fabric':<10} {'kind':<12} {'injected':>8} {'affected':>8} {'again':>6} "
          f"{'lost':>5} {'cut off':>7} {'reroute ms p50':>14} {'max':>6}")
    for kind in args.kinds:
        with tempfile.TemporaryDirectory() as out, \
                limit(2 * RUN_LIMIT_S, f"{kind} failures on both fabrics"):
            sc = loads(SCENARIO.format(reps=args.reps, kind=kind), "bench-faults.yaml")
            runs = run_scenario(sc, out, backend=args.backend, log=lambda m: None)
        for name, s in runs.items():
            downs = [f for f in s.get("faults", []) if f["action"] == "down"]
            times = [1000 * f["since_injection_s"] for f in downs if f.get("since_injection_s")]
            lost = sum(f["transfers_lost"] for f in downs)
            p50 = percentile(times, 50) if times else float("nan")
            print(f"{name:<10} {kind:<12} {len(downs):>8} "
                  f"{sum(f['transfers_affected'] for f in downs):>8} "
                  f"{sum(f['transfers_retried'] for f in downs):>6} {lost:>5} "
                  f"{sum(f['transfers_cut_off'] for f in downs):>7} {p50:>14.1f} "
                  f"{max(times) if times else float('nan'):>6.1f}  "
                  + target(lost == 0 and p50 < REROUTE_MS,
                           f"none lost, reroute p50 under {REROUTE_MS:g} ms"), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", nargs="?", default="random", choices=("random", "outage", "overlap"),
                    help="which failures (module docstring; default random)")
    ap.add_argument("--reps", type=int, default=None,
                    help="failures per fabric and kind (default 4; outage and overlap: 3)")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help=f"random: which elements fail ({','.join(KINDS)}, the default)")
    ap.add_argument("--link-mbps", type=float, default=40,
                    help="outage and overlap: emulated rate per GPU (default 40)")
    ap.add_argument("--busy", action="store_true",
                    help="outage and overlap: cross-rail.yaml's regime (32K tokens at 8/s, "
                         "prefill 4x faster, time dilation 2, 64 KB segments), so transfers "
                         "are in flight when a fault strikes")
    ap.add_argument("--time-dilation", type=float, default=None,
                    help="outage and overlap: time dilation, with 64 KB segments (default: "
                         "none; --busy: 2)")
    ap.add_argument("--backend", choices=("emulation", "ns3"), default="emulation",
                    help="emulation (default; root) or ns3 (packet by packet, no root)")
    ap.add_argument("--quick", action="store_true",
                    help="random: one whole switch down once per fabric")
    args = ap.parse_args(argv)
    args.kinds = ["switch"] if args.quick else args.kinds.split(",")
    if set(args.kinds) - set(KINDS) or (args.reps is not None and args.reps < 1):
        ap.error(f"--kinds takes {', '.join(KINDS)}; --reps 1 or more")
    if args.backend == "emulation":
        need_root()
        from mininet.log import setLogLevel
        setLogLevel("warning")
    else:
        need_ns3()
    if args.mode != "random":
        args.reps = args.reps or 3
        (outage if args.mode == "outage" else overlap)(args)
        return
    args.reps = 1 if args.quick else args.reps or 4
    random_failures(args)


if __name__ == "__main__":
    main()
