"""Scenario files: one YAML document naming what to compare and under which traffic.

A scenario lists the fabrics to compare (builder, parameters, routing policy), the emulated
NIC rate (which sets the scale factors), the model, the PD deployment and placements, the
arrivals, seeds and repetitions, and the backend.  Every fabric runs the same requests:
repetition ``k`` uses seed ``seed + k`` for arrivals and placement on every fabric.

Validation is strict and points at the file: an unknown key, a wrong type or an impossible
value is a :class:`ScenarioError` reading ``FILE:LINE: where: what``.  Nothing is built
before the whole file has been checked.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import yaml

PLACEMENTS = ("aligned", "cross-rail", "random", "packed")
ARRIVALS = ("poisson", "bursty", "trace")
BACKENDS = ("emulation", "model")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


class ScenarioError(ValueError):
    """A bad scenario file; the message names the file, line and key."""


# --- a tiny schema language ------------------------------------------------------------------
# A field is (kind, default, help).  kind: "str", "int", "number", "bool", "path", a tuple of
# allowed strings, "mapping" (free-form, for builder parameters and models), a dict (a nested
# section), or ["list", kind].  A default of REQUIRED means the key must be present.
REQUIRED = object()

FABRIC = {
    "name": ("name", REQUIRED, "short name of this fabric's results folder"),
    "builder": (("zcube", "roft", "fattree"), REQUIRED, "topology builder"),
    "params": ("mapping", {}, "builder parameters, e.g. {n: 4, gpus_per_server: 4}"),
    "policy": ("str", None, "routing policy (default: the builder's own)"),
}
DEPLOYMENT = {
    "prefill_tp": ("int", 4, "tensor-parallel degree of prefill instances"),
    "decode_tp": ("int", 4, "tensor-parallel degree of decode instances"),
    "prefill_instances": ("int", None, "prefill instances (default: half the GPUs)"),
    "decode_instances": ("int", None, "decode instances (default: the other half)"),
    "placements": (["list", PLACEMENTS], ["aligned"], "placements to run, each a separate run"),
    "mla_senders": ("int", 1, "MLA models: prefill ranks that send the latent"),
    "chunks": ("int", 1, "layer-wise chunks per transfer"),
}
WORKLOAD = {
    "arrivals": (ARRIVALS, "poisson", "poisson, bursty or trace"),
    "rate": ("number", 2.0, "poisson/bursty: requests per second"),
    "on_s": ("number", 1.0, "bursty: on-period"),
    "off_s": ("number", 1.0, "bursty: off-period"),
    "count": ("int", None, "number of requests (trace: at most this many)"),
    "duration_s": ("number", None, "seconds of arrivals (trace: a window of the trace)"),
    "start_s": ("number", 0.0, "trace: where the window starts in trace time"),
    "input_tokens": ("int", 8192, "poisson/bursty: prompt tokens per request"),
    "output_tokens": ("int", 256, "poisson/bursty: output tokens per request"),
    "trace": ("path", "mooncake", "trace file (Mooncake JSONL); 'mooncake' is the shipped one"),
    "time_scale": ("number", 1.0, "trace: multiply arrival times"),
    "prefix_cache": ("bool", False, "trace: cached prefix blocks are not moved"),
}
SWEEP = {
    "rates": (["list", "number"], REQUIRED, "Poisson rates to sweep (requests/s)"),
    "slo_ttft_ms": ("number", REQUIRED, "P99 TTFT objective"),
    "count": ("int", 40, "requests per rate"),
}
FAULT = {
    "at_s": ("number", REQUIRED, "when, in workload time (s), the element goes down"),
    "element": ("str", REQUIRED, "a0-b1 (cables between two switches), g3:1 (a NIC port), "
                                 "a2 (a switch), or random:fabric-link|nic|switch"),
    "duration_s": ("number", None, "restore it after this long (default: at the run's end)"),
}
RANDOM_KINDS = ("fabric-link", "nic", "switch")
SCENARIO = {
    "name": ("name", REQUIRED, "scenario name"),
    "description": ("str", "", "what the scenario asks"),
    "backend": (BACKENDS, "emulation", "emulation (Mininet + OVS, root) or model"),
    "link_mbps": ("number", 100.0, "emulated NIC rate; links and KV sizes scale by it"),
    "seed": ("int", 1, "seed of repetition 0; repetition k uses seed + k"),
    "repetitions": ("int", 1, "runs per fabric and placement, each with its own seed"),
    "model": ("model", "llama3-70b", "model preset, or a mapping of model fields"),
    "fabrics": (["list", FABRIC], REQUIRED, "fabrics to compare; the first is the reference"),
    "deployment": (DEPLOYMENT, {}, "the PD deployment"),
    "workload": (WORKLOAD, {}, "request arrivals"),
    "sweep": (SWEEP, None, "optional rate sweep for SLO throughput"),
    "verify_sample": ("int", 200, "emulation: paths traced when verifying (0 = all)"),
    "faults": (["list", FAULT], None, "emulation: elements taken down during each run"),
}


@dataclass
class FabricSpec:
    name: str
    builder: str
    params: dict
    policy: str | None
    line: int = 0

    def build(self):
        from topologies import build
        return build(self.builder, **self.params)


@dataclass
class Scenario:
    name: str
    path: str
    text: str
    fabrics: list[FabricSpec]
    backend: str = "emulation"
    link_mbps: float = 100.0
    seed: int = 1
    repetitions: int = 1
    model: object = "llama3-70b"
    deployment: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    sweep: dict | None = None
    faults: list = field(default_factory=list)
    description: str = ""
    verify_sample: int = 200

    @property
    def placements(self) -> list[str]:
        return list(self.deployment["placements"])

    def run_names(self) -> list[tuple[FabricSpec, str, str]]:
        """(fabric, placement, run name): one run per fabric and placement, in order."""
        multi = len(self.placements) > 1
        return [(f, p, f"{f.name}-{p}" if multi else f.name)
                for f in self.fabrics for p in self.placements]


def _where(node) -> int:
    return node.start_mark.line + 1


class _Checker:
    def __init__(self, path: str):
        self.path = path
        self.base = os.path.dirname(os.path.abspath(path))

    def fail(self, node, key: str, msg: str):
        raise ScenarioError(f"{self.path}:{_where(node)}: {key}: {msg}")

    def scalar(self, node, key: str, kind):
        if not isinstance(node, yaml.ScalarNode):
            self.fail(node, key, f"expected {_kind_name(kind)}, got a "
                      f"{'list' if isinstance(node, yaml.SequenceNode) else 'mapping'}")
        value = yaml.safe_load(yaml.serialize(node))
        if isinstance(kind, tuple):
            if value not in kind:
                self.fail(node, key, f"expected one of {', '.join(kind)}, got {value!r}")
            return value
        if kind in ("str", "path", "name"):
            if not isinstance(value, str) or not value:
                self.fail(node, key, f"expected a non-empty string, got {value!r}")
            if kind == "name" and not NAME_RE.match(value):
                self.fail(node, key, f"{value!r} is not a usable name (letters, digits, '.', "
                                     f"'_', '-'; at most 40 characters)")
            if kind == "path" and value != "mooncake":
                value = os.path.normpath(os.path.join(self.base, value))
            return value
        if kind == "bool":
            if not isinstance(value, bool):
                self.fail(node, key, f"expected true or false, got {value!r}")
            return value
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                self.fail(node, key, f"expected a whole number, got {value!r}")
            if value < 0:
                self.fail(node, key, f"must be 0 or more, got {value}")
            return value
        if kind == "number":
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or value != value or value in (float("inf"), float("-inf")):
                self.fail(node, key, f"expected a number, got {value!r}")
            if value < 0:
                self.fail(node, key, f"must be 0 or more, got {value}")
            return float(value)
        raise AssertionError(kind)

    def value(self, node, key: str, kind):
        if isinstance(kind, dict):
            return self.section(node, key, kind)
        if isinstance(kind, list):
            if isinstance(node, yaml.ScalarNode) and not isinstance(kind[1], dict):
                return [self.value(node, key, kind[1])]          # a single item for a list
            if not isinstance(node, yaml.SequenceNode):
                self.fail(node, key, "expected a list")
            if not node.value:
                self.fail(node, key, "must not be empty")
            return [self.value(item, f"{key}[{i}]", kind[1]) for i, item in enumerate(node.value)]
        if kind in ("mapping", "model"):
            if kind == "model" and isinstance(node, yaml.ScalarNode):
                return self.scalar(node, key, "str")
            if not isinstance(node, yaml.MappingNode):
                self.fail(node, key, "expected a mapping")
            return yaml.safe_load(yaml.serialize(node)) or {}
        return self.scalar(node, key, kind)

    def section(self, node, where: str, spec: dict) -> dict:
        if isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null") \
                and node.tag.endswith("null"):
            node = yaml.MappingNode("tag:yaml.org,2002:map", [], node.start_mark, node.end_mark)
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, where or "scenario", "expected a mapping of keys")
        out, seen = {}, {}
        for k_node, v_node in node.value:
            key = k_node.value
            name = f"{where}.{key}" if where else str(key)
            if key not in spec:
                self.fail(k_node, name, f"unknown key (known: {', '.join(spec)})")
            if key in seen:
                self.fail(k_node, name, f"given twice (first on line {seen[key]})")
            seen[key] = _where(k_node)
            kind = spec[key][0]
            is_null = isinstance(v_node, yaml.ScalarNode) and v_node.tag.endswith("null")
            out[key] = None if is_null and spec[key][1] is None else self.value(v_node, name, kind)
            out[f"_line_{key}"] = _where(k_node)
        for key, (kind, default, _) in spec.items():
            if key not in out:
                if default is REQUIRED:
                    self.fail(node, where or "scenario", f"missing required key {key!r}")
                out[key] = (self.section(yaml.MappingNode("tag:yaml.org,2002:map", [],
                                                          node.start_mark, node.end_mark),
                                         f"{where}.{key}".lstrip("."), kind)
                            if isinstance(kind, dict) and default is not None else
                            (list(default) if isinstance(default, list) else default))
        return out


def _kind_name(kind) -> str:
    if isinstance(kind, tuple):
        return "one of " + ", ".join(kind)
    return {"int": "a whole number", "number": "a number", "bool": "true or false"}.get(
        kind, "a string")


def _clean(d: dict) -> dict:
    return {k: v for k, v in d.items() if not k.startswith("_line_")}


def loads(text: str, path: str = "<scenario>") -> Scenario:
    """Parse and validate a scenario; every problem is a ScenarioError naming file and line."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = str(getattr(err, "problem", None) or err).splitlines()[0]
        raise ScenarioError(f"{path}:{line}: not valid YAML: {problem}") from None
    if root is None:
        raise ScenarioError(f"{path}:1: scenario: the file is empty")
    chk = _Checker(path)
    doc = chk.section(root, "", SCENARIO)
    return _semantic(chk, root, doc, path, text)


