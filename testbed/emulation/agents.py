"""The host agents (:mod:`traffic.agent`), one process per emulated host, spoken to in JSON
lines over stdin and stdout; and the emulation's own error."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from testbed.emulation.machine_state import RunRecord

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class EmulationError(RuntimeError):
    pass


class Agent:
    """The host agent process of one emulated host, spoken to over its stdin/stdout."""

    def __init__(self, node, record: RunRecord | None, settings_env: dict | None = None):
        # the emulation's settings reach the agent in its environment (traffic/kvwire.py)
        env = dict(os.environ, PYTHONPATH=REPO, **(settings_env or {}))
        # -S: no site-packages (the agent needs the standard library and the repository
        # only), which spares each of a fabric's agents some 25 ms of start-up
        self.proc = node.popen([sys.executable, "-S", "-u", "-m", "traffic.agent"], cwd=REPO,
                               env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, errors="replace")
        if record is not None:
            record.add_pid(self.proc.pid, f"agent {node.name}")
        self.name = node.name
        self.lock = threading.Lock()            # one command and its answer at a time

    def wait_ready(self) -> None:
        line = self.proc.stdout.readline()
        if not line or not json.loads(line).get("ready"):
            raise EmulationError(f"agent on {self.name} did not start")

    def post(self, cmd: dict) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise EmulationError(f"agent on {self.name} exited")
        return json.loads(line)

    def call(self, cmd: dict) -> dict:
        with self.lock:
            self.post(cmd)
            return self.reply()

    def stop(self) -> None:
        self.quit()
        self.wait()

    def quit(self) -> None:
        """Ask the agent to exit (without waiting: stop many at once, then wait each)."""
        if self.proc.poll() is None:
            try:
                self.post({"op": "quit"})
            except OSError:
                pass

    def wait(self, timeout: float = 2.0) -> None:
        """Wait for the agent to exit; kill it after ``timeout`` seconds."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
