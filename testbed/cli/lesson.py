"""``zcube demo`` (what ``make demo`` runs): the teaching demo, a three-minute story told from
the verdicts the run reads: the two fabrics and their cost, the crossed case where ECMP can
collide on the Clos, the aligned counter-case, the spraying Clos, and where to look next.
It carries the full study's scenarios at their loads with fewer repetitions and requests
(``zcube demo --full`` carries them all); the runs' progress goes to ``DIR/demo.log``.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap
import time

from controller.routing import RouteTable
from controller.verify import verify
from topologies.cost import cost, cost_table

CROSSED, ALIGNED = "cross-rail", "demo"
REPETITIONS = 3     # per fabric and case: the fewest whose paired interval can name a winner
ALIGNED_COUNT = 12  # requests per aligned repetition (the full study's 24, at its rate)
MODEL_DRAWS = 200   # ECMP draws of the crossed case on the flow-level model, the control
COST_KEYS = ("switches", "switch_ports", "switch_port_gbps", "optics_both_ends", "diameter")
NAMES = {"zcube": "ZCube", "roft": "ROFT-ECMP", "roft-spray": "ROFT-spray"}
FIGURES = {"FCT p50 ms": "FCT p50", "FCT p99 ms": "FCT P99", "TTFT p99 ms": "TTFT P99"}
# what a verdict's mark means, in a sentence (the report and docs/verdicts.md say more)
MARKS = {
    "model as control": "the flow-level model on the same draws of ECMP's hash as a control, "
                        "saying how lucky these few draws were (docs/verdicts.md)",
    "light load": "transfers hardly meet, so an FCT winner is what each switch crossed costs "
                  "at these scaled-down rates, not the fabric",
    "datapath stalls": "most of the slowest 1% of transfers were in flight while the "
                       "emulator's one forwarding thread stalled, so that tail is partly the "
                       "emulator's (docs/fidelity.md)",
    "64 KB segments": "the emulator forwards sprayed sub-flows a whole 64 KB segment at a "
                      "time, which lengthens a spraying run's FCT",
}


class Progress:
    """The runs' progress lines: every one to ``DIR/demo.log``; on a terminal the latest
    overwrites one status line; with ``verbose`` each is printed as ``zcube run`` prints it."""

    def __init__(self, path: str, verbose: bool):
        self.file = open(path, "a", encoding="utf-8")
        self.verbose, self.tty = verbose, sys.stderr.isatty() and not verbose

    def __call__(self, msg: str) -> None:
        self.file.write(msg + "\n")
        self.file.flush()
        if self.verbose or msg.startswith("error"):
            self.clear()
            print(f"[zcube] {msg}", file=sys.stderr, flush=True)
        elif self.tty:
            width = max(20, os.get_terminal_size(sys.stderr.fileno()).columns - 4)
            print(f"\r\033[K  {msg.strip()[:width]}", end="", file=sys.stderr, flush=True)

    def clear(self) -> None:
        if self.tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.clear()
        self.file.close()


def _name(run: str) -> str:
    return NAMES.get(run, run)


def verdict_line(row: dict) -> str:
    """One paired figure as the story says it: ratio, interval, margin and verdict."""
    figure = FIGURES.get(row["metric"], row["metric"])
    if row["ratio"] is None or row["lo"] is None:
        return f"  {figure:<8} {_name(row['run'])} / ZCube: {row['verdict']}"
    said = f"{_name(row['winner'])} lower" if row["winner"] else row["verdict"]
    if row.get("note"):
        said += f" ({row['note']})"
    return (f"  {figure:<8} {_name(row['run'])} / {_name(row['reference'])} "
            f"{row['ratio']:.2f} (95% {row['lo']:.2f}-{row['hi']:.2f}, margin "
            f"{row['margin']:.1%}): {said}")


def verdict_lines(rows: list[dict]) -> list[str]:
    """A section's verdicts, then what each mark among them means, once."""
    marks = dict.fromkeys(m for r in rows for m in (r.get("note") or "").split("; ") if m)
    return [verdict_line(r) for r in rows] + [
        textwrap.fill(f"({m}: {MARKS[m]})", 88, initial_indent="  ", subsequent_indent="  ")
        for m in marks if m in MARKS]


