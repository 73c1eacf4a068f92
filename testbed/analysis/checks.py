"""Judging expectations (:mod:`testbed.analysis.expect`) over a scenario's results, for a CI
pipeline: each figure read from the runs' summaries, each ``verdict()`` from the
comparison's own paired verdict (:func:`testbed.analysis.compare.comparison`), and a result
of pass, FAIL or not judged (a figure of a run that was not faithful, or without a value);
and the check table ``zcube run`` prints after the comparison.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from testbed.analysis.expect import (
    FAITHFUL,
    PAIRED_PATHS,
    Expectation,
    ExpectError,
    Figure,
    Verdict,
    evaluate,
)

PASS, FAIL, NOT_JUDGED, ERROR = "pass", "FAIL", "not judged", "error"


@dataclass
class Outcome:
    expectation: Expectation
    status: str                # PASS, FAIL, NOT_JUDGED or ERROR
    read: list = field(default_factory=list)       # (what, its value as shown)
    reason: str = ""           # why not judged, or the error


def faithful_of(summary: dict) -> bool:
    """A run's ``fidelity.faithful``; true where there is no fidelity record (the model and
    ns-3 have no emulator to judge)."""
    return (summary.get("fidelity") or {}).get("faithful") is not False


def number(v) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _figure(exp: Expectation, fig: Figure, summary: dict):
    """A figure's value in a run's summary (None: it has none); ExpectError for a path the
    summary does not have or that is not a number."""
    if fig.path == FAITHFUL:
        return faithful_of(summary)
    value, done = summary, []
    for part in fig.path.split("."):
        if value is None:
            return None
        if not isinstance(value, dict) or part not in value:
            there = ".".join(done) or "summary.json"
            keys = [k for k in value if not k.startswith("_")] if isinstance(value, dict) else []
            raise exp.error(f"{fig.run}'s summary.json has no {fig.path}"
                            + (f" ({there} has {', '.join(keys[:12])}"
                               + (", ..." if len(keys) > 12 else "") + ")" if keys else ""))
        value, done = value[part], done + [part]
    if isinstance(value, dict):
        raise exp.error(f"{fig} is a section ({', '.join(value)}); name one of its figures")
    if value is not None and not isinstance(value, (int, float)):
        raise exp.error(f"{fig} is not a number ({value!r})")
    return value


def _verdict(v: Verdict, by_run: dict) -> tuple[str, Optional[dict]]:
    """The comparison's paired verdict of ``v.run`` against ``v.ref`` on its figure, in
    words, and the paired ratio it rests on."""
    from testbed.analysis.compare import comparison, paired_of
    from testbed.core.verdict import words
    group = comparison([by_run[v.ref], by_run[v.run]])[0]
    row = next(r for r in group["rows"] if r["metric"] == PAIRED_PATHS[v.path])
    p = paired_of(row, 1)
    return words(p, v.ref, v.run), p


def _verdict_shown(said: str, p: Optional[dict]) -> str:
    if not p or p.get("lo") is None:
        return f'"{said}" (no paired interval: fewer than 2 repetitions in common)'
    from testbed.core.verdict import describe_margin
    return (f'"{said}" (ratio {p["ratio"]:.3f}, 95% {p["lo"]:.3f}-{p["hi"]:.3f}, '
            f'{describe_margin(p)}, {p["n"]} repetitions)')


def _read(exp: Expectation, by_run: dict) -> tuple[dict, list]:
    """Each leaf's value and what the check table shows of it."""
    values, shown = {}, []
    for leaf in exp.reads:
        if isinstance(leaf, Verdict):
            said, p = _verdict(leaf, by_run)
            values[leaf] = said
            shown.append((str(leaf), _verdict_shown(said, p)))
        else:
            values[leaf] = _figure(exp, leaf, by_run[leaf.run])
            v = values[leaf]
            shown.append((str(leaf), "no value" if v is None else
                           str(v).lower() if isinstance(v, bool) else number(v)))
    return values, shown


def judge(exp: Expectation, runs: list[dict]) -> Outcome:
    """One expectation over the runs' summaries (as :func:`compare.load_runs` reads them,
    each with its ``run``).  Not judged: a run it reads has no results, or a run whose
    figures it reads was not faithful (unless it reads that run's ``faithful`` alone), or
    a figure has no value, or it divides by zero.  A path the summaries do not have is an
    ERROR outcome (exit status 2)."""
    by_run = {r["run"]: r for r in runs}
    missing = [r for r in exp.runs() if r not in by_run]
    if missing:
        return Outcome(exp, NOT_JUDGED, [], f"no results of {', '.join(missing)}")
    try:
        values, shown = _read(exp, by_run)
    except ExpectError as err:
        return Outcome(exp, ERROR, [], str(err))
    unfaithful = [r for r in exp.judged_runs() if not faithful_of(by_run[r])]
    if unfaithful:
        return Outcome(exp, NOT_JUDGED, shown, f"{', '.join(unfaithful)} not faithful")
    empty = [str(leaf) for leaf, v in values.items() if v is None]
    if empty:
        return Outcome(exp, NOT_JUDGED, shown, f"{', '.join(empty)} has no value")
    try:
        held = evaluate(exp, values)
    except ZeroDivisionError:
        return Outcome(exp, NOT_JUDGED, shown, "division by zero")
    return Outcome(exp, PASS if held else FAIL, shown)


def judge_all(expectations: list[Expectation], runs: list[dict]) -> list[Outcome]:
    return [judge(e, runs) for e in expectations]


def status_of(outcomes: list[Outcome]) -> int:
    """The exit status the outcomes give (testbed/experiment/pipeline.py): bad input where
    a path was not in the summaries, else failed where one failed, else not judged where
    one was not judged, else 0."""
    from testbed.experiment.pipeline import (
        EXIT_BAD_INPUT,
        EXIT_EXPECT_FAILED,
        EXIT_NOT_JUDGED,
        EXIT_OK,
        most_serious,
    )
    code = {ERROR: EXIT_BAD_INPUT, FAIL: EXIT_EXPECT_FAILED, NOT_JUDGED: EXIT_NOT_JUDGED}
    return most_serious(EXIT_OK, *(code.get(o.status, EXIT_OK) for o in outcomes))


def read_text(o: Outcome) -> str:
    """The values an expectation read, as the check table and the JUnit file show them."""
    return "; ".join(f"{what} {value}" for what, value in o.read) or "-"


def check_lines(outcomes: list[Outcome]) -> list[str]:
    """The check table: each expectation, the values it read and its result."""
    from testbed.core.tables import text_table
    counts = Counter(o.status for o in outcomes)
    said = ", ".join(f"{counts[s]} {s}" for s in (PASS, FAIL, NOT_JUDGED, ERROR)
                     if counts[s] or s in (PASS, FAIL))
    rows = [(o.expectation.text, read_text(o),
             f"{o.status} ({o.reason})" if o.status == NOT_JUDGED else o.status)
            for o in outcomes]
    table = text_table(("expectation", "read", "result"), rows, align="lll", rule=True)
    n = len(outcomes)
    return [f"Checks ({n} expectation{'' if n == 1 else 's'}: {said}):"] + [
        t.rstrip() for t in table]
