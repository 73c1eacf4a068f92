"""What every benchmark shares: a time limit on each step that could hang, the target
printed beside each figure, and a one-line refusal where a benchmark cannot run here (not
root, no ns-3).  A step past its limit ends the benchmark with one line on stderr; the
``with`` blocks it leaves (an emulation, Open vSwitch) still tear down on the way out."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time


def name() -> str:
    """The running benchmark's name (``bench_x``), for its messages."""
    return os.path.splitext(os.path.basename(sys.argv[0] or "benchmark"))[0]


def fail(message: str, code: int = 2) -> None:
    """Stop with ``message`` as one line on stderr (no traceback)."""
    print(f"{name()}: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


class StepTimeout(SystemExit):
    """A step ran past its limit (a SystemExit, so no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def limit(seconds: float, what: str):
    """Run the block for ``seconds`` at most, then raise :class:`StepTimeout` with a one-line
    message naming ``what``.  SIGALRM, so the main thread only; inside an enclosing limit
    that ends sooner, that one holds."""
    outer = signal.getitimer(signal.ITIMER_REAL)[0]
    if outer and outer <= seconds:
        yield
        return

    def expire(signum, frame):
        raise StepTimeout(f"{name()}: {what}: not done within {seconds:g} s")
    before = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        if outer:          # the enclosing limit keeps what is left of its time
            signal.setitimer(signal.ITIMER_REAL,
                             max(outer - (time.monotonic() - started), 0.001))


def target(met: bool | None, text: str) -> str:
    """``target TEXT: met`` or ``MISSED`` (``-`` where nothing was measured), the words
    ``python -m benchmarks`` counts."""
    return f"target {text}: {'-' if met is None else 'met' if met else 'MISSED'}"


def terminate_cleanly() -> None:
    """A SIGTERM (``python -m benchmarks`` past a benchmark's limit, or ``kill``) ends the
    benchmark as Ctrl-C does, through its teardown, not on the spot.  A forked copy of this
    process (pyroute2 forks to enter namespaces and ends its children with SIGTERM) just
    exits: run there, the teardown would hang the benchmark."""
    owner = os.getpid()

    def stop(signum, frame):
        if os.getpid() != owner:
            os._exit(128 + signum)
        raise SystemExit(f"{name()}: terminated")
    signal.signal(signal.SIGTERM, stop)


def need_root() -> None:
    """Refuse in one line unless root (the emulation starts Open vSwitch and Mininet); then
    make SIGTERM tear down as Ctrl-C does."""
    if os.geteuid() != 0:
        fail(f"needs root: the emulation starts Open vSwitch and Mininet "
             f"(sudo .venv/bin/python -m benchmarks.{name()})")
    terminate_cleanly()


def need_ns3():
    """The ns-3 bindings, or a one-line refusal where the ns3 package does not import."""
    from testbed.ns3.simulate import ns3
    try:
        return ns3()
    except RuntimeError as err:
        fail(str(err))


def end_process(proc, grace_s: float) -> None:
    """Stop a child that tears its fabric down on SIGTERM: SIGTERM, then SIGKILL after
    ``grace_s`` seconds if it is still there (nothing if it has ended)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