def _rows(dirs: list[str], models: dict | None = None) -> list[dict]:
    from testbed.analysis.verdict_table import of_folders
    from testbed.errors import UsageError
    try:
        return of_folders(dirs, models)[0]
    except UsageError:                    # a scenario that wrote nothing
        return []


def _faithful(summaries: dict) -> str:
    from testbed.analysis.checks import faithful_of
    bad = [n for n, s in summaries.items() if not faithful_of(s)]
    return "every run faithful" if not bad else (
        "NOT faithful: " + ", ".join(bad) + " (no verdict from it; see its summary.json)")


def _carry(sc, out: str, backend: str, progress: Progress, what: str,
           checks) -> tuple[int, dict]:
    """Run ``sc`` into ``out`` with one line before and one after (a suite of ``checks``)."""
    from testbed.experiment.pipeline import run_and_check
    print(f"  {what} ...", flush=True)
    t0 = time.monotonic()
    code, summaries = run_and_check(sc, out, backend, progress=progress)
    progress.clear()
    code = checks.judge(sc, out, backend, code, summaries)
    verified = sum(s["transfers_verified"] for s in summaries.values())
    total = sum(s["transfers_total"] for s in summaries.values())
    print(f"  {time.monotonic() - t0:.0f} s: {verified:,}/{total:,} transfers verified, "
          f"{_faithful(summaries)}" if summaries else
          f"  failed after {time.monotonic() - t0:.0f} s (see {progress.file.name})", flush=True)
    return code, summaries


def _fabrics_part(sc, out_dir: str) -> bool:
    """Cost and route checks of the two fabrics; whether every check passed."""
    fabrics = {f.name: f.build() for f in sc.fabrics}
    costs = [cost(f) for f in fabrics.values()]
    with open(os.path.join(out_dir, "cost.json"), "w") as f:
        json.dump(costs, f, indent=1)
    print("1. The fabrics, 16 GPUs each with 400 Gb/s of NIC (docs/concepts.md draws them).\n"
          "   ZCube: each GPU's NIC has two ports, one into each of two switch groups, every\n"
          "   switch of one group cabled to every switch of the other, so a transfer from an A\n"
          "   port to a B port has exactly one path. ROFT: one port per GPU into its rail's\n"
          "   leaf; spines join the rails.")
    print(textwrap.indent(cost_table(costs, COST_KEYS, "ZCube/ROFT"), "   "))
    reports, ok = {}, True
    for spec in sc.fabrics:
        for tm in ("all-to-all", "pd"):
            rep = verify(RouteTable(fabrics[spec.name], spec.policy), traffic=tm,
                         line_rate=True)
            reports[f"{spec.name}/{spec.policy}/{tm}"] = rep.to_dict()
            if not rep.ok:
                ok = False
                print(rep.to_text(), file=sys.stderr)
    with open(os.path.join(out_dir, "routes.json"), "w") as f:
        json.dump(reports, f, indent=1)
    print("   Routes computed for both and checked (every pair reachable, no loop): "
          + ("ok" if ok else "FAILED"))
    return ok


def run_lesson(out_dir: str, backend: str = "emulation", verbose: bool = False,
               checks=None) -> int:
    """The teaching demo into ``out_dir``, each scenario run a suite of ``checks``
    (:class:`testbed.analysis.results.Checks`); its exit status."""
    from testbed.analysis.report import build_report
    from testbed.analysis.results import Checks
    from testbed.experiment.pipeline import EXIT_INTERRUPTED, load_scenario, shipped
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.monotonic()
    aligned, crossed = load_scenario(shipped(ALIGNED)), load_scenario(shipped(CROSSED))
    progress = Progress(os.path.join(out_dir, "demo.log"), verbose)
    print(f"ZCube against a rail-optimised Clos (ROFT) on the {backend} backend -> {out_dir}/\n")
    if not _fabrics_part(aligned, out_dir):
        return 1
    try:
        code = _story(aligned, crossed, out_dir, backend, progress,
                      checks if checks is not None else Checks())
    finally:
        progress.close()
    if code == EXIT_INTERRUPTED:
        return code
    reports = [build_report(os.path.join(out_dir, d)) for d in (CROSSED, ALIGNED)
               if os.path.isdir(os.path.join(out_dir, d))]
    print(f"\n5. Where to look next (this demo took {time.monotonic() - t0:.0f} s)\n"
          + "".join(f"   {r}\n" for r in reports)
          + f"   {out_dir}/demo.log: every run's progress and fidelity record\n"
          "   zcube demo --full: the whole study (more repetitions, spraying emulated, a\n"
          "     rate sweep), about ten minutes; zcube demo --web 8080 shows the links live\n"
          "   docs/tutorial.md: your own policy and scenario; docs/results.md: the findings")
    return code


