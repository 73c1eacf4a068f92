"""Checks across a scenario's keys once each has its type: values in range, and per fabric
that it builds, routes, fits every placement and fault, and that its runs fit in a day and in
memory.  A failure is the ScenarioError of its key."""
from __future__ import annotations

import math
import os

from testbed.experiment.scenario import limits as L
from testbed.experiment.scenario.limits import LINK_MBPS, TIME_DILATION
from testbed.experiment.scenario.requests import requests_for, trace_path
from testbed.experiment.scenario.yaml_lines import Lines

RANDOM_KINDS = ("fabric-link", "nic", "switch")
POLICY_CHECK_HOSTS = 64          # larger fabrics take too long to route just to check
HOPS = 4                  # bins per transfer and interval: a path's hops (most have 2-4)
BIN_BYTES = 64            # one link bin: a dict entry holding a float
SAMPLE_S = 0.5            # the link records' interval


def check(sc, lines: Lines) -> None:
    """Raise the ScenarioError of the first problem across keys of ``sc``."""
    _positive(sc, lines)
    _arrivals(sc, lines)
    _fabrics(sc, lines)
    if sc.sweep is not None and min(sc.sweep.rates) <= 0:
        lines.fail(("sweep", "rates"), "rates must be greater than 0")


def _positive(sc, lines: Lines) -> None:
    for key in ("prefill_tp", "decode_tp", "chunks", "mla_senders"):
        value = getattr(sc.deployment, key)
        if value < 1:
            lines.fail(("deployment", key), f"must be at least 1, got {value}")
    if sc.repetitions < 1:
        lines.fail(("repetitions",), f"must be at least 1, got {sc.repetitions}")
    for key in ("rate", "time_scale"):
        value = getattr(sc.workload, key)
        if value <= 0:
            lines.fail(("workload", key), f"must be greater than 0, got {value:g}")
    low, high = LINK_MBPS
    if sc.link_mbps != "auto" and not low <= sc.link_mbps <= high:
        lines.fail(("link_mbps",), f"must be from {low:g} to {high:,.0f} (Mb/s), or auto, "
                                   f"got {sc.link_mbps:g}")
    low, high = TIME_DILATION
    if not low <= sc.time_dilation <= high:
        lines.fail(("time_dilation",), f"must be from {low:g} to {high:g}, got "
                                       f"{sc.time_dilation:g}")


def _arrivals(sc, lines: Lines) -> None:
    w = sc.workload
    if w.arrivals != "trace" and w.count is None and w.duration_s is None:
        lines.fail(("workload",), "give count or duration_s")
    if w.arrivals == "trace" and w.trace != "mooncake" and not os.path.isfile(w.trace):
        lines.fail(("workload", "trace"), f"{w.trace} is a folder, not a trace file"
                   if os.path.isdir(w.trace) else f"no such file: {w.trace}")


def _fabrics(sc, lines: Lines) -> None:
    n = _request_count(sc, lines)
    names: dict = {}
    nvlink: dict = {}
    for i, spec in enumerate(sc.fabrics):
        if spec.name in names:
            lines.fail(("fabrics", i, "name"), f"{spec.name!r} is already the name of "
                                               f"fabrics[{names[spec.name]}]")
        names[spec.name] = i
        _extra(i, spec, sc, lines)
        fab = _build(i, spec, lines)
        _same_servers(i, fab, nvlink, lines)
        _policy(i, spec, fab, lines)
        pds = _placements(i, spec, fab, sc, lines)
        _sizes(i, spec, fab, sc, pds, n, lines)
        _faults(i, spec, fab, sc, lines)
        _background(i, spec, fab, sc, lines)


def _extra(i: int, spec, sc, lines: Lines) -> None:
    """extra_dilation: at least 1, and the fabric's whole dilation and its links' rate in
    their ranges; the fabric's repetitions from 1 to the scenario's."""
    if spec.repetitions is not None and not 1 <= spec.repetitions <= sc.repetitions:
        lines.fail(("fabrics", i, "repetitions"), f"must be from 1 to the scenario's "
                   f"repetitions ({sc.repetitions}), got {spec.repetitions}")
    x = spec.extra_dilation
    if x < 1:
        lines.fail(("fabrics", i, "extra_dilation"), f"must be at least 1, got {x:g}")
    elif x * sc.time_dilation > TIME_DILATION[1]:
        lines.fail(("fabrics", i, "extra_dilation"),
                   f"{x:g} x time_dilation {sc.time_dilation:g} is over {TIME_DILATION[1]:g}")
    elif sc.link_mbps != "auto" and sc.link_mbps / x < LINK_MBPS[0]:
        lines.fail(("fabrics", i, "extra_dilation"), f"its links would run at "
                   f"{sc.link_mbps / x:g} Mb/s, under {LINK_MBPS[0]:g}")


def _same_servers(i: int, fab, seen: dict, lines: Lines) -> None:
    """Every fabric of one comparison has the same servers inside: NVLink at one rate on
    all, or on none."""
    seen.setdefault("first", (i, fab.nvlink_gbps))
    j, rate = seen["first"]
    if fab.nvlink_gbps != rate:
        def says(x):
            return f"NVLink at {x:g} Gb/s" if x else "no NVLink"
        lines.fail(("fabrics", i, "params"), f"{says(fab.nvlink_gbps)} here but "
                   f"{says(rate)} in fabrics[{j}]: the fabrics of one comparison must have "
                   f"the same servers inside (nvlink_gbps)")


def _build(i: int, spec, lines: Lines):
    from topologies import FabricError
    try:
        return spec.build()
    except TypeError as err:             # a parameter the builder does not take
        lines.fail(("fabrics", i, "params"), str(err).replace(f"{spec.builder}() ", ""))
    except (FabricError, ValueError) as err:
        lines.fail(("fabrics", i, "params"), str(err))


