"""Isolated transfers across bring-ups: does a fresh fabric carry one transfer in its ideal
time, every time (root)?

    sudo .venv/bin/python benchmarks/bench_isolated.py [SCENARIO] [--bring-ups 3]
        [--placement cross-rail] [--repeats 5] [-o FILE.json]
    sudo ZCUBE_PACING=on .venv/bin/python benchmarks/bench_isolated.py      # paced

For each fabric of the scenario (default: the demo), brings the fabric up ``--bring-ups``
times and does what a run does before its workload: calibration, the kept-open connections
of the first repetition's workload (dilated as the scenario says), then the isolated
transfers the fidelity record judges (each kind of pair alone, ``--repeats`` times, five in
a run; FCT over size / port rate plus a base round trip), beside the datapath probe as a
run measures them.  Prints each bring-up's median and P99 of FCT over ideal (the record's
thresholds are a median in [0.95, 1.10] and a P99 of at most 1.25), each transfer over
1.25 with the probe's largest delay in flight with it and the latest of its timer's
wake-ups meanwhile and the TCP segments its hosts retransmitted, and at the end, over every
bring-up, how many transfers passed 1.10 and 1.25 among those that went through a datapath
stall (a probe datagram over 2 ms), those with a retransmission and no stall, and the
others.  Asserts nothing.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mininet.log import setLogLevel  # noqa: E402

from testbed.core.fidelity import STALL_MS  # noqa: E402
from testbed.emulation.calibrate import calibrate  # noqa: E402
from testbed.emulation.emulation import Emulation  # noqa: E402
from testbed.emulation.fidelity import isolated_beside_probe  # noqa: E402
from testbed.emulation.ovs import Ovs  # noqa: E402
from testbed.emulation.transfers import open_connections  # noqa: E402
from testbed.experiment.pipeline import load_scenario  # noqa: E402
from testbed.experiment.runner import requests_for, workload_for  # noqa: E402
from traffic.workload import dilate  # noqa: E402


def tally(kept: list) -> None:
    """Transfers over 1.10 and 1.25 of their ideal: through a datapath stall, with a TCP
    retransmission, neither."""
    groups = (("through a stall", lambda x: x["probe_ms"] > STALL_MS),
              ("retransmitted", lambda x: x["probe_ms"] <= STALL_MS and x["retransmitted"]),
              ("neither", lambda x: x["probe_ms"] <= STALL_MS and not x["retransmitted"]))
    for name in sorted({x["fabric"] for x in kept}):
        for label, this in groups:
            xs = [x["ratio"] for x in kept if x["fabric"] == name and this(x)]
            print(f"  {name:<8} {label:<16} {len(xs):>5} transfers, over 1.10: "
                  f"{sum(x > 1.10 for x in xs):>3}, over 1.25: {sum(x > 1.25 for x in xs):>3}"
                  + (f", max {max(xs):.3f}" if xs else ""), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="demo")
    p.add_argument("--bring-ups", type=int, default=3)
    p.add_argument("--placement", default=None, help="default: the scenario's first")
    p.add_argument("--repeats", type=int, default=5,
                   help="isolated transfers of each kind per bring-up (a run carries 5)")
    p.add_argument("-o", "--output", default=None,
                   help="write every isolated transfer's figures to this JSON file")
    args = p.parse_args()
    setLogLevel("warning")
    sc = load_scenario(args.scenario)
    placement = args.placement or sc.placements[0]
    pacing = os.environ.get("ZCUBE_PACING", "off")
    print(f"{sc.name}, {placement}, NIC {sc.link_mbps:g} Mb/s, time dilation "
          f"{sc.time_dilation:g}, pacing {pacing}", flush=True)
    ovs = Ovs().ensure()
    ovs.export_env()
    kept = []
    try:
        for spec in sc.fabrics:
            fab = spec.build()
            work = dilate(workload_for(sc, fab, placement, sc.seed,
                                       requests_for(sc, sc.seed)[0]), sc.time_dilation)
            medians = []
            for k in range(args.bring_ups):
                with Emulation(fab, policy=spec.policy, link_mbps=sc.link_mbps, ovs=ovs,
                               log=lambda m: None) as emu:
                    calibrate(emu)
                    open_connections(emu, work)
                    iso, steal = isolated_beside_probe(emu, work, sc.transport, args.repeats)
                medians.append(iso["p50"])
                print(f"  {spec.name:<8} bring-up {k + 1}: FCT/ideal p50 {iso['p50']:.3f}  "
                      f"p99 {iso['p99']:.3f}  (base RTT "
                      + ", ".join(f"{kind['base_rtt_ms']:.2f}" for kind in iso["kinds"])
                      + f" ms); {iso['stalled']} through a stall, probe max "
                      f"{iso['probe_max_ms']:.2f} ms, wake-ups max {iso['wake_max_ms']:.2f} ms "
                      f"late, steal max {steal:.0%}", flush=True)
                for kind in iso["kinds"]:
                    for i, (x, d, w, r, u, f, g, v, c, m, e) in enumerate(zip(
                            kind["fct_over_ideal"], kind["probe_ms"], kind["wake_ms"],
                            kind["retransmitted"], kind["unreceived"],
                            kind["first_byte_ms"], kind["gap_ms"], kind["verdict_ms"],
                            kind["cwnd"], kind["pacing_mbps"], kind["cwnd_end"])):
                        kept.append({"fabric": spec.name, "bring_up": k + 1,
                                     "switches": kind["switches"], "ratio": x,
                                     "at": kind["at"][i], "probe_ms": d, "wake_ms": w,
                                     "retransmitted": r, "unreceived": u,
                                     "first_byte_ms": f, "gap_ms": g, "verdict_ms": v,
                                     "cwnd": c, "pacing_mbps": m, "cwnd_end": e})
                        if x > 1.25:
                            print(f"    transfer {i + 1}: {x:.3f}x its ideal "
                                  f"({kind['ideal_ms']:.1f} ms), first byte after {f} ms, "
                                  f"longest gap {g} ms, verdict after {v} ms, probe {d:.2f} "
                                  f"ms, wake-up {w:.2f} ms late, {r} retransmitted, {u} "
                                  f"unreceived, cwnd {c} (at the end {e}), pacing {m} Mb/s",
                                  flush=True)
            print(f"  {spec.name:<8} medians {', '.join(f'{m:.3f}' for m in medians)}",
                  flush=True)
        tally(kept)
        if args.output:
            with open(args.output, "w") as out:
                json.dump(kept, out)
    finally:
        ovs.stop()


if __name__ == "__main__":
    main()