def _story(aligned, crossed, out_dir: str, backend: str, progress: Progress,
           checks) -> int:
    from testbed.experiment.pipeline import EXIT_INTERRUPTED, run_and_check
    x_dir, a_dir = os.path.join(out_dir, CROSSED), os.path.join(out_dir, ALIGNED)
    m_dir = os.path.join(out_dir, f"{CROSSED}-model")
    w = crossed.workload
    print(f"\n2. Crossed layouts: rank i of a prefill instance sends to another rank of its\n"
          f"   decode instance, so on ROFT it must climb to a spine, where ECMP hashes each\n"
          f"   connection onto one of four and two can collide; ZCube has no hash to collide.\n"
          f"   {w.count} requests at {w.rate:g}/s, {w.input_tokens} tokens each, NIC "
          f"{crossed.link_mbps:g} Mb/s per GPU (KV\n   scaled alike), {REPETITIONS} "
          f"repetitions per fabric.")
    sc = crossed.with_flags({"repetitions": REPETITIONS, "fabrics": [
        f for f in crossed.fabrics if f.name in ("zcube", "roft")]},
        f"--repetitions {REPETITIONS} --fabrics zcube,roft")
    code, _ = _carry(sc, x_dir, backend, progress,
                     f"carrying it on ZCube and on ROFT with ECMP ({backend})", checks)
    if code == EXIT_INTERRUPTED:
        return code
    model = crossed.with_flags({"repetitions": MODEL_DRAWS}, f"--repetitions {MODEL_DRAWS}")
    print(f"  the same on the flow-level model over {MODEL_DRAWS} ECMP draws, spraying "
          f"included ...", flush=True)
    mcode, summaries = run_and_check(model, m_dir, "model", progress=progress)
    progress.clear()
    mcode = checks.judge(model, m_dir, "model", mcode, summaries)
    if mcode == EXIT_INTERRUPTED:
        return mcode
    controls = {x_dir: m_dir} if backend != "model" and os.path.isdir(m_dir) else None
    print("\n".join(verdict_lines(_rows([x_dir], controls))))

    a = aligned.workload
    print(f"\n3. Aligned layouts, the counter-case: rank i sends to rank i, so on ROFT it stays\n"
          f"   on one leaf while ZCube always crosses two switches. Light load: {ALIGNED_COUNT}\n"
          f"   requests at {a.rate:g}/s, {a.input_tokens} tokens, {REPETITIONS} repetitions.")
    sc = aligned.with_flags({"repetitions": REPETITIONS, "order": "fabric", "sweep": None,
                             "workload": a.model_copy(update={"count": ALIGNED_COUNT})},
                            f"--repetitions {REPETITIONS}, {ALIGNED_COUNT} requests, "
                            f"no sweep")
    acode, _ = _carry(sc, a_dir, backend, progress, f"carrying it on both ({backend})",
                      checks)
    if acode == EXIT_INTERRUPTED:
        return acode
    print("\n".join(verdict_lines(_rows([a_dir]))))

    print(f"\n4. The stronger Clos: ROFT spraying each transfer over four connections per port\n"
          f"   pairing, crossed layouts, on the model's {MODEL_DRAWS} draws "
          f"(--full emulates it):")
    print("\n".join(verdict_lines([r for r in _rows([m_dir]) if r["run"] == "roft-spray"])))
    return max(code, mcode, acode)
