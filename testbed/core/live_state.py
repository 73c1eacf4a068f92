"""What the live view shows while the testbed runs: one thread-safe store that the pipeline and
the emulation publish to and the web server (:mod:`testbed.analysis.live_server`) reads.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Optional

PHASES = ("idle", "bring-up", "verification", "calibration", "workload", "teardown", "down")
NO_FAILURES = {"switches": [], "host_ports": [], "links": []}


class Live:
    """The store: publishing costs a lock and a few assignments, so publishers always publish;
    ``version`` grows with every change, which :meth:`wait` (the event stream) blocks on."""

    def __init__(self):
        self._cond = threading.Condition()
        self.version = 0
        self._state: dict[str, Any] = {}
        self.emu = None                      # the Emulation that is up, for sampling/control
        self.fabric = None                   # the Fabric of the run in progress
        self.server = None                   # the web server, when one serves this state
        self.sampling = 0                    # run link samplers publishing now
        self.failure_events = 0              # fail/restore calls so far, from anywhere
        self._state["runs_done"] = []        # the runs of this command finished so far
        self.reset()

    def reset(self, fabric=None, run: Optional[str] = None) -> None:
        """A new fabric (or none): everything shown so far is forgotten."""
        self.fabric, self._fcts, self._base = fabric, [], 0
        doc = fabric.to_json_dict() if fabric is not None else None
        self.update(started=time.time(), fabric=doc,
                    fabric_label=fabric.label if fabric is not None else None, run=run,
                    phase="idle", since=time.time(), links=[],
                    links_source=None, transfers_done=0, transfers_total=0, fct_ms=None,
                    failures=dict(NO_FAILURES))

    def update(self, **fields) -> None:
        with self._cond:
            if "phase" in fields and fields["phase"] not in PHASES:
                raise ValueError(f"unknown phase {fields['phase']!r}")
            if "phase" in fields and fields["phase"] != self._state.get("phase"):
                fields.setdefault("since", time.time())
            self._state.update(fields)
            self.version += 1
            self._cond.notify_all()

    def phase(self, phase: str, run: Optional[str] = None) -> None:
        self.update(phase=phase, **({"run": run} if run is not None else {}))

    # -- what the emulation tells ------------------------------------------------------------
    def entering(self, emu) -> None:
        """``emu`` starts coming up (a new fabric unless the run announced it)."""
        if self.fabric is not emu.fabric:
            self.reset(emu.fabric)
        self.update(phase="bring-up")

    def attach(self, emu) -> None:
        """``emu`` is up: the view samples and controls it."""
        self.emu = emu
        self.update(phase="idle")

    def leaving(self, emu) -> None:
        if self.emu is emu:
            self.emu = None
        self.update(phase="teardown")

    def failures_now(self, elements: dict) -> None:
        """What is down now (``Failures.describe``'s three lists)."""
        self.failure_events += 1
        self.update(failures={k: list(elements.get(k, [])) for k in NO_FAILURES})

    # -- what a run tells --------------------------------------------------------------------
    def workload_started(self, transfers: int) -> None:
        """A workload of ``transfers`` starts (added to the run's total so far)."""
        with self._cond:
            self._base = self._state["transfers_done"]
        self.update(phase="workload",
                    transfers_total=self._state["transfers_total"] + transfers)

    def transfers_progress(self, done_share: float, rows: list[dict] | None = None) -> None:
        """The workload in progress has sent this share of its flows; ``rows``: its transfer
        rows so far, for the FCT so far."""
        total = self._state["transfers_total"] - self._base
        done = self._base + round(total * min(max(done_share, 0.0), 1.0))
        fields = {"transfers_done": done} if done != self._state["transfers_done"] else {}
        if rows:
            fields["fct_ms"] = self._fct(rows)
        if fields:
            self.update(**fields)

    def workload_finished(self, rows: list[dict]) -> None:
        """The workload's transfer rows: done, and the FCT so far over the run's rows."""
        fct = self._fct(rows)
        with self._cond:
            self._fcts += _fcts(rows)
        self.update(phase="idle", transfers_done=self._base + len(rows), fct_ms=fct)

    def _fct(self, rows: list[dict]) -> dict | None:
        """P50 and P99 FCT (ms) over the run's finished workloads and these rows."""
        from testbed.core.metrics import percentile
        fcts = self._fcts + _fcts(rows)
        if not fcts:
            return None
        return {"p50": round(percentile(fcts, 50), 2), "p99": round(percentile(fcts, 99), 2),
                "n": len(fcts)}

    def get(self, key: str):
        with self._cond:
            return self._state.get(key)

    def status(self) -> dict:
        """``GET /api/status``: run, phase, transfers, FCT so far, failures."""
        with self._cond:
            s = self._state
            return {"run": s["run"], "fabric": s["fabric_label"], "phase": s["phase"],
                    "phase_s": round(time.time() - s["since"], 3),
                    "transfers": {"done": s["transfers_done"], "total": s["transfers_total"]},
                    "fct_ms": s["fct_ms"], "failures": s["failures"],
                    "links_source": s["links_source"],
                    "runs_done": list(s["runs_done"]), "version": self.version}

    def links(self) -> list[dict]:
        """``GET /api/links``: the latest window, per directed link ``src``, ``dst``,
        ``mbps``, ``util``, ``t_s`` (the columns links.csv has)."""
        with self._cond:
            return list(self._state["links"])

    def publish_links(self, rows: list[dict], source: str) -> None:
        """One sampling window's rows (``source``: ``run`` for the run's own sampler, whose
        windows links.csv keeps; ``idle`` for the view's own between workloads)."""
        if source == "idle" and self.sampling:
            return                               # a run's sampler speaks for this time
        self.update(links=[{k: r[k] for k in ("src", "dst", "mbps", "util", "t_s")}
                           for r in rows],
                    links_source=source)

    def sampler_started(self) -> None:
        with self._cond:
            self.sampling += 1

    def sampler_stopped(self) -> None:
        with self._cond:
            self.sampling = max(0, self.sampling - 1)

    def wait(self, version: int, timeout: float) -> int:
        """Block until ``version`` is passed (or ``timeout``); the version now."""
        with self._cond:
            self._cond.wait_for(lambda: self.version != version, timeout=timeout)
            return self.version


def _fcts(rows: list[dict]) -> list[float]:
    return [r["fct_ms"] for r in rows if r.get("verified") and r.get("fct_ms") is not None]


current = Live()
