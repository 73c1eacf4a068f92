"""``zcube demo --tor-failure``: how each fabric survives a top-of-rack failure, in a few
lines.  It runs scenarios/tor-failure.yaml (the busiest GPU-facing switch of each fabric
down for two seconds of PD traffic, every fabric also run without it) and reads the
outage table (:mod:`testbed.analysis.outage`)."""
from __future__ import annotations

import os
import time

SCENARIO = "tor-failure"
WHY = {"model": "the flow-level model\n(--backend emulation: Mininet, OVS and real TCP)",
       "emulation": "the emulation\n(Mininet, OVS and real TCP; each server's NVLink a bridge)"}


def how_it_survives(fabric, element: str) -> str:
    """What the GPUs plugged into the failed switch ``element`` are left with, in words."""
    from controller.failures import Failures, reachable_share
    gpus = [h.name for h in fabric.hosts
            if any(sw == element for sw, _ in fabric.attachments(h.name))]
    others = all(any(sw != element for sw, _ in fabric.attachments(g)) for g in gpus)
    share = reachable_share(fabric, Failures.parse(fabric, [element]))
    if others:
        how = "keep their other NIC port"
    elif fabric.nvlinks and share == 1:
        how = "use a sibling's NIC over NVLink"
    else:
        how = "are cut off"
    reach = "every GPU reachable" if share == 1 else f"{share:.0%} of GPUs reachable"
    return f"its {len(gpus)} GPUs {how}, {reach}"


SHORT = {"slower with the fault": "slower", "faster with the fault": "faster"}


def _line(row: dict, name: str) -> str:
    """``x1.88 [1.80-1.95] slower``: the paired ratio with the fault over without, its 95%
    interval and verdict."""
    fig = row[f"{name}_ratio"]
    if fig is None:
        return "no pair"
    ci = f" [{row[f'{name}_lo']:.2f}-{row[f'{name}_hi']:.2f}]" \
        if row[f"{name}_lo"] is not None else ""
    return f"x{fig:.2f}{ci} {SHORT.get(row[f'{name}_verdict'], row[f'{name}_verdict'])}"


def summary_line(rows: list[dict]) -> str:
    """Every fabric's TTFT P99 ratio, the least hurt first, and the transfers lost."""
    known = sorted((r for r in rows if r["ttft_ratio"] is not None),
                   key=lambda r: r["ttft_ratio"])
    return ("TTFT P99 with the outage over without: "
            + ", ".join(f"{r['fabric']} x{r['ttft_ratio']:.3f}" for r in known)
            + f"; transfers lost: {sum(r['lost'] for r in rows)}.")


def run_tor_lesson(out_dir: str, verbose: bool = False, checks=None,
                   backend: str | None = None) -> int:
    """The ToR-failure demo into ``out_dir`` on ``backend`` (None: the scenario's); its exit
    status."""
    from testbed.analysis import outage
    from testbed.analysis.compare import load_runs
    from testbed.analysis.report import build_report
    from testbed.analysis.results import Checks
    from testbed.cli.lesson import Progress
    from testbed.experiment.pipeline import load_scenario, run_and_check, shipped
    from topologies import load_fabric
    sc = load_scenario(shipped(SCENARIO))
    backend = backend or sc.backend
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, SCENARIO)
    progress = Progress(os.path.join(out_dir, "demo.log"), verbose)
    t0 = time.monotonic()
    print(f"A top-of-rack failure on ZCube and ROFT, 16 GPUs each, every server with NVLink\n"
          f"(scenarios/{SCENARIO}.yaml), on {WHY.get(backend, backend)}.\n"
          f"On each fabric the switch whose GPUs move the most bytes fails 1 s into the\n"
          f"traffic for 2 s; each fabric also runs without the fault, on the same requests\n"
          f"({sc.repetitions} repetitions). Ratios: with the fault over without, 95% "
          f"intervals.\n")
    try:
        code, summaries = run_and_check(sc, out, backend, progress=progress)
    finally:
        progress.close()
    checks = checks if checks is not None else Checks()
    code = checks.judge(sc, out, backend, code, summaries)
    if not summaries:
        print(f"failed (see {progress.file.name})")
        return code
    runs = load_runs([out])
    rows = outage.record(runs, out)
    for r in rows:
        run = next(s for s in runs if s["run"] == r["fabric"])
        fab = load_fabric(os.path.join(run["_dir"], "fabric.json"))
        print(f"  {r['fabric']} (policy {run['policy']}): {r['elements']} down; "
              f"{how_it_survives(fab, r['elements'].split()[0])}")
        print(f"    {r['transfers']} transfers during the outage, {r['lost']} lost; "
              f"FCT P99 {_line(r, 'fct')}, TTFT P99 {_line(r, 'ttft')}")
    report = build_report(out)
    print(f"\n{summary_line(rows)}\nThis took {time.monotonic() - t0:.0f} s. The outage "
          f"table: {out}/outage.csv\nThe report: {report}\n"
          f"At 1,024 GPUs: zcube run tor-failure-1024 (a minute or two).")
    return code
