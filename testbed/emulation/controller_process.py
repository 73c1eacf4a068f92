"""The emulation's controller as a process of its own: launched on free loopback ports with
a fresh REST token, awaited, asked for its status, and killed or restarted; a mixin of
:class:`testbed.emulation.emulation.Emulation`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

from testbed.emulation.agents import REPO, EmulationError
from testbed.emulation.machine_state import free_ports
from testbed.emulation.pin_requests import controller_token, post_pins


def controller_pythonpath(policy) -> str:
    """The controller process's PYTHONPATH: the folder a ``module:function`` policy's module
    was found in (beside the scenario, the working folder) first, then the repository, the
    working folder and this process's path, so that it imports the same module."""
    folder = getattr(policy, "folder", None)
    path = ([folder] if folder else []) + [REPO, os.getcwd()] + [p for p in sys.path if p]
    return os.pathsep.join(dict.fromkeys(path))


class ControllerProcess:
    """The controller's process and REST port; uses the emulation's ``record``, ``table``,
    ``runtime``, ``pins`` and ``log``."""

    def _start_controller(self, fabric_file: str, ports: tuple | None = None) -> None:
        for attempt in range(3):
            self._launch_controller(fabric_file, ports)
            try:
                return self._await_controller()
            except EmulationError as err:     # a port chosen free was taken before the bind:
                if ports or attempt == 2 or "Address already in use" not in str(err):
                    raise                     # choose again (not when the ports were given)

    def _launch_controller(self, fabric_file: str, ports: tuple | None = None) -> None:
        self.of_port, self.rest_port = ports or free_ports(2)
        cmd = [sys.executable, "-W", "ignore", "-m", "controller.launch", "--fabric", fabric_file,
               "--policy", self.table.policy_name, "--of-port", str(self.of_port),
               "--rest-port", str(self.rest_port)]
        if self.runtime:
            cmd += ["--runtime", self.runtime]
        logf = open(self.record.path("controller.log"), "a")
        path = controller_pythonpath(getattr(self.table, "policy", None))
        env = dict(os.environ, PYTHONPATH=path, **controller_token(self))
        self.controller = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=REPO,
                                           env=env, start_new_session=True)
        logf.close()
        self.record.add_pid(self.controller.pid, "controller")

    def _await_controller(self) -> None:
        """Wait until the controller answers (30 s at most)."""
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.controller.poll() is not None:
                raise EmulationError(f"the controller exited; see "
                                     f"{self.record.path('controller.log')}:\n"
                                     + self.controller_log(8))
            try:
                self.status()
                self.log(f"controller ({self.status()['runtime']}) on 127.0.0.1:{self.of_port}, "
                         f"REST on 127.0.0.1:{self.rest_port}")
                return
            except OSError:
                time.sleep(0.2)
        raise EmulationError("the controller did not answer within 30 s")

    def controller_log(self, lines: int = 20) -> str:
        try:
            with open(self.record.path("controller.log")) as f:
                return "".join(f.readlines()[-lines:])
        except (OSError, AttributeError):
            return ""

    def status(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.rest_port}/zcube/status",
                                    timeout=5) as r:
            return json.load(r)

    def _wait_installed(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            st = self.status()["switches"]
            if all(s["installed"] for s in st.values()):
                return
            time.sleep(0.1)
        missing = [n for n, s in st.items() if not s["installed"]]
        raise EmulationError(f"switches without flows after {timeout:.0f} s: {', '.join(missing)}")

    def kill_controller(self) -> None:
        """SIGKILL the controller, as a crash would; the switches keep their flows."""
        if self.controller is not None:
            self.controller.kill()
            self.controller.wait()
            self.controller = None

    def start_controller(self, timeout: float = 60) -> float:
        """A new controller on the same ports; waits until it has resynchronised every switch
        (delete all, install the computed state, barrier) and holds the pins.  Seconds taken."""
        t0 = time.time()
        self._start_controller(self.record.path("fabric.json"), (self.of_port, self.rest_port))
        self._wait_installed(timeout)
        if self.pins:
            post_pins(self, self.pins)
        return time.time() - t0
