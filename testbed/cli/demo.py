"""``zcube demo``: the default comparison, ZCube n=4 versus a full-bisection ROFT of the same
16 GPUs (4 GPUs per server, 400 Gb/s per GPU).

It computes from the pure core: cost, route verification of each policy, and offered link
utilisation when every GPU sends at line rate (all-to-all, and prefill to decode).  Then it
runs the embedded scenario ``scenarios/demo.yaml``: as root, both fabrics are brought up in
Mininet with the controller, verified, and carry the same PD KV-cache transfers for real;
the results, comparison and report land in one folder.
"""
from __future__ import annotations

import json
import os
import sys

from controller.routing import RouteTable
from controller.verify import verify
from testbed.core.tables import text_table
from testbed.errors import UsageError
from topologies.cost import cost, cost_table

CASES = [("zcube", "zcube"), ("zcube", "zcube-short"), ("roft", "ecmp"), ("roft", "shortest")]
MATRICES = ["all-to-all", "pd"]


def _fabric_util(rep) -> tuple[float, float]:
    """Highest utilisation on switch-to-switch links and on links into hosts."""
    fabric = max((v["util_max"] for k, v in rep.loads.items()
                  if "host" not in k), default=0.0)
    edge = max((v["util_max"] for k, v in rep.loads.items() if k.endswith("->host")), default=0.0)
    return fabric, edge


def _table(head, rows) -> None:
    print("\n".join(text_table(head, rows, align="l" * len(head))))


def run_demo(out_dir: str, backend: str = "emulation") -> int:
    """Cost and route checks (pure), then the embedded scenario ``scenarios/demo.yaml`` on
    ``backend``: both fabrics, aligned and cross-rail, three repetitions, then the report."""
    from testbed.analysis.present import run_and_present
    from testbed.experiment.pipeline import load_scenario, shipped
    os.makedirs(out_dir, exist_ok=True)
    sc = load_scenario(shipped("demo"))
    fabrics = {f.name: f.build() for f in sc.fabrics}
    print(f"ZCube versus ROFT, 16 GPUs, 4 per server, 400 Gb/s NIC per GPU -> {out_dir}/\n")

    costs = [cost(f) for f in fabrics.values()]
    print("Cost (ratio = ZCube / ROFT):")
    print(cost_table(costs))
    with open(os.path.join(out_dir, "cost.json"), "w") as f:
        json.dump(costs, f, indent=1)

    rows, reports = [], {}
    for kind, policy in CASES:
        table = RouteTable(fabrics[kind], policy)
        for tm in MATRICES:
            rep = verify(table, traffic=tm, line_rate=True)
            reports[f"{kind}/{policy}/{tm}"] = rep.to_dict()
            sw_util, edge_util = _fabric_util(rep)
            rows.append((fabrics[kind].label, policy, tm, "ok" if rep.ok else "FAILED",
                         f"{rep.stretch_max:.1f}", f"{sw_util:.2f}", f"{edge_util:.2f}"))
            if not rep.ok:
                print(rep.to_text(), file=sys.stderr)
    with open(os.path.join(out_dir, "routes.json"), "w") as f:
        json.dump(reports, f, indent=1)
    print("\nRoutes: every GPU offers its full NIC rate (utilisation > 1 means that link "
          "caps the transfer):")
    _table(("fabric", "policy", "traffic", "check", "stretch", "max util sw-sw",
            "max util ->GPU"), rows)
    if not all(r[3] == "ok" for r in rows):
        return 1

    w = sc.workload
    print(f"\nKV-cache transfers on the {backend} backend"
          + (" (Mininet hosts, Open vSwitch, the Ryu app installing the computed routes, "
             "real TCP with every byte checked)" if backend == "emulation" else
             " (flow-level max-min fair model)")
          + f": {w.count} {sc.model.name} requests (Poisson {w.rate:g}/s, "
          f"{w.input_tokens} tokens, TP{sc.deployment.prefill_tp} -> "
          f"TP{sc.deployment.decode_tp}), placements {', '.join(sc.placements)}, "
          f"{sc.repetitions} repetitions, NIC {sc.link_mbps:g} Mb/s per GPU "
          f"(KV scaled 1:{400000 / sc.link_mbps:,.0f} like the links).\n", flush=True)
    return run_and_present(sc, out_dir, backend, force=False, report=True)


def cmd_demo(args) -> int:
    import os
    backend = "model" if args.no_emulation else args.backend
    if backend == "emulation" and os.geteuid() != 0:
        raise UsageError("the demo emulates both fabrics and needs root: run 'sudo make demo', "
                         "or 'zcube demo --backend model' for the flow-level model")
    return run_demo(args.output, backend=backend)


def add_parser(sub) -> None:
    d = sub.add_parser("demo", help="the default comparison (what 'make demo' runs)",
                       description="ZCube n=4 versus a full-bisection ROFT of the same 16 GPUs: "
                                   "cost, route checks and link loads, then the embedded scenario "
                                   "(scenarios/demo.yaml): both fabrics brought up in Mininet + "
                                   "OVS (root), verified, carrying the same PD KV-cache transfers "
                                   "with rank layouts aligned and crossed, three repetitions; ends "
                                   "with the comparison table and the report's path.")
    d.add_argument("-o", "--output", metavar="DIR", default="results/demo",
                   help="folder for the demo's files (default results/demo)")
    d.add_argument("--backend", choices=["emulation", "model"], default="emulation",
                   help="emulation (default; needs root) or model (the flow-level simulator)")
    d.add_argument("--no-emulation", action="store_true",
                   help="same as --backend model")
    d.set_defaults(func=cmd_demo)