def _policy(i: int, spec, fab, lines: Lines) -> None:
    from controller.routing import RouteTable
    from topologies import FabricError
    if len(fab.hosts) > POLICY_CHECK_HOSTS:
        return
    try:
        RouteTable(fab, spec.route_policy(fab))
    except (ValueError, KeyError, FabricError) as err:
        lines.fail(("fabrics", i, "policy"), str(err))


def _placements(i: int, spec, fab, sc, lines: Lines) -> list:
    from traffic.placement import deploy
    d, pds = sc.deployment, []
    for placement in d.placements:
        try:
            pds.append(deploy(fab, d.prefill_tp, d.decode_tp, d.prefill_instances,
                              d.decode_instances, placement=placement, seed=sc.seed))
        except ValueError as err:
            lines.fail(("deployment",), f"on fabrics[{i}] ({spec.name}): {err}",
                       fallback=("fabrics", i))
    return pds


def _faults(i: int, spec, fab, sc, lines: Lines) -> None:
    from controller.failures import Failures
    from topologies import FabricError
    for j, fault in enumerate(sc.faults):
        loc, elem = ("faults", j, "element"), fault.element
        if elem == "busiest:gpu-switch":
            continue
        if elem.startswith("random:"):
            if elem[len("random:"):] not in RANDOM_KINDS:
                lines.fail(loc, f"random elements are random:{', random:'.join(RANDOM_KINDS)}"
                                f", got {elem!r}")
            continue
        try:
            Failures.parse(fab, [elem])
        except FabricError as err:
            lines.fail(loc, f"on fabrics[{i}] ({spec.name}): {err}")


def _background(i: int, spec, fab, sc, lines: Lines) -> None:
    """The background matrix must fit the iperf3 flows the emulation starts at most."""
    from testbed.emulation.background import MAX_FLOWS
    bg = sc.background
    if bg is None:
        return
    hosts = len(fab.hosts)
    flows = hosts * (hosts - 1) if bg.pattern == "all-to-all" else hosts
    if flows > MAX_FLOWS:
        lines.fail(("background", "pattern"), f"on fabrics[{i}] ({spec.name}): {bg.pattern} "
                   f"needs {flows} iperf3 flows; at most {MAX_FLOWS} (use permutation)")


def _request_count(sc, lines: Lines) -> int:
    """Requests in one run (at most), and the time its arrivals span within the limits."""
    w = sc.workload
    if w.arrivals == "trace":
        n = _trace_requests(sc, lines)
    elif w.count is not None:
        n = w.count
        on_share = 1.0 if w.arrivals == "poisson" else w.on_s / (w.on_s + w.off_s or 1)
        span = n / w.rate / on_share
        if span > L.SECONDS:
            lines.fail(("workload", "count"), f"{n:,} requests at {w.rate:g}/s span about "
                       f"{span:,.0f} s of arrivals; at most {L.SECONDS:,.0f} s")
    else:
        n = math.ceil(w.rate * w.duration_s)
        if n > L.REQUESTS:
            lines.fail(("workload", "duration_s"), f"rate x duration_s is about {n:,} "
                       f"requests; at most {L.REQUESTS:,}")
    return max(n, sc.sweep.count if sc.sweep else 0)


def _trace_requests(sc, lines: Lines) -> int:
    """The requests a trace replay holds: its file within the size limit, read as the run
    reads it (its window, its count)."""
    path = trace_path(sc.workload)
    size = os.path.getsize(path)
    if size > L.TRACE_BYTES:
        lines.fail(("workload", "trace"), f"{path} is {L.gib(size)}; a trace is at most "
                                          f"{L.gib(L.TRACE_BYTES)}")
    try:
        return len(requests_for(sc, sc.seed)[0])
    except ValueError:
        return 0                          # the run reports what is wrong with the trace


def _sizes(i: int, spec, fab, sc, pds: list, n: int, lines: Lines) -> None:
    """One request of the workload's size on each placement of fabric ``i`` (``pds``): its
    prefill and its longest transfer within a day, and every run's transfers within the
    memory available."""
    from traffic.types import Request
    from traffic.workload import build_workload
    w, d = sc.workload, sc.deployment
    one = [Request(0, 0.0, max(1, w.input_tokens), w.output_tokens)]
    per_request, longest = 0, 0.0
    for pd in pds:
        work = build_workload(one, pd, sc.model, chunks=d.chunks, mla_senders=d.mla_senders)
        per_request = max(per_request, len(work.transfers))
        for t in work.transfers:
            longest = max(longest, t.ready_s, t.bytes * 8 / (fab.nic_gbps * 1e9))
    if longest > L.SECONDS:
        lines.fail(("workload", "input_tokens"), f"on fabrics[{i}] ({spec.name}): one "
                   f"request of {w.input_tokens:,} tokens takes {longest:,.0f} s to prefill or "
                   f"to move at the NIC rate; at most {L.SECONDS:,.0f} s")
    transfers = n * sc.repetitions * len(pds) * per_request
    need = L.estimate_bytes(n, sc.repetitions, len(pds), per_request) \
        + transfers * HOPS * (math.ceil(longest / SAMPLE_S) + 1) * BIN_BYTES
    have = L.available_bytes()
    if have and need > L.MEMORY_SHARE * have:
        lines.fail(("workload",), f"on fabrics[{i}] ({spec.name}): {n:,} requests x "
                   f"{sc.repetitions} repetition(s) x {len(pds)} placement(s) x {per_request} "
                   f"transfers would hold about {L.gib(need)}; this machine has "
                   f"{L.gib(have)} available (fewer requests or repetitions)")
