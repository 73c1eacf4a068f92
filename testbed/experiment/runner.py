"""``zcube run``: carry a scenario on each of its fabrics in turn and write the results.

Data flows one way: scenario -> fabric -> routes -> workload -> backend -> records ->
metrics -> report.  Each (fabric, placement) is one *run*, written to ``DIR/<run>/``:

  scenario.yaml   the scenario as given
  fabric.json     the fabric (networkx node-link JSON)
  routes.txt      the route table summary
  transfers.csv   one row per transfer and repetition (``rep`` column)
  links.csv       utilisation per directed link over time, per repetition
  requests.csv    one row per request and repetition: queueing, prefill, TTFT
  summary.json    the metrics pooled over repetitions, and each repetition's own

Repetition ``k`` uses seed ``seed + k`` on every fabric, so all fabrics carry the same
requests.  A backend is a context manager per fabric whose ``carry(workload)`` returns
``(rows, link_rows, link_summary)``.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time

from controller.routing import RouteTable
from topologies import save_fabric
from topologies.cost import cost
from topologies.export import route_summary
from traffic import arrivals
from traffic.placement import deploy
from traffic.types import Scale
from traffic.workload import build_workload

from testbed.experiment.records import (REP_FIELDS, REQUEST_FIELDS, pool, request_rows, summarize, write_csv,
                      write_summary, write_transfers_csv)
from testbed.emulation.faults import resolve
from testbed.experiment.scenario import Scenario


class RunError(RuntimeError):
    """A run that could not be carried out (the message says why)."""


def requests_for(sc: Scenario, seed: int, rate: float | None = None,
                 count: int | None = None):
    """The scenario's requests for one seed: (requests, skipped trace lines)."""
    w = sc.workload
    if rate is not None:
        return arrivals.poisson(rate, count=count, seed=seed, input_tokens=w["input_tokens"],
                                output_tokens=w["output_tokens"]), []
    if w["arrivals"] == "trace":
        path = arrivals.MOONCAKE_TRACE if w["trace"] == "mooncake" else w["trace"]
        replay = arrivals.read_trace(path, time_scale=w["time_scale"], start_s=w["start_s"],
                                     duration_s=w["duration_s"], limit=w["count"],
                                     prefix_cache=w["prefix_cache"])
        return replay.requests, replay.skipped
    common = dict(count=w["count"], duration_s=w["duration_s"] if w["count"] is None else None,
                  seed=seed, input_tokens=w["input_tokens"], output_tokens=w["output_tokens"])
    if w["arrivals"] == "poisson":
        return arrivals.poisson(w["rate"], **common), []
    return arrivals.bursty(w["rate"], w["on_s"], w["off_s"], **common), []


def workload_for(sc: Scenario, fabric, placement: str, seed: int, requests):
    d = sc.deployment
    pd = deploy(fabric, d["prefill_tp"], d["decode_tp"], d["prefill_instances"],
                d["decode_instances"], placement=placement, seed=seed)
    factor = fabric.scale_for(sc.link_mbps)
    return build_workload(requests, pd, sc.model, scale=Scale(link=factor, size=factor),
                          chunks=d["chunks"], mla_senders=d["mla_senders"])


def hops_of(table, src: str, dst: str) -> float:
    """Switches crossed, averaged over the paths a transfer is split across."""
    paths = table.paths(src, dst)
    return sum(len(p) - 2 for p in paths) / len(paths)


# --- backends ------------------------------------------------------------------------------
class ModelBackend:
    name = "model"

    def __init__(self, log, options: dict | None = None):
        self.log = log
        self.options = options or {}          # fabric name -> extra simulate() arguments

    def session(self, fabric, policy, sc, name=None):
        return _ModelSession(fabric, policy, sc.link_mbps, self.options.get(name, {}))


