"""``zcube run``'s engine: a scenario run on each of its fabrics in turn through a backend,
each (fabric, placement) a *run* written once to ``DIR/<run>/``; repetition ``k`` uses seed
``seed + k`` on every fabric, so all run the same requests.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time

from controller.pairings import mean_switches
from testbed.core import fidelity
from testbed.core.backend import Backend, RunError, SessionOptions
from testbed.core.live_state import current as live
from testbed.core.metrics import percentile
from testbed.core.records import LINK_FIELDS
from testbed.experiment.fault_schedule import resolve
from testbed.experiment.provenance import code_digest
from testbed.experiment.repetitions import plan, run_with_retries
from testbed.experiment.scenario import Scenario
from testbed.experiment.scenario.requests import requests_for, skips_line
from testbed.experiment.summaries import (
    REQUEST_FIELDS,
    pool,
    request_rows,
    summarize,
    write_csv,
    write_summary,
    write_transfers_csv,
)
from testbed.experiment.sweep import run_sweep
from topologies import save_fabric
from topologies.cost import cost
from topologies.text_summary import route_summary
from traffic.placement import deploy
from traffic.types import Scale
from traffic.workload import build_workload


def workload_for(sc: Scenario, fabric, placement: str, seed: int, requests):
    d = sc.deployment
    pd = deploy(fabric, d.prefill_tp, d.decode_tp, d.prefill_instances,
                d.decode_instances, placement=placement, seed=seed)
    factor = fabric.scale_for(sc.link_mbps)
    work = build_workload(requests, pd, sc.model, scale=Scale(link=factor, size=factor),
                          chunks=d.chunks, mla_senders=d.mla_senders)
    work.seed = seed
    return work


# --- backends ------------------------------------------------------------------------------
def backend_for(name) -> Backend:
    """The backend called ``name`` (emulation, model or ns3); a Backend object as it is."""
    if not isinstance(name, str):
        return name
    if name == "model":
        from testbed.model.backend import ModelBackend
        return ModelBackend()
    if name == "emulation":
        from testbed.emulation.backend import EmulationBackend
        return EmulationBackend()
    if name == "ns3":
        from testbed.ns3.backend import Ns3Backend
        return Ns3Backend()
    raise RunError(f"unknown backend {name!r}")


# --- the run -------------------------------------------------------------------------------
def versions(backend: str | None = None, tcp_cc: str | None = None) -> dict:
    """Machine and software the results came from (for the report); ``tcp_cc``: the
    congestion control the emulation's settings ask for."""
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(),
           "os": platform.platform(), "cpus": os.cpu_count(),
           "python": platform.python_version(), "code": code_digest()}
    for mod in ("mininet", "ryu", "os_ken", "networkx", "numpy", "matplotlib"):
        try:
            m = __import__(mod + (".net" if mod == "mininet" else ""))
            out[mod] = getattr(m, "__version__", None) or getattr(
                sys.modules.get(mod + ".net"), "VERSION", None)
        except Exception:  # noqa: BLE001 - optional
            out[mod] = None
    if backend == "ns3":
        from importlib.metadata import PackageNotFoundError, version
        try:
            out["ns3"] = version("ns3")
        except PackageNotFoundError:
            out["ns3"] = None
    if backend == "emulation":              # what the KV connections' TCP runs
        from traffic.kvwire import congestion_in_use
        out["tcp_congestion_control"] = congestion_in_use(tcp_cc)
    if shutil.which("ovs-vswitchd"):
        try:
            first = subprocess.run(["ovs-vswitchd", "--version"], capture_output=True,
                                   text=True, errors="replace", timeout=5).stdout.splitlines()
            out["openvswitch"] = first[0].split()[-1] if first else None
        except (OSError, subprocess.TimeoutExpired):
            out["openvswitch"] = None
    return out


def _progress(total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:          # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr,
                disable=not sys.stderr.isatty(), leave=False)


