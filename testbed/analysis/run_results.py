"""What a scenario's run gives back through the Python API: per run its headline figures,
every paired ratio with its verdict, the comparison as text, the expectations judged and the
outage table, read from the results folder the runs wrote."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class RunSummary:
    """One run (a fabric and placement) of a scenario: its headline figures; ``summary`` is
    its whole summary.json (docs/reference.md, "summary.json")."""
    name: str
    fabric: str
    policy: str
    backend: str
    placement: str
    repetitions: int
    transfers_total: int
    transfers_verified: int
    fct_ms: dict
    ttft_ms: dict
    link_util: dict
    summary: dict = field(repr=False)


@dataclass
class Paired:
    """One figure of one run against its group's first (the reference), paired by seed:
    the ratio run / reference with its 95% interval over ``n`` repetitions, and the verdict
    (``testbed.core.verdict``): ``verdict`` is ``other`` (the run is lower), ``ref``,
    ``level`` or ``unclear``; ``words`` says it as the tables do; ``winner`` names the
    fabric that is lower, or is None."""
    placement: str
    metric: str
    reference: str
    run: str
    ratio: float
    lo: Optional[float]
    hi: Optional[float]
    n: int
    margin: float
    verdict: str
    words: str
    winner: Optional[str]


@dataclass
class Results:
    """What :func:`testbed.api.run` gives back: the folder it wrote, each run's summary,
    every paired ratio and verdict, ``text``, the comparison as ``zcube compare`` prints it, and
    ``checks``, the outcome of each expectation (``.expectation.text``, ``.status``:
    ``pass``, ``FAIL``, ``not judged`` or ``error``; ``.read``, the figures it read;
    ``.reason``), and ``outage``, a row of the outage table (:mod:`testbed.analysis.outage`:
    ``gpus_reachable``, ``lost``, ``fct_ratio``, ``ttft_verdict`` ...) per fabric that ran
    with faults beside a twin without them, and ``serving_curve``, a row per fabric whose
    sweep is a serving curve (:mod:`testbed.analysis.serving_curve`:
    ``slo_throughput_per_s``, ``knee_per_s``, ``ratio``, ``verdict`` ...)."""
    output: str
    backend: str
    runs: dict
    paired: list
    text: str
    checks: list = field(default_factory=list)
    outage: list = field(default_factory=list)
    serving_curve: list = field(default_factory=list)

    @property
    def expected(self) -> bool:
        """Every expectation passed (none failed, none left not judged)."""
        return all(c.status == "pass" for c in self.checks)

    @property
    def verified(self) -> bool:
        """Every transfer of every run verified (but those a fault cut off by design)."""
        from testbed.experiment.pipeline import all_verified
        return all_verified({n: r.summary for n, r in self.runs.items()})

    def verdict(self, run: str, metric: str = "TTFT p99 ms",
                placement: Optional[str] = None) -> Optional[Paired]:
        """The paired comparison of ``run`` on ``metric`` (``FCT p50 ms``, ``FCT p99 ms``
        or ``TTFT p99 ms``), in ``placement`` when the scenario has several."""
        return next((p for p in self.paired if p.run == run and p.metric == metric
                     and placement in (None, p.placement)), None)


def paired_of(groups: list[dict]) -> list[Paired]:
    """Every paired ratio of ``groups`` (``comparison``'s) with its verdict."""
    from testbed.core import verdict as rule
    out = []
    for g in groups:
        names = g["runs"]
        for row in g["rows"]:
            for i, p in enumerate(row.get("paired") or []):
                if not p:
                    continue
                code = rule.verdict(p)
                out.append(Paired(g["placement"], row["metric"], names[0], names[i],
                                  p["ratio"], p["lo"], p["hi"], p["n"],
                                  p.get("margin") or rule.FLOOR, code,
                                  rule.words(p, names[0], names[i]),
                                  {"other": names[i], "ref": names[0]}.get(code)))
    return out


def summary_of(name: str, s: dict) -> RunSummary:
    """A run's headline figures from its summary.json ``s``."""
    return RunSummary(name=name, fabric=s.get("fabric_name") or s.get("fabric"),
                      policy=s.get("policy"), backend=s.get("backend"),
                      placement=s.get("placement"), repetitions=s.get("repetitions", 1),
                      transfers_total=s["transfers_total"],
                      transfers_verified=s["transfers_verified"], fct_ms=s.get("fct_ms") or {},
                      ttft_ms=s.get("ttft_ms") or {}, link_util=s.get("link_util") or {},
                      summary=s)


def results_of(out: str, backend: str, summaries: dict, expectations) -> Results:
    """The :class:`Results` of the runs ``summaries`` written into ``out`` on ``backend``,
    with ``expectations`` judged (the outage and serving-curve tables written beside them,
    if any)."""
    from testbed.analysis import outage, serving_curve
    from testbed.analysis.checks import judge_all
    from testbed.analysis.compare import comparison, load_runs, to_text
    found = [r for r in load_runs([out]) if r["run"] in summaries]
    groups = comparison(found)
    return Results(output=out, backend=backend,
                   runs={n: summary_of(n, s) for n, s in summaries.items()},
                   paired=paired_of(groups), text=to_text(groups),
                   checks=judge_all(expectations, found), outage=outage.record(found, out),
                   serving_curve=serving_curve.record(found, out))
