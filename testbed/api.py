"""The testbed from Python, in a few stable calls: build a fabric, compute and check a
policy's routes, bring the fabric up on the emulation and send verified transfers over it,
fail and restore its elements, export it, and run a scenario to its comparison.

Each call is a thin wrapper over :mod:`topologies`, :mod:`controller`, the emulation and the
experiment pipeline, so that tests and scripts import from one place what the ``zcube``
command does (docs/api.md shows each with an example)::

    from testbed import api
    report = api.check_routes(api.fabric("roft", servers=4, gpus_per_server=4), "ecmp")
    assert report.ok
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable, Iterator, Optional, Union

from controller.failures import Failures
from controller.routing import FunctionPolicy, Policy, RouteTable
from controller.verify import VerifyReport, verify
from testbed.analysis.run_results import Paired, Results, RunSummary, results_of
from topologies import Fabric, FabricError, build, load_fabric

__all__ = ["Fabric", "NotVerified", "Paired", "Results", "RouteTable", "RunSummary",
           "RunningFabric", "Verified", "VerifyReport", "check_routes", "export", "fabric",
           "routes", "run", "up"]

PolicyLike = Union[str, Policy, Callable, None]


# --- fabrics and routes (pure: no root) ------------------------------------------------------
def fabric(builder: Union[str, Callable, Fabric], **params) -> Fabric:
    """A fabric: by builder name (``"zcube"``, ``"roft"``, ``"fattree"``) with its
    parameters, from a builder function (``topologies.roft``), from a ``fabric.json`` a run
    wrote, or a :class:`Fabric` as it is; a bad name or parameter raises FabricError."""
    if isinstance(builder, Fabric):
        if params:
            raise TypeError("a Fabric takes no parameters")
        return builder
    if callable(builder):
        return builder(**params)
    if isinstance(builder, str) and builder.endswith(".json") and os.path.isfile(builder):
        return load_fabric(builder)
    return build(builder, **params)


def policy_name(policy: PolicyLike) -> Optional[str]:
    """The ``module:function`` name of a policy function, a policy's name as it is: what a
    scenario file or the controller (a process of its own, which imports it) is given."""
    if policy is None or isinstance(policy, str):
        return policy
    if isinstance(policy, Policy):
        return policy.name
    module, name = getattr(policy, "__module__", None), getattr(policy, "__qualname__", "")
    if not module or module == "__main__" or "<" in name:
        raise FabricError(f"policy {policy!r}: the emulation's controller and the scenario "
                          f"need it importable as module:function; define it in a module")
    return f"{module}:{name}"


def _policy(fab: Fabric, policy: PolicyLike):
    """What :class:`RouteTable` takes: a name or Policy as it is, a function wrapped."""
    if policy is None or isinstance(policy, (str, Policy)):
        return policy
    if callable(policy):
        name = f"{getattr(policy, '__module__', '?')}:{getattr(policy, '__qualname__', '?')}"
        return FunctionPolicy(fab, policy, name)
    raise TypeError(f"a policy is a name, a Policy or a function, not {policy!r}")


def routes(fab: Fabric, policy: PolicyLike = None, failed=()) -> RouteTable:
    """The route table of ``policy`` on ``fab``: a built-in name (``zcube``, ``ecmp``,
    ``spray:4``, ...), ``module:function``, or a function ``policy(fabric, src, dst)``
    returning paths (default: the fabric's own policy).  ``failed`` names dead elements
    (``"a1"``, ``"a0-b1"``, ``"g3:1"``): the table then routes around them.
    ``table.paths(src, dst)`` gives a pair's paths."""
    table = RouteTable(fab, _policy(fab, policy))
    if failed:
        table = table.with_failures(Failures.parse(fab, [failed] if isinstance(failed, str)
                                                   else failed))
    return table


def check_routes(fab: Union[Fabric, RouteTable], policy: PolicyLike = None,
                 traffic: Optional[str] = "pd", line_rate: bool = False,
                 failed=()) -> VerifyReport:
    """The route verifier's findings (``zcube routes --check``): every pair routed,
    loop-free, on real cables and the promised port pairings, and with ``traffic``
    (``pd``, ``all-to-all``, ``permutation`` or None) the load on each class of link.
    ``.ok`` says whether it holds, ``.violations`` where it does not, ``.to_text()`` prints
    it; ``fab`` may be a route table from :func:`routes`."""
    table = fab if isinstance(fab, RouteTable) else routes(fab, policy, failed)
    return verify(table, traffic=traffic, line_rate=line_rate)


def export(fab: Fabric, fmt: str, policy: PolicyLike = None, **options) -> str:
    """``fab`` as text in ``fmt``: ``clab`` (a containerlab topology whose GPU containers
    get ``policy``'s routes), ``simai`` (SimAI's topology file), ``json`` (the fabric, as
    ``zcube topo --format json``) or ``dot``; ``options`` are the exporter's own
    (``zcube topo --help``)."""
    if fmt == "clab":
        from controller.flows import HostConfigs
        from topologies.clab import check_size, to_clab_yaml
        check_size(fab)
        table = routes(fab, policy)
        return to_clab_yaml(fab, host_configs=HostConfigs(table), policy=table.policy_name,
                            **options)
    if fmt == "simai":
        from topologies.simai import to_simai
        return to_simai(fab, **options)
    if fmt == "json":
        import json
        return json.dumps(fab.to_json_dict(), indent=1) + "\n"
    if fmt == "dot":
        from topologies.draw import to_dot
        return to_dot(fab)
    raise FabricError(f"unknown format {fmt!r}; choose one of clab, simai, json, dot")


# --- a fabric brought up (root, Open vSwitch) ------------------------------------------------
class NotVerified(RuntimeError):
    """The emulated fabric did not forward as computed; ``.result`` holds the findings."""

    def __init__(self, result: "Verified"):
        super().__init__("the fabric does not forward as computed: "
                         + "; ".join(result.problems[:3]))
        self.result = result


@dataclass
class Verified:
    """What :meth:`RunningFabric.verify` found: ``ok``, the first ``problems``, and the whole
    report (``pairs_ok``, ``pairs_tested``, ``paths_traced``, ``flows_installed``, ...)."""
    ok: bool
    problems: list
    report: dict


class RunningFabric:
    """A fabric up on the emulation (what :func:`up` yields); ``emulation`` is the
    underlying :class:`testbed.emulation.emulation.Emulation` for anything not here."""

    def __init__(self, emulation):
        self.emulation = emulation

    @property
    def fabric(self) -> Fabric:
        return self.emulation.fabric

    @property
    def table(self) -> RouteTable:
        """The route table the switches hold now (around what is failed)."""
        return self.emulation.table

    @property
    def failed(self) -> dict:
        """What is down now: ``{"links": [...], "switches": [...]}`` (empty: nothing)."""
        return self.emulation.failed.describe(self.fabric) if self.emulation.failed else {}

    def verify(self, sample: Optional[int] = 60) -> Verified:
        """Prove the switches forward as computed: flows read back from every switch, every
        ordered pair answering on every port pairing, ``sample`` paths traced (None: the
        default sample, 0: all)."""
        rep = self.emulation.verify(sample=sample)
        return Verified(ok=bool(rep["ok"]), problems=list(rep["problems"]), report=rep)

    def path(self, src: str, dst: str) -> list[tuple]:
        """The paths the switches carry ``src -> dst`` on now, each a tuple of node names
        (several where the policy stripes or spreads a pair; around failures, the reroute)."""
        return list(self.table.paths(src, dst))

    def transfer(self, src: str, dst: str, nbytes: int, fault: Optional[str] = None,
                 fault_at_s: float = 0.2, fault_for_s: Optional[float] = None) -> dict:
        """Carry one KV transfer of ``nbytes`` from GPU ``src`` to GPU ``dst`` over real
        TCP, split over the pair's port pairings and verified byte for byte: its row of
        transfers.csv (``verified``, ``status``, ``fct_ms``, ``attempts``, ``moves``, ...).
        With ``fault`` (an element, such as ``"a1"``), that element fails ``fault_at_s``
        after the start (for ``fault_for_s``; None: until the transfer ends, then restored),
        and the row's ``faults`` says what each event did to the transfer."""
        from testbed.emulation.transfers import run_transfers
        from traffic.types import Transfer
        work = SimpleNamespace(transfers=[Transfer(0, src, dst, int(nbytes), 0.0)],
                               bytes_total=int(nbytes))
        if fault is None:
            return run_transfers(self.emulation, work, start_delay_s=0.2)[0]
        import time

        from testbed.core.fault_records import affected
        from testbed.emulation.faults import FaultRun
        from testbed.emulation.transfers import open_connections
        open_connections(self.emulation, work, seeded=False)    # as run_transfers does
        t0 = time.time() + 0.5
        plan = [{"at_s": fault_at_s, "element": fault, "duration_s": fault_for_s}]
        with FaultRun(self.emulation, plan, t0) as faults:
            rows = run_transfers(self.emulation, work, t0=t0)
        return dict(rows[0], faults=affected(self.table, faults.records, rows))

    def fail(self, *elements: str) -> dict:
        """Take elements down (``"a1"``, ``"a0-b1"``, ``"g3:1"``) and wait for the
        controller's reroute; its figures (``reroute_s``, ``disconnected_pairs``, ...)."""
        return self.emulation.fail(*elements)

    def restore(self, *elements: str) -> dict:
        """Bring failed elements back (every one when none is named)."""
        return self.emulation.restore(*elements)


@contextlib.contextmanager
def up(fab: Union[str, Callable, Fabric], policy: PolicyLike = None, link_mbps: float = 100.0,
       verify_sample: Optional[int] = 60, log: Optional[Callable] = None,
       **params) -> Iterator[RunningFabric]:
    """Bring a fabric up on the emulation (root: Open vSwitch, the controller, Mininet
    hosts), verify it (``verify_sample`` paths traced; False: no check), and tear it down
    on leaving the ``with`` block, also after an error or Ctrl-C::

        with api.up("zcube", n=4, gpus_per_server=4) as running:
            row = running.transfer("g0", "g5", 1_000_000)

    ``fab`` and ``params`` are :func:`fabric`'s; ``policy`` a name or an importable
    function; ``link_mbps`` the emulated NIC rate per GPU.  Raises UsageError without root
    or tools, NotVerified when the switches
    do not forward as computed."""
    from testbed.emulation.emulation import Emulation
    from testbed.emulation.prereq import check_can_emulate, quiet_mininet
    fab = fabric(fab, **params)
    name = policy_name(policy)
    if name is not None:
        RouteTable(fab, name)                 # a bad policy fails before anything starts
    check_can_emulate()
    quiet_mininet()
    with Emulation(fab, policy=name, link_mbps=link_mbps, log=log) as emu:
        running = RunningFabric(emu)
        if verify_sample is not False:
            found = running.verify(verify_sample)
            if not found.ok:
                raise NotVerified(found)
        yield running


# --- scenarios run to a comparison -----------------------------------------------------------
def _scenario(scenario, flags: dict):
    """A validated scenario from a Scenario, a dict, a file or a shipped name, with
    ``flags`` (scenario keys; ``fabrics`` may be a list of the fabrics' names to keep)
    in place of its own values, checked as a file's would be."""
    import yaml

    from testbed.experiment.pipeline import shipped
    from testbed.experiment.scenario import Scenario, dumps, from_dict, load
    if isinstance(scenario, dict):
        sc = from_dict(scenario, path="<dict>", base_dir=os.getcwd())
    elif isinstance(scenario, Scenario):
        sc = scenario
    else:
        path = os.fspath(scenario)
        sc = load(path if os.path.exists(path) or not shipped(path) else shipped(path))
    if not flags:
        return sc
    doc = yaml.safe_load(dumps(sc))
    names = flags.get("fabrics")
    if names and all(isinstance(n, str) for n in names):
        flags = dict(flags, fabrics=[f for f in doc["fabrics"] if f["name"] in names])
    doc.update(flags)
    if "repetitions" in flags:            # as --repetitions: every fabric runs them all
        for f in doc["fabrics"]:
            f["repetitions"] = None
    return from_dict(doc, path=sc.path, base_dir=os.path.dirname(os.path.abspath(sc.path)))


def run(scenario, backend: Optional[str] = None, output: Optional[str] = None,
        log: Optional[Callable] = None, expect=(), **flags) -> Results:
    """Run a scenario (a path, a shipped name such as ``"cross-rail"``, a dict of scenario
    keys or a Scenario) on each of its fabrics, as ``zcube run`` does, and compare them.
    ``backend``: ``model``, ``ns3`` or ``emulation`` (root), default the scenario's;
    ``output``: the results folder (default a new temporary one); ``log(msg)``: progress
    lines (default: to stderr); ``flags``: scenario keys in place of the file's, such as
    ``repetitions=5, seed=101, fabrics=["zcube", "roft"]``; ``expect``: expectations beside
    the scenario's own (docs/reference.md, "Expectations"), judged into ``Results.checks``.
    Raises ScenarioError for a bad scenario, UsageError for a bad expectation or what the
    backend lacks (before anything runs), RunError when a run fails."""
    from testbed.analysis.expect import parse_all
    from testbed.experiment.pipeline import check_policies, prepare_backend
    from testbed.experiment.runner import run_scenario
    sc = _scenario(scenario, flags)
    expectations = parse_all(sc, list(expect))
    backend = backend or sc.backend
    check_policies(sc, backend)
    prepare_backend(backend)
    out = output or tempfile.mkdtemp(prefix=f"zcube-{sc.name}-")
    summaries = run_scenario(sc, out, backend=backend, log=log)
    return results_of(out, backend, summaries, expectations)