class _ModelSession:
    def __init__(self, fabric, policy, link_mbps, options):
        self.table = RouteTable(fabric, policy)
        self.link_mbps = link_mbps
        self.options = options
        self.info = {"model_options": options} if options else {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def admit(self, workloads, force: bool) -> None:
        pass

    LINK_ROWS_MAX = 2_000_000        # beyond this links.csv would be gigabytes: leave it out

    def carry(self, work, faults=None):
        from testbed.model.simulate import simulate
        if faults:
            self.info["faults_note"] = "the model backend does not carry faults: ignored"
        self.faults = None
        res = simulate(self.table, work, self.link_mbps, **self.options)
        rows = res.intervals * len(res.capacity)
        if rows > self.LINK_ROWS_MAX:
            self.info["links_note"] = (f"links.csv left out: {rows:,} rows "
                                       f"({res.intervals:,} intervals x {len(res.capacity):,} links)")
            return res.rows, [], res.link_summary()
        return res.rows, list(res.iter_links()), res.link_summary()


class EmulationBackend:
    name = "emulation"

    def __init__(self, log):
        self.log = log

    def session(self, fabric, policy, sc, name=None):
        return _EmulationSession(fabric, policy, sc, self.log)


class _EmulationSession:
    def __init__(self, fabric, policy, sc, log):
        from testbed.emulation.emulation import Emulation
        self.emu = Emulation(fabric, policy=policy, link_mbps=sc.link_mbps, log=log)
        self.table = self.emu.table
        self.sample = sc.verify_sample or None
        self.log = log
        self.info = {}

    def __enter__(self):
        from testbed.emulation.emulation import EmulationError
        try:
            self.emu.__enter__()
        except EmulationError as err:
            raise RunError(str(err)) from None
        rep = self.emu.verify(sample=self.sample)
        self.info["verify"] = {k: rep[k] for k in (
            "switches", "switches_connected", "flows_expected", "flows_installed",
            "pairs_tested", "pairs_ok", "paths_traced", "paths_ok", "bringup_s", "verify_s",
            "ok")}
        if not rep["ok"]:
            self.emu.__exit__(None, None, None)
            raise RunError(f"{self.emu.fabric.label} does not forward as computed: "
                           + "; ".join(map(str, rep["problems"][:3])))
        return self

    def __exit__(self, *exc):
        self.emu.__exit__(*exc)
        return False

    def admit(self, workloads, force: bool) -> None:
        """Calibrate with iperf3 and refuse a load this machine's emulator cannot carry."""
        from testbed.emulation.calibrate import calibrate, guard, offered_mbps
        cal = calibrate(self.emu)
        self.info["calibration"] = cal
        offered = max(offered_mbps(w) for w in workloads)
        self.info["offered_mbps"] = round(offered, 3)
        refusal = guard(cal, offered)
        if refusal and not force:
            raise RunError(f"refused on {self.emu.fabric.label}: {refusal}")
        if refusal:
            self.log(f"warning (--force): {refusal}")

    def carry(self, work, faults=None):
        from testbed.emulation.faults import FaultRun, affected
        from testbed.emulation.linkstats import LinkSampler
        from testbed.emulation.transfers import run_transfers
        t0 = time.time() + 1.0
        with LinkSampler(self.emu) as sampler:
            with FaultRun(self.emu, faults or [], t0, self.log) as injected:
                rows = run_transfers(self.emu, work, t0=t0)
        if sampler.error:
            self.log(f"warning: link sampler stopped: {sampler.error}")
        self.faults = affected(self.table, injected.records, rows) if faults else None
        self.fault_log = injected.records
        return rows, sampler.rows, sampler.summary()


BACKENDS = {"emulation": EmulationBackend, "model": ModelBackend}


# --- the run -------------------------------------------------------------------------------
def versions() -> dict:
    """Machine and software the results came from (for the report)."""
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(),
           "os": platform.platform(), "cpus": os.cpu_count(),
           "python": platform.python_version()}
    for mod in ("mininet", "ryu", "os_ken", "networkx", "numpy", "matplotlib"):
        try:
            m = __import__(mod + (".net" if mod == "mininet" else ""))
            out[mod] = getattr(m, "__version__", None) or getattr(
                sys.modules.get(mod + ".net"), "VERSION", None)
        except Exception:  # noqa: BLE001 - optional
            out[mod] = None
    if shutil.which("ovs-vswitchd"):
        try:
            first = subprocess.run(["ovs-vswitchd", "--version"], capture_output=True,
                                   text=True, timeout=5).stdout.splitlines()
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
    """Carry ``sc`` on every fabric; returns ``{run name: summary}`` and writes ``out_dir``."""
    log = log or (lambda msg: print(f"[zcube] {msg}", file=sys.stderr, flush=True))
    backend = backend or sc.backend
    be = (ModelBackend(log, model_options) if backend == "model" else BACKENDS[backend](log))
    os.makedirs(out_dir, exist_ok=True)
    os.chmod(out_dir, 0o755)
    seeds = [sc.seed + k for k in range(sc.repetitions)]
    reqs = {seed: requests_for(sc, seed) for seed in seeds}
    summaries: dict[str, dict] = {}
    runs = sc.run_names()
    bar = _progress(len(runs) * len(seeds), f"{sc.name} ({backend})")
    meta = {"scenario": sc.name, "backend": backend, "versions": versions(),
            "runs": [r[2] for r in runs], "seeds": seeds, "started": time.time()}
    for spec in sc.fabrics:
        fabric = spec.build()
        mine = [(p, name) for f, p, name in runs if f is spec]
        works = {(p, seed): workload_for(sc, fabric, p, seed, reqs[seed][0])
                 for p, _ in mine for seed in seeds}
        log(f"{fabric.label} ({spec.name}, policy {spec.policy or 'default'}): "
            f"{len(mine)} placement(s) x {len(seeds)} repetition(s) on the {backend} backend")
        with be.session(fabric, spec.policy, sc, spec.name) as sess:
            sess.admit(list(works.values()), force)
            for placement, name in mine:
                results = []
                for seed in seeds:
                    work = works[(placement, seed)]
                    faults = resolve(fabric, sc.faults, seed) if sc.faults else None
                    rows, links, util = sess.carry(work, faults)
                    results.append((seed, work, rows, links, util, sess.faults))
                    if bar is not None:
                        bar.update(1)
                doc = _write_run(sc, os.path.join(out_dir, name), name, spec, fabric,
                                 sess.table, placement, backend, results,
                                 len(reqs[seeds[0]][1]), sess.info)
                summaries[name] = doc
                fct = doc["fct_ms"] or {}
                log(f"  {name}: {doc['transfers_verified']}/{doc['transfers_total']} transfers "
                    f"verified, FCT p50 {fct.get('p50')} ms p99 {fct.get('p99')} ms")
            if sc.sweep:
                _sweep(sc, sess, fabric, spec, out_dir, summaries, mine)
        if htsim_dir:
            _export_htsim(htsim_dir, spec, fabric, mine, works, seeds[0])
    if bar is not None:
        bar.close()
    meta["finished"] = time.time()
    with open(os.path.join(out_dir, "run.json"), "w") as f:
        json.dump(meta, f, indent=1)
    os.chmod(os.path.join(out_dir, "run.json"), 0o644)
    return summaries


