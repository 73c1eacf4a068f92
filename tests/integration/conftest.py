"""Integration tests: real Mininet hosts, Open vSwitch, the controller.  Root only.

One OVS serves the whole session (started here when none runs, stopped at the end); each
test brings its own fabric up and tears it down, also when it fails.
"""
import os
import shutil

import pytest

from testbed.emulation.ovs import Ovs


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (make test runs as root in CI)"
    for tool in ("ovs-vsctl", "ovs-vswitchd", "mnexec"):
        if not shutil.which(tool):
            return f"{tool} missing (make setup installs it)"
    return None


@pytest.fixture(scope="session")
def ovs():
    why = _missing()
    if why:
        pytest.skip(why)
    from mininet.log import setLogLevel
    setLogLevel("warning")
    service = Ovs().ensure()
    service.export_env()
    yield service
    service.stop()


@pytest.fixture
def emulate(ovs):
    """``emulate(fabric, **options)`` -> an Emulation that is up; torn down after the test."""
    from testbed.emulation.emulation import Emulation
    started = []

    def up(fabric, **options):
        options.setdefault("link_mbps", 100)
        emu = Emulation(fabric, ovs=ovs, **options)
        started.append(emu)
        emu.__enter__()
        return emu
    yield up
    for emu in started:
        emu.down()