def run_scenario(sc: Scenario, out_dir: str, backend: str | None = None, force: bool = False,
                 log=None, htsim_dir: str | None = None, model_options: dict | None = None) -> dict:
    """Run ``sc`` on every fabric; returns ``{run name: summary}`` and writes ``out_dir``.
    ``model_options`` maps a fabric's name to extra options of the model backend."""
    log = log or (lambda msg: print(f"[zcube] {msg}", file=sys.stderr, flush=True))
    be = backend_for(backend or sc.backend)
    backend = be.name
    os.makedirs(out_dir, exist_ok=True)
    os.chmod(out_dir, 0o755)
    seeds = [sc.seed + k for k in range(sc.repetitions)]
    reqs = {seed: requests_for(sc, seed) for seed in seeds}
    if skips_line(reqs[seeds[0]][1]):
        log(skips_line(reqs[seeds[0]][1]))
    if sc.link_mbps == "auto":
        from testbed.experiment.autorate import resolve as resolve_rate
        sc = resolve_rate(sc, be, reqs, workload_for, log)
    runs = sc.run_names()
    bar = _progress(sum(f.reps_of(len(seeds)) for f, _, _ in runs), f"{sc.name} ({backend})")
    meta = {"scenario": sc.name, "backend": backend,
            "versions": versions(backend, sc.emulation.tcp_cc),
            "runs": [r[2] for r in runs], "seeds": seeds, "link_mbps": sc.link_mbps,
            "link_mbps_auto": sc.auto_choice, "started": time.time()}
    if backend == "emulation":                   # the settings it ran under, defaults too
        meta["emulation"] = sc.emulation.model_dump()
    fabrics = [_Fabric(sc, spec, backend, seeds, reqs, log, model_options)
               for spec in sc.fabrics]
    written: dict[str, dict] = {}
    order = sc.order if backend == "emulation" else "fabric"   # the machine's pace: emulation
    for part in plan(len(fabrics), len(seeds), order,
                     [f.spec.reps_of(len(seeds)) for f in fabrics]):
        f = fabrics[part.fabric]
        _run_part(sc, be, f, part, seeds, force, bar)
        if part.last:
            written[f.spec.name] = _finish(sc, f, be.name, reqs, seeds, htsim_dir, out_dir)
    summaries: dict[str, dict] = {}
    for spec in sc.fabrics:                              # in the scenario's order
        summaries.update(written[spec.name])
    if bar is not None:
        bar.close()
    meta["finished"] = time.time()
    with open(os.path.join(out_dir, "run.json"), "w") as f:
        json.dump(meta, f, indent=1)
    os.chmod(os.path.join(out_dir, "run.json"), 0o644)
    return summaries


def _background(sc):
    bg = getattr(sc, "background", None)
    if bg is None:
        return None
    return {"pattern": bg.pattern, "mbps": bg.mbps} if hasattr(bg, "pattern") else dict(bg)


class _Fabric:
    """One fabric's runs, gathered over the sessions :func:`repetitions.plan` opens for it."""

    def __init__(self, sc, spec, backend: str, seeds, reqs, log, model_options):
        self.spec, self.fabric = spec, spec.build()
        self.slower = slower = spec.slower_on(backend)
        self.options = SessionOptions(
            link_mbps=sc.link_mbps / slower, window_s=SessionOptions.window_s * slower,
            verify_sample=sc.verify_sample, background=_background(sc), transport=sc.transport,
            buffer_ms=sc.buffer_ms, large_segments=sc.large_segments,
            calibration_s=sc.calibration_s, extra=(model_options or {}).get(spec.name, {}),
            emulation=sc.emulation, log=log)
        self.mine = [(p, name) for f, p, name in sc.run_names() if f is spec]
        self.works = {(p, seed): workload_for(sc, self.fabric, p, seed, reqs[seed][0])
                      for p, _ in self.mine for seed in seeds}
        self.results = {name: [] for _, name in self.mine}
        self.aside = {name: [] for _, name in self.mine}
        self.stops: list = []            # repetitions no longer run again (run_with_retries)
        self.sweep, self.info, self.table, self.sessions = None, None, None, 0


