"""A finished scenario's results shown: the comparison printed and, if asked, the report built;
:func:`run_and_present` runs the scenario first."""
from __future__ import annotations


def present(out: str, report: bool = True) -> None:
    """Print the comparison of the runs in ``out``; build ``out/report.html`` if asked."""
    from testbed.analysis.compare import comparison, load_runs, to_text
    print(to_text(comparison(load_runs([out]))), end="")
    if report:
        from testbed.analysis.report import build_report
        print(f"report: {build_report(out)}")


def run_and_present(sc, out: str, backend: str | None = None, force: bool = False,
                    htsim_dir: str | None = None, report: bool = True,
                    model_options: dict | None = None) -> int:
    """Run a scenario through the pipeline, then present it; the exit status."""
    from testbed.experiment.pipeline import EXIT_INTERRUPTED, run_and_check
    code, summaries = run_and_check(sc, out, backend, force, htsim_dir, model_options)
    if summaries and code != EXIT_INTERRUPTED:
        present(out, report)
    return code