def _sweep(sc, sess, fabric, spec, out_dir, summaries, mine) -> None:
    """P99 TTFT at each sweep rate (first placement, first seed) and the SLO throughput."""
    from traffic.workload import slo_throughput
    placement, name = mine[0]
    points = []
    for rate in sc.sweep["rates"]:
        reqs, _ = requests_for(sc, sc.seed, rate=rate, count=sc.sweep["count"])
        work = workload_for(sc, fabric, placement, sc.seed, reqs)
        rows, _, _ = sess.carry(work)
        doc = summarize(work, rows, sc.link_mbps)
        p99 = (doc["ttft_ms"] or {}).get("p99")
        points.append({"rate_per_s": rate, "ttft_p99_ms": p99,
                       "verified": doc["transfers_verified"], "total": doc["transfers_total"]})
    best = slo_throughput([p["rate_per_s"] for p in points],
                          [p["ttft_p99_ms"] if p["ttft_p99_ms"] is not None else float("inf")
                           for p in points], sc.sweep["slo_ttft_ms"])
    for _, run in mine:
        doc = summaries[run]
        doc["sweep"] = {"placement": placement, "slo_ttft_ms": sc.sweep["slo_ttft_ms"],
                        "points": points}
        doc["slo_throughput_per_s"] = best
        write_summary(doc, os.path.join(out_dir, run, "summary.json"))