def _run_part(sc, be, f: _Fabric, part, seeds, force, bar) -> None:
    """One session of ``f`` (a :class:`repetitions.Part`): its share of every placement's
    repetitions, and the sweep where the part puts it."""
    log, slower = f.options.log, f.slower
    log(f"{f.fabric.label} ({f.spec.name}, policy {f.spec.policy or 'default'}): "
        f"{len(f.mine)} placement(s) x {part.stop - part.start} repetition(s)"
        + (f" ({part.start + 1}-{part.stop} of {len(seeds)})"
           if part.stop - part.start < len(seeds) else "") + f" on the {be.name} backend"
        + (f", {slower:g}x slower again (links at {f.options.link_mbps:g} Mb/s, time "
           f"dilation {sc.time_dilation * slower:g})" if slower != 1 else ""))
    live.reset(f.fabric, run=f.spec.name)
    with be.session(f.fabric, f.spec.route_policy(f.fabric), f.options) as sess:
        sess.calibrate()
        sess.admit(list(f.works.values()), force)
        stopped: dict = {}               # causes this session no longer runs again
        def repetitions(lo: int, hi: int) -> None:
            for placement, name in f.mine:
                for k in range(lo, hi):
                    work = f.works[(placement, seeds[k])]
                    faults = resolve(f.fabric, sc.faults, seeds[k], work) \
                        if sc.faults and f.spec.faults else None
                    got, busy = run_with_retries(
                        sess, work, faults, sc.time_dilation, sc.host_retries,
                        lambda why: log(f"  {name}: repetition {k} {why}"), slower, stopped,
                        {"run": name, "rep": k, "seed": seeds[k]})
                    f.results[name].append((seeds[k], work, got))
                    f.aside[name] += [dict(b, rep=k, seed=seeds[k]) for b in busy]
                    if bar is not None:
                        bar.update(1)

        at = part.stop if part.sweep_at is None else part.sweep_at
        repetitions(part.start, at)
        if part.sweep_at is not None and sc.sweep:
            first = next(((work, got) for seed, work, got in f.results[f.mine[0][1]]
                          if seed == sc.seed), None)
            placement = f.mine[0][0]
            f.sweep = dict(run_sweep(sc, sess, lambda seed, reqs: workload_for(
                sc, f.fabric, placement, seed, reqs), log, slower, first), placement=placement)
        repetitions(at, part.stop)
        f.info = f.info if f.info is not None else dict(sess.info)   # the first session's
        f.table, f.sessions = sess.table, f.sessions + 1
        f.stops += [e for es in stopped.values() for e in es]
    for _, name in f.mine:
        _log_run(log, name, f.results[name][part.start:])


def _finish(sc, f: _Fabric, backend: str, reqs, seeds, htsim_dir, out_dir) -> dict:
    """Each run folder of ``f``, written once, after its last session."""
    live.update(runs_done=live.get("runs_done") + [f.spec.name])
    if htsim_dir:
        _export_htsim(htsim_dir, f.fabric, f.mine, f.works, seeds[0])
    info = dict(f.info, order=sc.order, sessions=f.sessions) if f.sessions > 1 else f.info
    written = {}
    for placement, name in f.mine:
        written[name] = _write_run(sc, os.path.join(out_dir, name), name, f.spec, f.fabric,
                                   f.table, placement, backend, f.results[name],
                                   reqs[seeds[0]][1], info, f.sweep, f.aside[name],
                                   [e for e in f.stops if e["run"] == name])
        if written[name].get("fidelity") is not None:
            f.options.log(f"  {name}: {fidelity.one_line(written[name]['fidelity'])}")
    return written


def _log_run(log, name, results) -> None:
    done = sum(sum(1 for r in c.rows if r["verified"]) for _, _, c in results)
    total = sum(len(c.rows) for _, _, c in results)
    fcts = [r["fct_ms"] for _, _, c in results for r in c.rows if r["verified"]]
    med = round(percentile(fcts, 50), 3) if fcts else None
    log(f"  {name}: {done}/{total} transfers verified, FCT p50 {med} ms")


def _export_htsim(htsim_dir, fabric, mine, works, seed) -> None:
    """``htsim_dir``: a folder (start times in ps) or a :class:`traffic.htsim.Target`."""
    from traffic.htsim import Target, write_htsim
    target = htsim_dir if isinstance(htsim_dir, Target) else Target(htsim_dir)
    os.makedirs(target.folder, exist_ok=True)
    for placement, name in mine:
        write_htsim(works[(placement, seed)], fabric,
                    os.path.join(target.folder, f"{name}.cm"), target.unit)


