"""Checks across a scenario's keys, once each key has its type (:mod:`.scenario`): counts
and rates that must be positive, arrivals that say how many, a trace file that exists, and
per fabric that it builds, its policy routes it, every placement fits it and every fault
names one of its elements.  A failure is the ScenarioError of the key it is about."""
from __future__ import annotations

import os

from testbed.experiment.limits import LINK_MBPS, TIME_DILATION
from testbed.experiment.scenario_yaml import Lines

RANDOM_KINDS = ("fabric-link", "nic", "switch")
POLICY_CHECK_HOSTS = 64          # larger fabrics take too long to route just to check


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
    from testbed.experiment import scenario_load
    n = scenario_load.requests(sc, lines)
    names: dict = {}
    for i, spec in enumerate(sc.fabrics):
        if spec.name in names:
            lines.fail(("fabrics", i, "name"), f"{spec.name!r} is already the name of "
                                               f"fabrics[{names[spec.name]}]")
        names[spec.name] = i
        _extra(i, spec, sc, lines)
        fab = _build(i, spec, lines)
        _policy(i, spec, fab, lines)
        pds = _placements(i, spec, fab, sc, lines)
        scenario_load.check(i, spec, fab, sc, pds, n, lines)
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
        RouteTable(fab, spec.policy)
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
