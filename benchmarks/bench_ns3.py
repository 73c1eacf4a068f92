"""How big a fabric and workload the ns-3 backend simulates, and how long it takes (no
root): one cross-rail workload per fabric, wall-clock seconds for planning the routes,
building the network and simulating, with the transfers' FCT.

    .venv/bin/python benchmarks/bench_ns3.py
    .venv/bin/python benchmarks/bench_ns3.py --fabrics zcube:8 roft:16x4 --count 40
    .venv/bin/python benchmarks/bench_ns3.py --transport tcp-per-transfer

Prints figures; asserts nothing.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from controller.routing import RouteTable  # noqa: E402
from testbed.core.metrics import percentile  # noqa: E402
from testbed.experiment.runner import requests_for, workload_for  # noqa: E402
from testbed.experiment.scenario import loads  # noqa: E402


def scenario(builder: str, params: dict, policy: str, count: int, gpus: int):
    doc = {"name": "bench-ns3", "link_mbps": 100, "repetitions": 1, "seed": 1,
           "model": {"preset": "llama3-70b", "prefill_tokens_per_s": 400000},
           "fabrics": [{"name": "f", "builder": builder, "params": params, "policy": policy}],
           "deployment": {"prefill_tp": gpus, "decode_tp": gpus, "placements": ["cross-rail"]},
           "workload": {"arrivals": "poisson", "rate": 8, "count": count,
                        "input_tokens": 16384}}
    import json
    return loads(json.dumps(doc))


def parse(text: str):
    kind, _, size = text.partition(":")
    if kind == "zcube":
        n, _, g = size.partition("x")
        return "zcube", {"n": int(n), "gpus_per_server": int(g or n)}, "zcube", int(g or n)
    servers, _, g = size.partition("x")
    return "roft", {"servers": int(servers), "gpus_per_server": int(g)}, "ecmp", int(g)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabrics", nargs="+", default=["zcube:4", "zcube:8", "roft:16x4",
                                                      "zcube:16x8"],
                    help="zcube:N[xG] or roft:SxG (default: zcube:4 zcube:8 roft:16x4 "
                         "zcube:16x8)")
    ap.add_argument("--count", type=int, default=40, help="requests per workload (40)")
    ap.add_argument("--transport", choices=("pool", "tcp-per-transfer"), default="pool",
                    help="kept-open connections per pairing (pool, the default) or a "
                         "connection per piece")
    args = ap.parse_args()
    import resource

    from testbed.ns3.simulate import _Network, ns3
    from testbed.ns3.transfers import Carrier
    t = time.time()
    ns = ns3()
    print(f"import ns-3: {time.time() - t:.1f} s")
    print(f"{'fabric':<18}{'GPUs':>6}{'transfers':>10}{'pieces':>8}{'plan s':>8}"
          f"{'build s':>9}{'simulate s':>12}{'sim time s':>12}{'FCT p50 ms':>12}"
          f"{'FCT p99 ms':>12}{'verified':>10}")
    for text in args.fabrics:
        builder, params, policy, gpus = parse(text)
        sc = scenario(builder, params, policy, args.count, gpus)
        fab = sc.fabrics[0].build()
        reqs, _ = requests_for(sc, sc.seed)
        work = workload_for(sc, fab, sc.placements[0], sc.seed, reqs)
        table = RouteTable(fab, policy)
        t0 = time.time()
        from testbed.ns3.routes import plan
        plan(table)
        t1 = time.time()
        net = _Network(ns, table, sc.link_mbps)
        net.carrier = Carrier(net, work, args.transport)
        net.carrier.plan()
        pieces = net.carrier.pieces
        t2 = time.time()
        links = net.run(work, net.carrier)
        rows = net.carrier.rows()
        t3 = time.time()
        sim_s = ns.Simulator.Now().GetSeconds()
        ns.Simulator.Destroy()
        fct = [r["fct_ms"] for r in rows if r["verified"]]
        print(f"{fab.label:<18}{len(fab.hosts):>6}{len(rows):>10}{len(pieces):>8}"
              f"{t1 - t0:>8.1f}{t2 - t1:>9.1f}{t3 - t2:>12.1f}{sim_s:>12.1f}"
              f"{percentile(fct, 50) if fct else float('nan'):>12.2f}"
              f"{percentile(fct, 99) if fct else float('nan'):>12.2f}"
              f"{len(fct):>6}/{len(rows):<4}", flush=True)
        del links
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (resident, this process): {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