def _export_htsim(htsim_dir, spec, fabric, mine, works, seed) -> None:
    from traffic.htsim import write_htsim
    os.makedirs(htsim_dir, exist_ok=True)
    for placement, name in mine:
        write_htsim(works[(placement, seed)], fabric,
                    os.path.join(htsim_dir, f"{name}.cm"))


def _write_run(sc, run_dir, name, spec, fabric, table, placement, backend, results,
               skipped, info) -> dict:
    os.makedirs(run_dir, exist_ok=True)
    os.chmod(run_dir, 0o755)
    with open(os.path.join(run_dir, "scenario.yaml"), "w") as f:
        f.write(sc.text)
    save_fabric(fabric, os.path.join(run_dir, "fabric.json"))
    with open(os.path.join(run_dir, "routes.txt"), "w") as f:
        f.write(route_summary(table) + "\n")
    all_rows, all_links, all_requests, per_rep = [], [], [], []
    hops_cache: dict = {}
    fault_rows = []
    for k, (seed, work, rows, links, util, faults) in enumerate(results):
        fault_rows += [dict(f, rep=k) for f in faults or []]
        for r in rows:
            key = (r["src"], r["dst"])
            if key not in hops_cache:
                hops_cache[key] = hops_of(table, *key)
            all_rows.append(dict(r, rep=k, seed=seed, hops=hops_cache[key]))
        all_links += [dict(l, rep=k) for l in links]
        all_requests += [dict(q, rep=k) for q in request_rows(work, rows)]
        doc = summarize(work, rows, sc.link_mbps, skipped)
        doc["link_util"] = util
        doc["seed"] = seed
        per_rep.append((doc, work, rows))
    summary = pool(per_rep, sc.link_mbps)
    summary.update(run=name, scenario=sc.name, fabric=fabric.label, fabric_name=spec.name,
                   builder=spec.builder, params=spec.params, policy=table.policy_name,
                   placement=placement, model=results[0][1].model.name, backend=backend,
                   link_mbps=sc.link_mbps, nic_gbps=fabric.nic_gbps,
                   repetitions=len(results), cost=cost(fabric), **info)
    if fault_rows:
        summary["faults"] = fault_rows
        summary["transfers_lost"] = sum(f["transfers_lost"] for f in fault_rows)
    write_transfers_csv(all_rows, os.path.join(run_dir, "transfers.csv"), extra=REP_FIELDS)
    _write_links(all_links, os.path.join(run_dir, "links.csv"))
    write_csv(all_requests, REQUEST_FIELDS, os.path.join(run_dir, "requests.csv"))
    for f in ("scenario.yaml", "fabric.json", "routes.txt"):
        os.chmod(os.path.join(run_dir, f), 0o644)
    write_summary(summary, os.path.join(run_dir, "summary.json"))
    return summary


def _write_links(rows, path) -> None:
    import csv

    from testbed.emulation.linkstats import FIELDS
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=("rep",) + FIELDS)
        w.writeheader()
        w.writerows(rows)
    os.chmod(path, 0o644)
