"""A scenario: what to compare under which traffic, as typed pydantic sections, read from YAML
with every error naming its line before anything is built.  Where one was read from
(``path``, ``text``, a fabric's ``line``) is not part of its equality.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    StringConstraints,
    field_validator,
)

from testbed.core.backend import TRANSPORTS as _TRANSPORTS
from testbed.core.settings import EmulationSettings
from testbed.core.tables import fewer
from testbed.experiment.scenario import limits as L
from testbed.experiment.scenario.checks import RANDOM_KINDS
from testbed.experiment.scenario.yaml_lines import ScenarioError
from topologies import BUILDERS
from traffic.models import PRESETS, ModelSpec, get_model
from traffic.placement import PLACEMENTS

__all__ = ["RANDOM_KINDS", "Background", "Deployment", "EmulationSettings", "FabricSpec",
           "Fault", "Scenario", "ScenarioError", "Sweep", "Workload", "SECTIONS"]


# --- the keys' value types -------------------------------------------------------------------
# every number finite and 0 or more (checks across keys ask for more); a Positive one above 0
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
Count = Annotated[int, Field(ge=0)]
Number = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Text = Annotated[str, StringConstraints(min_length=1)]
Name = Annotated[str, StringConstraints(min_length=1, pattern=NAME_RE.pattern)]


def listed(value):
    """A single value where a list of values goes is a list of one."""
    return value if isinstance(value, (list, dict)) else [value]


def empty_if_null(value):
    return {} if value is None else value


def empty_list_if_null(value):
    return [] if value is None else value


def texts(value):
    """A list of strings: none is an empty list, one string a list of one."""
    return [] if value is None else [value] if isinstance(value, str) else value


def rate(value):
    """``link_mbps``: auto, or a finite number (checks across keys ask for more than 0)."""
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value in (float("inf"), float("-inf")) or value < 0:
        raise ValueError("must be 0 or more, or auto")
    return float(value)


def model_in(value) -> ModelSpec:
    try:
        return get_model(value)
    except TypeError as err:                # e.g. a field given as a list
        raise ValueError(str(err)) from None


def model_out(spec: ModelSpec):
    """A preset by its name, anything else as every field."""
    return spec.name if PRESETS.get(spec.name) == spec else dataclasses.asdict(spec)


Model = Annotated[ModelSpec, PlainValidator(model_in), PlainSerializer(model_out)]


ARRIVALS = ("poisson", "bursty", "trace")
BACKENDS = ("emulation", "model", "ns3")
TRANSPORTS = _TRANSPORTS
ORDERS = ("fabric", "mirrored")
BACKGROUNDS = ("permutation", "all-to-all")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__          # keys only, not where they were read


class FabricSpec(_Section):
    name: Name = Field(description="short name of this fabric's results folder")
    builder: Literal[tuple(BUILDERS)] = Field(description="topology builder")
    params: dict[str, Any] = Field(default_factory=dict, description="builder parameters, "
                                   "e.g. {n: 4, gpus_per_server: 4}")
    policy: Optional[Text] = Field(None, description="routing policy: zcube, zcube-short, "
                                   "zcube-pxn and pxn (NVLink fabrics: hand over to a "
                                   "sibling's NIC, rail matching), "
                                   "ecmp, shortest, spray[:K] (K connections per port "
                                   "pairing, default 16), spray:all (model backend: every "
                                   "pairing split evenly over all its paths) or "
                                   "module:function, its module beside the scenario file, in "
                                   "the working folder or on the Python path (default: the "
                                   "builder's own)")
    extra_dilation: Number = Field(
        1.0, le=L.TIME_DILATION[1], description="emulation: run this fabric this many times "
        "slower again than time_dilation, on links at link_mbps over it (the same bytes, fewer "
        "packets a second, for a fabric the datapath's thread does not keep up with); figures "
        "in the others' units; other backends run it as the others")
    repetitions: Optional[Count] = Field(
        None, le=L.REPETITIONS, description="run only the first this many of the scenario's "
        "repetitions (its first seeds) on this fabric, one whose repetitions cost more "
        "(extra_dilation); compared with the others over the seeds they share; --repetitions "
        "on the command line runs them all (default: all)")
    faults: bool = Field(True, description="false: this fabric runs without the scenario's "
                         "faults, the control its twin's outage is measured against (the "
                         "fabric with the same builder, parameters and policy)")
    _line: int = PrivateAttr(0)
    _folder: str = PrivateAttr("")

    @property
    def line(self) -> int:
        """The line of the scenario file this fabric starts on (0: not from a file)."""
        return self._line

    def route_policy(self, fabric):
        """The policy bound to ``fabric`` (None: the builder's default); the module of a
        ``module:function`` one is looked for beside the scenario file first, as a relative
        trace path is."""
        from controller.routing import make_policy
        if self.policy is None:
            return None
        return make_policy(self.policy, fabric, near=[self._folder] if self._folder else [])

    def reps_of(self, scenario_reps: int) -> int:
        """How many of the scenario's ``scenario_reps`` repetitions this fabric runs."""
        return min(self.repetitions or scenario_reps, scenario_reps)

    def slower_on(self, backend: str) -> float:
        """``extra_dilation`` on the emulation, 1 on backends without a forwarding thread."""
        return self.extra_dilation if backend == "emulation" else 1.0

    def build(self):
        from topologies import build
        return build(self.builder, **self.params)


class Deployment(_Section):
    prefill_tp: Count = Field(4, le=L.TP, description="tensor-parallel degree of prefill instances")
    decode_tp: Count = Field(4, le=L.TP, description="tensor-parallel degree of decode instances")
    prefill_instances: Optional[Count] = Field(None, le=L.INSTANCES,
                                               description="prefill instances "
                                               "(default: half the GPUs)")
    decode_instances: Optional[Count] = Field(None, le=L.INSTANCES, description="decode instances "
                                              "(default: the other half)")
    placements: Annotated[list[Literal[PLACEMENTS]], BeforeValidator(listed)] = Field(
        default_factory=lambda: ["aligned"], min_length=1,
        description="placements to run, each a separate run")
    mla_senders: Count = Field(1, le=L.TP,
                               description="MLA models: prefill ranks that send the latent")
    chunks: Count = Field(1, le=L.CHUNKS, description="layer-wise chunks per transfer")


class Workload(_Section):
    arrivals: Literal[ARRIVALS] = Field("poisson", description="poisson, bursty or trace")
    rate: Number = Field(2.0, le=L.RATE, description="poisson/bursty: requests per second")
    on_s: Number = Field(1.0, le=L.SECONDS, description="bursty: on-period")
    off_s: Number = Field(1.0, le=L.SECONDS, description="bursty: off-period")
    count: Optional[Count] = Field(None, le=L.REQUESTS,
                                   description="number of requests (trace: at most "
                                   "this many)")
    duration_s: Optional[Number] = Field(None, le=L.SECONDS,
                                         description="seconds of arrivals (trace: a "
                                         "window of the trace)")
    start_s: Number = Field(0.0, le=L.TRACE_START_S,
                            description="trace: where the window starts in trace time")
    input_tokens: Count = Field(8192, le=L.TOKENS,
                                description="poisson/bursty: prompt tokens per request")
    output_tokens: Count = Field(256, le=L.TOKENS,
                                 description="poisson/bursty: output tokens per request")
    trace: Text = Field("mooncake", description="trace file (Mooncake JSONL), relative to the "
                        "scenario's folder; 'mooncake' is the shipped one")
    time_scale: Number = Field(1.0, le=L.TIME_SCALE, description="trace: multiply arrival times")
    prefix_cache: bool = Field(False, description="trace: cached prefix blocks are not moved")

    @field_validator("trace")
    @classmethod
    def _absolute(cls, value: str, info) -> str:
        if value == "mooncake":
            return value
        base = os.path.abspath((info.context or {}).get("base_dir", "."))
        return os.path.normpath(os.path.join(base, value))


class Sweep(_Section):
    rates: Annotated[list[Annotated[Number, Field(le=L.RATE)]], BeforeValidator(listed)] = Field(
        min_length=1, max_length=L.SWEEP_RATES, description="Poisson rates to sweep (requests/s)")
    slo_ttft_ms: Number = Field(le=L.SLO_MS, description="P99 TTFT objective")
    count: Count = Field(40, le=L.REQUESTS, description="requests per rate")
    every_rate: bool = Field(False, description="run every rate; by default the rates are "
                             "run from the highest down until one meets the objective, "
                             "as the lower ones cannot change the SLO throughput")
    draws: Annotated[int, Field(ge=1)] = Field(
        1, le=L.REPETITIONS, description="seeds each rate runs on (the scenario's seed and "
        "the next ones); more than 1 makes the sweep a serving curve: every rate, lowest "
        "first, and the SLO throughput with a 95% interval over the draws")
    until_miss: Optional[float] = Field(
        None, gt=1, le=L.UNTIL_MISS, allow_inf_nan=False,
        description="a serving curve continued past the listed rates, this many times "
        "faster each time, until every draw misses the objective (at most 8 rates more)")


class Fault(_Section):
    at_s: Number = Field(le=L.SECONDS,
                         description="when, in workload time (s), the element goes down")
    element: Text = Field(description="a0-b1 (cables between two switches), g3:1 (a NIC "
                          "port), a2 (a switch), random:fabric-link|nic|switch, or "
                          "busiest:gpu-switch (the switch GPUs plug into whose GPUs move "
                          "the most of the workload's bytes)")
    duration_s: Optional[Number] = Field(None, le=L.SECONDS,
                                         description="restore it after this long "
                                         "(default: at the run's end)")


class Background(_Section):
    pattern: Literal[BACKGROUNDS] = Field(description="traffic matrix: permutation or "
                                          "all-to-all")
    mbps: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        10.0, le=L.LINK_MBPS[1],
            description="Mb/s each host offers in total, split over its destinations")


