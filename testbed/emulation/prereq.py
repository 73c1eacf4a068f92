"""What an emulated run needs before anything starts, and how it is stopped."""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal

from testbed.errors import UsageError


def check_can_emulate(runtime: str | None = None) -> None:
    """Refuse before anything starts: not root, tools missing, runtime not installed."""
    if os.geteuid() != 0:
        raise UsageError("the emulation needs root (network namespaces, Open vSwitch); "
                         "run it with sudo, or use --backend model")
    for tool in ("ovs-vsctl", "ovs-vswitchd", "mnexec", "tc", "ip"):
        if not shutil.which(tool):
            raise UsageError(f"{tool} not found: run 'make setup' first")
    if importlib.util.find_spec("mininet") is None:
        raise UsageError("Mininet is not importable: run 'make setup' (Debian's mininet package)")
    wanted = {"ryu": "ryu", "os-ken": "os_ken"}
    names = [runtime] if runtime else list(wanted)
    if not any(importlib.util.find_spec(wanted[n]) for n in names):
        raise UsageError(f"controller runtime {' or '.join(names)} is not installed: "
                         f"run 'make setup'")


def terminate_on_sigterm() -> None:
    """SIGTERM/SIGHUP tear the emulation down like Ctrl-C.  A forked copy of this process
    (pyroute2 forks to enter namespaces, and ends its children with SIGTERM) must not run
    the teardown: it just exits."""
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:
            os._exit(128 + signum)
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def quiet_mininet(cli: bool = False) -> None:
    """Mininet prints only warnings, except at its own CLI."""
    from mininet.log import setLogLevel
    setLogLevel("output" if cli else "warning")
