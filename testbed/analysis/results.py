"""A finished scenario's results shown: the comparison printed and, if asked, the report built;
:func:`run_and_present` runs the scenario first and judges its :class:`Checks` after."""
from __future__ import annotations

from typing import Optional

from testbed.errors import UsageError


def present(out: str, report: bool = True) -> None:
    """Print the comparison of the runs in ``out``; build ``out/report.html`` if asked."""
    from testbed.analysis import outage, serving_curve
    from testbed.analysis.compare import comparison, load_runs, to_text
    runs = load_runs([out])
    print(to_text(comparison(runs)), end="")
    print(outage.to_text(outage.record(runs, out)), end="")
    print(serving_curve.to_text(serving_curve.record(runs, out)), end="")
    if report:
        from testbed.analysis.report import build_report
        print(f"report: {build_report(out)}")


def run_and_present(sc, out: str, backend: str | None = None, force: bool = False,
                    htsim_dir: str | None = None, report: bool = True,
                    model_options: dict | None = None, checks=None) -> int:
    """Run a scenario through the pipeline, then present it and, given ``checks``
    (:class:`Checks`), judge it; the exit status."""
    from testbed.experiment.pipeline import EXIT_INTERRUPTED, run_and_check
    code, summaries = run_and_check(sc, out, backend, force, htsim_dir, model_options)
    if summaries and code != EXIT_INTERRUPTED:
        present(out, report)
    if checks is not None:
        code = checks.judge(sc, out, backend or sc.backend, code, summaries)
    return code


class Checks:
    """One command's checks (:mod:`testbed.analysis.checks`): its expectations, judged over
    every scenario it runs, and the suites of the JUnit file it writes to ``junit_path``,
    if any (:mod:`testbed.analysis.junit`)."""

    def __init__(self, expectations=(), junit_path: Optional[str] = None):
        self.expectations = list(expectations)
        self.junit_path = junit_path
        self.suites: list = []
        self.errors: list[str] = []

    def judge(self, sc, out: str, backend: str, code: int, summaries: dict) -> int:
        """After ``sc`` ran into ``out`` with exit status ``code``: judge the expectations,
        print the check table (when there are any), keep the scenario's suite; the exit
        status, the most serious of ``code`` and the expectations'."""
        from testbed.analysis.checks import ERROR, check_lines, status_of
        from testbed.analysis.junit import suite
        from testbed.experiment.pipeline import EXIT_INTERRUPTED, most_serious
        outcomes = self._outcomes(out, code, summaries)
        if self.expectations and code != EXIT_INTERRUPTED:
            print("\n" + "\n".join(check_lines(outcomes)), flush=True)
        self.errors += [o.reason for o in outcomes if o.status == ERROR]
        code = most_serious(code, status_of(outcomes))
        self.suites.append(suite(sc, out, backend, code, summaries, outcomes,
                                 {s.name for s in self.suites}))
        return code

    def _outcomes(self, out: str, code: int, summaries: dict) -> list:
        from testbed.analysis.checks import NOT_JUDGED, Outcome, judge_all
        from testbed.experiment.pipeline import EXIT_INTERRUPTED
        if not self.expectations:
            return []
        if code != EXIT_INTERRUPTED and summaries:
            from testbed.analysis.compare import load_runs
            runs = [r for r in load_runs([out]) if r["run"] in summaries]
            return judge_all(self.expectations, runs)
        why = "interrupted" if code == EXIT_INTERRUPTED else "the run stopped without results"
        return [Outcome(e, NOT_JUDGED, [], why) for e in self.expectations]

    def finish(self) -> None:
        """Write the JUnit file (if asked); then UsageError (exit status 2) for the first
        expectation that read a path the summaries do not have."""
        if self.junit_path:
            from testbed.analysis.junit import write_junit
            write_junit(self.suites, self.junit_path)
            print(f"junit: {self.junit_path}", flush=True)
        if self.errors:
            raise UsageError(self.errors[0])
