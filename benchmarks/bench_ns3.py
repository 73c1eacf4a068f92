"""How big a fabric and workload the ns-3 backend simulates, and how long it takes (no
root): one cross-rail workload per fabric.

    .venv/bin/python -m benchmarks.bench_ns3 [--quick]
    .venv/bin/python -m benchmarks.bench_ns3 --fabrics zcube:8 roft:16x4 --count 40
    .venv/bin/python -m benchmarks.bench_ns3 --transport tcp-per-transfer

Figures: wall-clock seconds for planning the routes, building the network and simulating,
the simulated seconds, the transfers' FCT p50 / p99, how many verified, and the peak memory.
Target: plan + build + simulate under 60 s for each fabric (ZCube n=4, n=8, ROFT 16x4 and
ZCube n=16 with 8 GPUs a server, 40 requests each; 9-17 s when set), every transfer
verified.  ``--quick`` (about a minute with ns-3's import): ZCube n=4 and ROFT 16x4.
"""
import argparse
import json
import resource
import time

from benchmarks.common import limit, need_ns3, target
from controller.routing import RouteTable
from testbed.core.metrics import percentile
from testbed.experiment.runner import requests_for, workload_for
from testbed.experiment.scenario import loads

TARGET_S = 60.0
def scenario(builder: str, params: dict, policy: str, count: int, gpus: int):
    doc = {"name": "bench-ns3", "link_mbps": 100, "repetitions": 1, "seed": 1,
           "model": {"preset": "llama3-70b", "prefill_tokens_per_s": 400000},
           "fabrics": [{"name": "f", "builder": builder, "params": params, "policy": policy}],
           "deployment": {"prefill_tp": gpus, "decode_tp": gpus, "placements": ["cross-rail"]},
           "workload": {"arrivals": "poisson", "rate": 8, "count": count,
                        "input_tokens": 16384}}
    return loads(json.dumps(doc))


def parse(text: str):
    """``zcube:N[xG]`` or ``roft:SxG``: builder, params, policy and TP (ValueError else)."""
    kind, _, size = text.partition(":")
    if kind == "zcube":
        n, _, g = size.partition("x")
        return "zcube", {"n": int(n), "gpus_per_server": int(g or n)}, "zcube", int(g or n)
    if kind != "roft":
        raise ValueError(text)
    servers, _, g = size.partition("x")
    return "roft", {"servers": int(servers), "gpus_per_server": int(g)}, "ecmp", int(g)


def one(ns, text: str, count: int, transport: str) -> None:
    """Simulate one fabric's workload and print its line."""
    from testbed.ns3.routes import plan
    from testbed.ns3.simulate import _Network
    from testbed.ns3.transfers import TransferSender
    builder, params, policy, gpus = parse(text)
    sc = scenario(builder, params, policy, count, gpus)
    fab = sc.fabrics[0].build()
    reqs, _ = requests_for(sc, sc.seed)
    work = workload_for(sc, fab, sc.placements[0], sc.seed, reqs)
    table = RouteTable(fab, policy)
    t0 = time.time()
    plan(table)
    t1 = time.time()
    net = _Network(ns, table, sc.link_mbps)
    net.sender = TransferSender(net, work, transport)
    net.sender.plan()
    pieces = net.sender.pieces
    t2 = time.time()
    net.run(work, net.sender)
    rows = net.sender.rows()
    t3 = time.time()
    sim_s = ns.Simulator.Now().GetSeconds()
    ns.Simulator.Destroy()
    fct = [r["fct_ms"] for r in rows if r["verified"]]
    aim = target(t3 - t0 < TARGET_S and len(fct) == len(rows),
                 f"under {TARGET_S:g} s, all verified")
    print(f"{fab.label:<18}{len(fab.hosts):>6}{len(rows):>10}{len(pieces):>8}"
          f"{t1 - t0:>8.1f}{t2 - t1:>9.1f}{t3 - t2:>12.1f}{sim_s:>12.1f}"
          f"{percentile(fct, 50) if fct else float('nan'):>12.2f}"
          f"{percentile(fct, 99) if fct else float('nan'):>12.2f}"
          f"{len(fct):>6}/{len(rows):<4}  {aim}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabrics", nargs="+", default=None,
                    help="zcube:N[xG] or roft:SxG (default: zcube:4 zcube:8 roft:16x4 "
                         "zcube:16x8; --quick: zcube:4 roft:16x4)")
    ap.add_argument("--count", type=int, default=40, help="requests per workload (40)")
    ap.add_argument("--transport", choices=("pool", "tcp-per-transfer"), default="pool",
                    help="kept-open connections per pairing (pool, the default) or a "
                         "connection per piece")
    ap.add_argument("--quick", action="store_true", help="ZCube n=4 and ROFT 16x4 only")
    args = ap.parse_args(argv)
    fabrics = args.fabrics or (["zcube:4", "roft:16x4"] if args.quick else
                               ["zcube:4", "zcube:8", "roft:16x4", "zcube:16x8"])
    try:
        [parse(f) for f in fabrics]
    except ValueError:
        ap.error(f"--fabrics takes zcube:N[xG] or roft:SxG, got {' '.join(fabrics)}")
    t = time.time()
    with limit(300, "importing ns-3"):
        ns = need_ns3()
    print(f"import ns-3: {time.time() - t:.1f} s")
    print(f"{'fabric':<18}{'GPUs':>6}{'transfers':>10}{'pieces':>8}{'plan s':>8}"
          f"{'build s':>9}{'simulate s':>12}{'sim time s':>12}{'FCT p50 ms':>12}"
          f"{'FCT p99 ms':>12}{'verified':>10}")
    for text in fabrics:
        with limit(1800, f"{text}: plan, build and simulate"):
            one(ns, text, args.count, args.transport)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (resident, this process): {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