def _records(table, results, link_mbps, skipped):
    """The run's rows over all repetitions (with rep, seed, hops), and each repetition's
    own summary."""
    all_rows, all_links, all_requests, per_rep, fault_rows = [], [], [], [], []
    hops_cache: dict = {}
    for k, (seed, work, result) in enumerate(results):
        fault_rows += [dict(f, rep=k) for f in result.faults or []]
        mine = []
        for r in result.rows:
            key = (r["src"], r["dst"])
            if key not in hops_cache:
                hops_cache[key] = mean_switches(table, *key)
            mine.append(dict(r, rep=k, seed=seed, hops=hops_cache[key]))
        all_rows += mine
        all_links += [dict(link, rep=k) for link in result.links]
        all_requests += [dict(q, rep=k) for q in request_rows(work, mine)]
        doc = summarize(work, mine, link_mbps, skipped)
        doc["link_util"] = result.link_util
        doc["fidelity"] = fidelity.record(mine, [result.fidelity])
        doc["seed"] = seed
        per_rep.append((doc, work, mine))
    return all_rows, all_links, all_requests, per_rep, fault_rows


def _write_run(sc, run_dir, name, spec, fabric, table, placement, backend, results,
               skipped, info, sweep, aside=(), stops=()) -> dict:
    os.makedirs(run_dir, exist_ok=True)
    os.chmod(run_dir, 0o755)
    with open(os.path.join(run_dir, "scenario.yaml"), "w") as f:
        f.write(sc.text)
    save_fabric(fabric, os.path.join(run_dir, "fabric.json"))
    with open(os.path.join(run_dir, "routes.txt"), "w") as f:
        f.write(route_summary(table) + "\n")
    rows, links, requests, per_rep, fault_rows = _records(table, results, sc.link_mbps,
                                                           skipped)
    summary = pool(per_rep, sc.link_mbps)
    slower = spec.slower_on(backend)
    summary["scale"] = dict(summary["scale"], time_dilation=sc.time_dilation * slower,
                            extra_dilation=slower, emulated_mbps=sc.link_mbps / slower)
    if sc.auto_choice:
        summary["scale"]["link_mbps_auto"] = sc.auto_choice
    summary["fidelity"] = fidelity.record(rows, [c.fidelity for _, _, c in results])
    if summary["fidelity"] is not None:
        summary["fidelity"]["set_aside"] = list(aside)
        if stops:                        # held back, kept as run: the cause came back
            summary["fidelity"]["not_run_again"] = [
                {k: e[k] for k in ("rep", "seed", "cause", "how")} for e in stops]
    for k, ((doc, _, _), (_, _, result)) in enumerate(zip(per_rep, results)):
        summary["per_rep"][k]["fidelity"] = doc["fidelity"]
        if result.clock is not None:          # rows' time 0, to line them up with a trace
            summary["per_rep"][k]["t0_unix"] = result.clock
    summary.update(run=name, scenario=sc.name, fabric=fabric.label, fabric_name=spec.name,
                   builder=spec.builder, params=spec.params, policy=table.policy_name,
                   placement=placement, model=results[0][1].model.name, backend=backend,
                   link_mbps=sc.link_mbps, buffer_ms=sc.buffer_ms,
                   large_segments=sc.large_segments, nic_gbps=fabric.nic_gbps,
                   repetitions=len(results), cost=cost(fabric), **info)
    if sweep:
        summary["sweep"] = {k: v for k, v in sweep.items() if k != "slo_throughput_per_s"}
        summary["slo_throughput_per_s"] = sweep["slo_throughput_per_s"]
    # restarts from the first byte over another pairing (a run without faults: false moves)
    summary["transfers_started_again"] = sum(1 for r in rows if (r.get("attempts") or 1) > 1)
    if fault_rows:
        summary["faults"] = fault_rows
        summary["transfers_lost"] = sum((f.get("transfers_lost") or 0)
                                        + ((f.get("started_during") or {}).get("lost") or 0)
                                        for f in fault_rows)
        summary["faults_not_run"] = sum(1 for f in fault_rows if f.get("error"))
    write_transfers_csv(rows, os.path.join(run_dir, "transfers.csv"))
    write_csv(links, ("rep",) + LINK_FIELDS, os.path.join(run_dir, "links.csv"))
    write_csv(requests, REQUEST_FIELDS, os.path.join(run_dir, "requests.csv"))
    for f in ("scenario.yaml", "fabric.json", "routes.txt"):
        os.chmod(os.path.join(run_dir, f), 0o644)
    write_summary(summary, os.path.join(run_dir, "summary.json"))
    return summary
