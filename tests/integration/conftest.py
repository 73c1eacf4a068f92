"""Integration tests: real Mininet hosts, Open vSwitch, the controller.  Root only.

One OVS serves the whole session (started here when none runs, stopped at the end); each
test brings its own fabric up and tears it down, also when it fails, but for tests that
share their module's fabric (``emulate(fabric, shared=True)``), which is reset after each
and torn down at the module's end.
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


@pytest.fixture(scope="module")
def _shared(ovs):
    """Fabrics a module's tests share (``emulate(fabric, shared=True)``); down at its end."""
    live: dict = {}
    yield live
    for emu in live.values():
        emu.down()


def _reusable(emu) -> bool:
    """Put a shared fabric back as it came up (every failed element restored); False when
    that cannot be done or its controller is gone: the next test then gets a new one."""
    try:
        if emu.failed:
            emu.restore()
        return not emu.failed and emu.controller is not None and emu.controller.poll() is None
    except Exception:  # noqa: BLE001 - a fabric that cannot be reset is not reused
        return False


@pytest.fixture
def emulate(ovs, _shared):
    """``emulate(fabric, **options)`` -> an Emulation that is up; torn down after the test.
    With ``shared=True`` a test that leaves nothing behind but failed elements gets the
    module's fabric of the same kind, policy and options if one is up (brought up once
    and reset after each test: bring-up is most of such a test's time)."""
    from controller.routing import default_policy
    from testbed.emulation.emulation import Emulation
    started, borrowed = [], []

    def up(fabric, shared=False, **options):
        options.setdefault("link_mbps", 100)
        options.setdefault("policy", default_policy(fabric))
        key = (fabric.label, tuple(sorted((k, repr(v)) for k, v in options.items())))
        if shared and key in _shared:
            borrowed.append(key)
            return _shared[key]
        for other in list(_shared):          # one emulation at a time on a machine
            _shared.pop(other).down()
        emu = Emulation(fabric, ovs=ovs, **options)
        (borrowed if shared else started).append(key if shared else emu)
        if shared:
            _shared[key] = emu
        emu.__enter__()
        return emu
    yield up
    for emu in started:
        emu.down()
    for key in borrowed:
        if key in _shared and not _reusable(_shared[key]):
            _shared.pop(key).down()
