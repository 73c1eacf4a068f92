"""One entry to the experiment pipeline for every verb (``zcube run``, ``demo``, ``crossval``,
``up --kv``): a scenario in, run folders and an exit status out.
"""
from __future__ import annotations

import os
import sys

from testbed.core.backend import RunError
from testbed.errors import UsageError

SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scenarios")
# every exit status of a run (docs/reference.md, Exit status)
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
EXIT_BAD_INPUT, EXIT_EXPECT_FAILED, EXIT_NOT_JUDGED = 2, 3, 4
# from the least serious to the most: a run exits with the most serious of its outcomes
SERIOUSNESS = (EXIT_OK, EXIT_NOT_JUDGED, EXIT_EXPECT_FAILED, EXIT_FAILED, EXIT_BAD_INPUT,
               EXIT_INTERRUPTED)


def log(msg: str) -> None:
    print(f"[zcube] {msg}", file=sys.stderr, flush=True)


def most_serious(*codes: int) -> int:
    """The most serious of exit statuses (:data:`SERIOUSNESS`; one it does not list counts
    as a failed run)."""
    return max(codes, key=lambda c: SERIOUSNESS.index(c if c in SERIOUSNESS else EXIT_FAILED))


def shipped(name: str) -> str | None:
    """The path of the shipped scenario called ``name``, if there is one."""
    path = os.path.join(SCENARIOS, name + ".yaml")
    return path if os.path.isfile(path) else None


def shipped_names() -> list[str]:
    """Names of the shipped scenarios (``scenarios/*.yaml``), demo first."""
    names = sorted(f[:-5] for f in os.listdir(SCENARIOS) if f.endswith(".yaml"))
    return sorted(names, key=lambda n: n != "demo")


def load_scenario(path: str):
    """A validated scenario from a file, or a shipped one by name; UsageError if bad."""
    from testbed.experiment.scenario import ScenarioError, load
    if not os.path.exists(path) and shipped(path):
        path = shipped(path)
    try:
        return load(path)
    except ScenarioError as err:
        raise UsageError(str(err)) from None


def prepare_out(out: str, flag: str = "-o") -> None:
    """Refuse, before anything starts, an output path that cannot become a writable folder
    (missing parents are created)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"{flag} {out}: exists and is not a folder")
    parent = os.path.abspath(out)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"{flag} {out}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {out}: {parent} is not writable")


def prepare_backend(backend, runtime: str | None = None) -> None:
    """Check what the backend (a name or a Backend) needs before anything starts (root,
    OVS, Mininet)."""
    if getattr(backend, "name", backend) != "emulation":
        return
    from testbed.emulation.prereq import check_can_emulate, quiet_mininet, terminate_on_sigterm
    check_can_emulate(runtime)
    terminate_on_sigterm()
    quiet_mininet()


def check_policies(sc, backend) -> None:
    """Refuse, before anything starts, a policy or a fabric ``backend`` cannot run
    (``spray:all``, the even split over every path, exists on the flow-level model only)."""
    from controller.routing import MODEL_ONLY
    name = getattr(backend, "name", backend)
    if name == "model":
        return
    for spec in sc.fabrics:
        if spec.policy in MODEL_ONLY:
            raise UsageError(f"fabric {spec.name!r}: policy {spec.policy} (the even split "
                             f"over every path) runs on the model backend only; use spray:K "
                             f"on the {getattr(backend, 'name', backend)} backend, or "
                             f"--backend model")


def all_verified(summaries: dict) -> bool:
    """Every transfer verified, except those a fault cut off (failed by design)."""
    def cut(s):
        return sum(f.get("transfers_cut_off", 0) for f in s.get("faults") or [])
    return all(s["transfers_verified"] + cut(s) == s["transfers_total"]
               for s in summaries.values())


def run_and_check(sc, out: str, backend: str | None = None, force: bool = False,
                  htsim_dir: str | None = None, model_options: dict | None = None,
                  progress=None):
    """Run a validated scenario into ``out``: ``(exit status, {run: summary})``, the status
    failed where a transfer did not verify or a fault could not be injected; ``progress``
    takes the progress lines (None: :func:`log`, to stderr)."""
    say = progress or log
    from testbed.experiment.runner import run_scenario
    backend = backend or sc.backend
    check_policies(sc, backend)
    prepare_backend(backend)
    os.makedirs(out, exist_ok=True)
    try:
        summaries = run_scenario(sc, out, backend=backend, force=force, log=say,
                                 htsim_dir=htsim_dir, model_options=model_options)
    except RunError as err:
        say(f"error: {err}")
        return EXIT_FAILED, {}
    except KeyboardInterrupt:
        say("interrupted; torn down")
        return EXIT_INTERRUPTED, {}
    if not all_verified(summaries):
        say("some transfers did not complete verified; see 'failed' in each summary.json")
        return EXIT_FAILED, summaries
    missed = {n: s["faults_not_run"] for n, s in summaries.items()
              if s.get("faults_not_run")}
    if missed:
        say("the fault schedule did not run as written: " + ", ".join(
            f"{n}: {k} event(s) could not be run" for n, k in missed.items())
            + "; see 'faults' (error) in each summary.json")
        return EXIT_FAILED, summaries
    return EXIT_OK, summaries
