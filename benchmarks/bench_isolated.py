"""Isolated transfers across bring-ups: does a fresh fabric carry one transfer in its ideal
time, every time (root)?

    sudo .venv/bin/python benchmarks/bench_isolated.py [SCENARIO] [--bring-ups 3]
        [--placement cross-rail]
    sudo ZCUBE_PACING=on .venv/bin/python benchmarks/bench_isolated.py      # paced

For each fabric of the scenario (default: the demo), brings the fabric up ``--bring-ups``
times and does what a run does before its workload: calibration, the kept-open connections
of the first repetition's workload (dilated as the scenario says), then the isolated
transfers the fidelity record judges (each kind of pair alone, five times; FCT over size /
port rate plus a base round trip).  Prints each bring-up's median and P99 of FCT over
ideal; the record's thresholds are a median in [0.95, 1.10] and a P99 of at most 1.25.
Asserts nothing.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mininet.log import setLogLevel  # noqa: E402

from testbed.emulation.calibrate import calibrate  # noqa: E402
from testbed.emulation.emulation import Emulation  # noqa: E402
from testbed.emulation.fidelity import isolated_transfers  # noqa: E402
from testbed.emulation.ovs import Ovs  # noqa: E402
from testbed.emulation.transfers import open_connections  # noqa: E402
from testbed.experiment.pipeline import load_scenario  # noqa: E402
from testbed.experiment.runner import requests_for, workload_for  # noqa: E402
from traffic.workload import dilate  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="demo")
    p.add_argument("--bring-ups", type=int, default=3)
    p.add_argument("--placement", default=None, help="default: the scenario's first")
    args = p.parse_args()
    setLogLevel("warning")
    sc = load_scenario(args.scenario)
    placement = args.placement or sc.placements[0]
    pacing = os.environ.get("ZCUBE_PACING", "off")
    print(f"{sc.name}, {placement}, NIC {sc.link_mbps:g} Mb/s, time dilation "
          f"{sc.time_dilation:g}, pacing {pacing}", flush=True)
    ovs = Ovs().ensure()
    ovs.export_env()
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
                    iso = isolated_transfers(emu, work, sc.transport)
                medians.append(iso["p50"])
                print(f"  {spec.name:<8} bring-up {k + 1}: FCT/ideal p50 {iso['p50']:.3f}  "
                      f"p99 {iso['p99']:.3f}  (base RTT "
                      + ", ".join(f"{kind['base_rtt_ms']:.2f}" for kind in iso["kinds"])
                      + " ms)", flush=True)
            print(f"  {spec.name:<8} medians {', '.join(f'{m:.3f}' for m in medians)}",
                  flush=True)
    finally:
        ovs.stop()


if __name__ == "__main__":
    main()