class Scenario(_Section):
    name: Name = Field(description="scenario name")
    description: str = Field("", description="what the scenario asks")
    backend: Literal[BACKENDS] = Field("emulation", description="emulation (Mininet + OVS, "
                                       "root), model (flow level) or ns3 (packet level)")
    link_mbps: Annotated[Union[Literal["auto"], float], PlainValidator(rate)] = Field(
        100.0, description="emulated NIC rate per GPU in Mb/s (1 to 1,600,000); links and KV "
        "sizes scale by it.  auto (emulation): the largest rate, to two figures, at which the "
        "workload's peak offered load (100 ms windows, each byte once per switch it crosses) "
        "stays under a quarter of the forwarding ceiling the emulator measured on each fabric "
        "at 1000 Mb/s (scale.link_mbps_auto records the choice)")
    seed: Count = Field(1, le=L.SEED,
                        description="seed of repetition 0; repetition k uses seed + k")
    repetitions: Count = Field(1, le=L.REPETITIONS, description="runs per fabric and "
                               "placement, each with its own seed")
    order: Literal[ORDERS] = Field(
        "fabric", description="emulation: fabric (each fabric's repetitions in one bring-up, "
        "one fabric after the other) or mirrored (each fabric's repetitions in two halves "
        "run A1 B1 ... B2 A2, so that the datapath's pace, which wanders over minutes, "
        "falls on every fabric alike; one more bring-up for each fabric but the last)")
    model: Model = Field("llama3-70b", validate_default=True,
                         description="model preset, or a mapping of model fields")
    fabrics: list[FabricSpec] = Field(min_length=1, max_length=L.FABRICS, description="fabrics "
                                      "to compare; the first is the reference")
    deployment: Annotated[Deployment, BeforeValidator(empty_if_null)] = Field(
        default_factory=Deployment, description="the PD deployment")
    workload: Annotated[Workload, BeforeValidator(empty_if_null)] = Field(
        default_factory=Workload, description="request arrivals")
    sweep: Optional[Sweep] = Field(None, description="optional rate sweep for SLO throughput")
    verify_sample: Count = Field(200, le=L.VERIFY_SAMPLE,
                                 description="emulation: paths traced when verifying "
                                 "(0 = all)")
    calibration_s: int = Field(
        2, ge=1, le=int(L.CALIBRATION_S),
        description="emulation: whole seconds each of the calibration's iperf3 measurements "
        "lasts (one per kind of port pairing, then all hosts at once; the fidelity record, "
        "the load guard and link_mbps: auto read them); shorter is quicker and noisier "
        "(whole: iperf3 reads its -t as whole seconds, and 0.5 ran for its default 10)")
    faults: Annotated[list[Fault], BeforeValidator(empty_list_if_null)] = Field(
        default_factory=list, max_length=L.FAULTS,
            description="elements taken down during each run, on every backend")
    background: Optional[Background] = Field(None, description="emulation: iperf3 traffic "
                                             "beside the KV transfers (default: none)")
    time_dilation: Number = Field(
        1.0, description="from 1 to 100: run the emulation this many times slower than the "
        "real pace: KV transfers this many times bigger and every time this many times later "
        "on links of the same rate, so the machine has the time for the per-packet work; "
        "results are reported in the undilated system's units (scale.time_dilation)")
    transport: Literal[TRANSPORTS] = Field(
        "pool", description="KV transport: pool (kept-open, warmed-up connections per port "
        "pairing, as RDMA queue pairs; ECMP pins each connection for the run) or "
        "tcp-per-transfer (a new TCP connection per transfer and pairing)")
    buffer_ms: Optional[Positive] = Field(
        None, le=L.BUFFER_MS,
            description="emulation and ns3: queue behind each shaped (switch) port, in ms "
        "at the port's emulated rate (bytes = rate x time, at least two 64 KB segments on "
        "the emulation, two packets on ns3), for studies of "
        "shallow, dropping buffers; default: a 64-packet FIFO, which the shipped scenarios "
        "never fill, as a lossless (PFC) RoCE fabric drops nothing")
    large_segments: bool = Field(
        False, description="emulation: hosts hand their NIC ports segments of 64 KB, not "
        "32 KB (hosts size segments past the emulation's millisecond RTTs either way): "
        "about half the packets for the datapath's one thread, but on an idle port a "
        "transfer of a few segments finishes early (the run's isolated transfers show it)")
    host_retries: int = Field(
        1, ge=0, le=5, description="emulation: times a repetition is run again, same "
        "seed, when it was not faithful while the hypervisor took at least 15% of the CPUs "
        "in a 100 ms window (the machine's host held it back, not the fabric), or when its "
        "transfers alone started late while the datapath, the isolated transfers and the "
        "loss stayed inside their bounds (the machine was slow without steal counted), its "
        "isolated transfers measured again first; the last run is kept, and summary.json's "
        "fidelity.set_aside says why (cause host or late; 0: never); after one late again, "
        "the bring-up runs none again for late starts (fidelity.not_run_again)")
    emulation: Annotated[EmulationSettings, BeforeValidator(empty_if_null)] = Field(
        default_factory=EmulationSettings, description="emulation: how it runs the "
        "workload (docs/settings.md); every key's default is the measured best")
    expect: Annotated[list[Text], BeforeValidator(texts)] = Field(
        default_factory=list, max_length=L.EXPECTATIONS, description="checks on the results "
        "that zcube run judges after the comparison, each a line such as "
        "'fct_ms.p99[roft] / fct_ms.p99[zcube] > 1.2' or 'verdict(fct_ms.p99, roft, zcube) == "
        "\"zcube lower\"' (docs/reference.md, Expectations); it exits non-zero when one "
        "fails or cannot be judged")
    _path: str = PrivateAttr("<scenario>")
    _text: str = PrivateAttr("")
    _auto_choice: Optional[dict] = PrivateAttr(None)
    _expect_lines: list = PrivateAttr(default_factory=list)

    @property
    def expect_lines(self) -> list[int]:
        """The line of the scenario file each of ``expect`` is on (empty: not from a
        file)."""
        return list(self._expect_lines)

    @property
    def auto_choice(self) -> Optional[dict]:
        """How ``link_mbps: auto`` was resolved (None when the rate was given)."""
        return self._auto_choice

    def with_rate(self, link_mbps: float, choice: Optional[dict] = None) -> "Scenario":
        """A copy at ``link_mbps``; ``choice`` is what picked it (``link_mbps: auto``)."""
        out = self.model_copy(update={"link_mbps": link_mbps})
        out._auto_choice = choice
        return out

    def with_flags(self, update: dict, shown: str) -> "Scenario":
        """A copy with ``update``'s values (the command line's) in place of the file's, whose
        :attr:`text` (each run's scenario.yaml) begins with a comment naming the flags as
        ``shown``, so that the file says what ran.  Repetitions given so replace the
        fabrics' own too (every fabric runs them all)."""
        if "repetitions" in update:
            update = dict(update, fabrics=[f.model_copy(update={"repetitions": None})
                                           for f in update.get("fabrics", self.fabrics)])
        out = self.model_copy(update=update)
        out._text = f"# run with {shown}: these replace the values below\n{self._text}"
        return out

    def repetitions_said(self) -> str:
        """``10 repetitions``, with the fabrics that run fewer: ``(roft-spray 5)``."""
        _, few = fewer({f.name: f.reps_of(self.repetitions) for f in self.fabrics},
                       most=self.repetitions)
        return f"{self.repetitions} repetitions" + (f" ({few})" if few else "")

    @property
    def path(self) -> str:
        """The file it was read from (``<flags>`` and the like when not from a file)."""
        return self._path

    @property
    def text(self) -> str:
        """The scenario as given: the file's text, or :func:`.files.dumps` of a dict's."""
        return self._text

    @property
    def placements(self) -> list[str]:
        return list(self.deployment.placements)

    def run_names(self) -> list[tuple[FabricSpec, str, str]]:
        """(fabric, placement, run name): one run per fabric and placement, in order."""
        multi = len(self.placements) > 1
        return [(f, p, f"{f.name}-{p}" if multi else f.name)
                for f in self.fabrics for p in self.placements]


# the sections a scenario's keys are read into (the emulation's settings are core's)
SECTIONS = (_Section, EmulationSettings)
