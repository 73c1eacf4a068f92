"""``zcube demo``: the default comparison, ZCube n=4 versus a full-bisection ROFT of the same
16 GPUs (4 GPUs per server, 400 Gb/s per GPU).

It computes from the pure core: cost, route verification of each policy, and offered link
utilisation when every GPU sends at line rate (all-to-all, and prefill to decode).  Then,
as root with Open vSwitch installed, it brings both fabrics up in Mininet with the
controller and proves each forwards exactly as computed.  It writes everything to one
folder: fabric files, JSON reports, drawings.
"""
from __future__ import annotations

import json
import os
import sys

from controller.routing import RouteTable
from controller.verify import verify
from topologies import roft, save_fabric, zcube
from topologies.cost import cost, cost_table

CASES = [("zcube", "zcube"), ("zcube", "zcube-short"), ("roft", "ecmp"), ("roft", "shortest")]
MATRICES = ["all-to-all", "pd"]


def _fabric_util(rep) -> tuple[float, float]:
    """Highest utilisation on switch-to-switch links and on links into hosts."""
    fabric = max((v["util_max"] for k, v in rep.loads.items()
                  if "host" not in k), default=0.0)
    edge = max((v["util_max"] for k, v in rep.loads.items() if k.endswith("->host")), default=0.0)
    return fabric, edge


def emulate_both(fabrics: dict, out_dir: str) -> list:
    """Bring each fabric up, verify it, tear it down; returns table rows."""
    from mininet.log import setLogLevel

    from .emulation import Emulation, EmulationError
    setLogLevel("warning")
    rows, reports = [], {}
    kv_rows = []
    for name, fab in fabrics.items():
        print(f"  bringing up {fab.label} in Mininet + OVS ...", flush=True)
        try:
            with Emulation(fab, link_mbps=100) as emu:
                rep = emu.verify()
                if rep["ok"]:
                    kv_rows += carry_kv(emu, fab)
        except EmulationError as err:
            print(f"  {fab.label}: {err}", file=sys.stderr)
            rows.append((fab.label, "-", "-", "-", "-", "-", "FAILED"))
            continue
        reports[name] = rep
        rows.append((fab.label, f"{rep['switches_connected']}/{rep['switches']}",
                     f"{rep['flows_installed']}/{rep['flows_expected']}",
                     f"{rep['pairs_ok']}/{rep['pairs_tested']}",
                     f"{rep['paths_ok']}/{rep['paths_traced']}",
                     f"{rep['bringup_s']:.1f} + {rep['verify_s']:.1f}",
                     "ok" if rep["ok"] else "FAILED"))
    with open(os.path.join(out_dir, "emulation.json"), "w") as f:
        json.dump(reports, f, indent=1)
    with open(os.path.join(out_dir, "kv.json"), "w") as f:
        json.dump(kv_rows, f, indent=1)
    return rows, kv_rows


KV_REQUESTS = 24


def carry_kv(emu, fab) -> list:
    """The same 24 llama3-70b requests (Poisson, 4/s, 8K tokens) with P and D rank layouts
    aligned and crossed, carried for real; one summary per placement."""
    from traffic.arrivals import poisson
    from traffic.models import get_model
    from traffic.placement import deploy
    from traffic.types import Scale
    from traffic.workload import build_workload

    from .records import summarize
    from .transfers import run_transfers
    factor = 100 / (fab.nic_gbps * 1000)
    out = []
    for placement in ("aligned", "cross-rail"):
        work = build_workload(poisson(4, count=KV_REQUESTS, seed=1, input_tokens=8192),
                              deploy(fab, 4, 4, placement=placement), get_model("llama3-70b"),
                              scale=Scale(factor, factor))
        doc = summarize(work, run_transfers(emu, work), 100)
        out.append({"fabric": fab.label, "policy": emu.table.policy_name,
                    "placement": placement, **doc})
    return out


def _table(head, rows) -> None:
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def run_demo(out_dir: str, emulate: bool = True) -> int:
    os.makedirs(out_dir, exist_ok=True)
    fabrics = {"zcube": zcube(n=4, gpus_per_server=4), "roft": roft(servers=4, gpus_per_server=4)}
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

    try:
        from topologies.draw import draw
    except ImportError:  # drawing is optional for the demo's numbers
        draw = None
    for name, fab in fabrics.items():
        save_fabric(fab, os.path.join(out_dir, f"{name}.json"))
        if draw is not None:
            draw(fab, os.path.join(out_dir, f"{name}.svg"))
            draw(fab, os.path.join(out_dir, f"{name}.png"))
    ok = all(r[3] == "ok" for r in rows)
    if emulate and os.geteuid() == 0:
        print("\nEmulation: both fabrics on real switches (Mininet hosts, Open vSwitch, the "
              "Ryu app installing the computed routes), NIC 100 Mb/s:")
        emu_rows, kv = emulate_both(fabrics, out_dir)
        _table(("fabric", "switches", "flows read back", "pairs answering", "paths traced",
                "up + verify s", "check"), emu_rows)
        ok = ok and all(r[-1] == "ok" for r in emu_rows)
        print(f"\nKV-cache transfers, carried for real: the same {KV_REQUESTS} llama3-70b "
              f"requests (Poisson 4/s, 8K tokens, TP4 -> TP4, KV scaled 1:4000 like the links):")
        _table(("fabric", "placement", "verified", "FCT p50 ms", "FCT p99 ms", "TTFT p99 ms"),
               [(k["fabric"], k["placement"], f"{k['transfers_verified']}/{k['transfers_total']}",
                 (k["fct_ms"] or {}).get("p50"), (k["fct_ms"] or {}).get("p99"),
                 (k["ttft_ms"] or {}).get("p99")) for k in kv])
        ok = ok and all(k["transfers_verified"] == k["transfers_total"] for k in kv)
    elif emulate:
        print("\n(emulation skipped: it needs root)")
    print(f"\nwrote {', '.join(sorted(os.listdir(out_dir)))} in {out_dir}/")
    print("Not yet in this demo: repetitions with confidence intervals, trace replay and the "
          "HTML report; see README 'Status'.")
    return 0 if ok else 1