def load(path: str) -> Scenario:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as err:
        raise ScenarioError(f"{path}: cannot read the scenario: {err}") from None
    return loads(text, path)


def _semantic(chk: _Checker, root, doc: dict, path: str, text: str) -> Scenario:
    """Checks across keys: fabrics build, policies and placements fit, the model exists."""
    from controller.routing import RouteTable
    from topologies import FabricError
    from traffic.models import get_model
    from traffic.placement import deploy

    def fail(line, key, msg):
        raise ScenarioError(f"{path}:{line}: {key}: {msg}")

    dep, wl = _clean(doc["deployment"]), _clean(doc["workload"])
    for key in ("prefill_tp", "decode_tp", "chunks", "mla_senders", "repetitions"):
        sect = doc if key == "repetitions" else doc["deployment"]
        if sect[key] < 1:
            fail(sect.get(f"_line_{key}", 1), key, f"must be at least 1, got {sect[key]}")
    for key in ("rate", "time_scale"):
        if wl[key] <= 0:
            fail(doc["workload"].get(f"_line_{key}", 1), f"workload.{key}",
                 f"must be greater than 0, got {wl[key]:g}")
    if doc["link_mbps"] <= 0:
        fail(doc.get("_line_link_mbps", 1), "link_mbps", "must be greater than 0")
    if wl["arrivals"] != "trace" and wl["count"] is None and wl["duration_s"] is None:
        fail(doc.get("_line_workload", 1), "workload", "give count or duration_s")
    if wl["arrivals"] == "trace" and wl["trace"] != "mooncake" and not os.path.isfile(wl["trace"]):
        fail(doc["workload"].get("_line_trace", 1), "workload.trace",
             f"no such file: {wl['trace']}")
    try:
        model = get_model(doc["model"])
    except (ValueError, TypeError) as err:
        fail(doc.get("_line_model", 1), "model", str(err))
    fabrics, names = [], {}
    fab_nodes = dict((k.value, v) for k, v in root.value).get("fabrics").value
    for i, (f, node) in enumerate(zip(doc["fabrics"], fab_nodes)):
        line = _where(node)
        if f["name"] in names:
            fail(line, f"fabrics[{i}].name", f"{f['name']!r} is already the name of "
                                             f"fabrics[{names[f['name']]}]")
        names[f["name"]] = i
        spec = FabricSpec(f["name"], f["builder"], f["params"] or {}, f["policy"], line)
        try:
            fab = spec.build()
        except TypeError as err:
            fail(f.get("_line_params", line), f"fabrics[{i}].params",
                 str(err).replace(f"{spec.builder}() ", ""))
        except (FabricError, ValueError) as err:
            fail(f.get("_line_params", line), f"fabrics[{i}].params", str(err))
        try:
            RouteTable(fab, spec.policy) if len(fab.hosts) <= 64 else None
        except (ValueError, KeyError, FabricError) as err:
            fail(f.get("_line_policy", line), f"fabrics[{i}].policy", str(err))
        for placement in dep["placements"]:
            try:
                deploy(fab, dep["prefill_tp"], dep["decode_tp"], dep["prefill_instances"],
                       dep["decode_instances"], placement=placement, seed=doc["seed"])
            except ValueError as err:
                fail(doc.get("_line_deployment", line), "deployment",
                     f"on fabrics[{i}] ({f['name']}): {err}")
        for j, fault in enumerate(doc["faults"] or []):
            where = f"faults[{j}].element"
            elem = fault["element"]
            if elem.startswith("random:"):
                if elem[7:] not in RANDOM_KINDS:
                    fail(fault["_line_element"], where, f"random elements are random:"
                         f"{', random:'.join(RANDOM_KINDS)}, got {elem!r}")
                continue
            from controller.failures import Failures
            try:
                Failures.parse(fab, [elem])
            except FabricError as err:
                fail(fault["_line_element"], where, f"on fabrics[{i}] ({f['name']}): {err}")
        fabrics.append(spec)
    sweep = None
    if doc["sweep"] is not None:
        sweep = _clean(doc["sweep"])
        if min(sweep["rates"]) <= 0:
            fail(doc["sweep"]["_line_rates"], "sweep.rates", "rates must be greater than 0")
    return Scenario(name=doc["name"], path=path, text=text, fabrics=fabrics,
                    backend=doc["backend"], link_mbps=doc["link_mbps"], seed=doc["seed"],
                    repetitions=doc["repetitions"], model=model, deployment=dep, workload=wl,
                    sweep=sweep, description=doc["description"],
                    faults=[_clean(x) for x in doc["faults"] or []],
                    verify_sample=doc["verify_sample"])


def describe() -> str:
    """Every key a scenario takes, with its default and meaning (for --help and README)."""
    lines = []

    def walk(spec, prefix):
        for key, (kind, default, text) in spec.items():
            if isinstance(kind, dict):
                lines.append(f"  {prefix}{key}:  {text}")
                walk(kind, prefix + "  ")
                continue
            if isinstance(kind, list) and isinstance(kind[1], dict):
                lines.append(f"  {prefix}{key}: (list)  {text}")
                walk(kind[1], prefix + "  - ")
                continue
            d = ("required" if default is REQUIRED else "" if default is None
                 else f"default {default}")
            lines.append(f"  {prefix}{key}  {text}" + (f" ({d})" if d else ""))
    walk(SCENARIO, "")
    return "\n".join(lines)
