"""What a finished scenario shows: the comparison table and, if asked, the report."""
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
    """Carry a scenario through the pipeline, then present it; the exit status."""
    from testbed.experiment.pipeline import EXIT_INTERRUPTED, carry_scenario
    code, summaries = carry_scenario(sc, out, backend, force, htsim_dir, model_options)
    if summaries and code != EXIT_INTERRUPTED:
        present(out, report)
    return code
