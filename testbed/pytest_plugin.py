"""The pytest plugin ``zcube``, installed with the package: fixtures that bring fabrics up on
the emulation for a test and tear them down after it, also when the test fails::

    def test_zcube_survives_a_switch(zcube_fabric):
        running = zcube_fabric("zcube", n=4, gpus_per_server=4)
        running.fail("a1")
        assert running.transfer("g0", "g5", 1_000_000)["verified"]

Where the machine cannot emulate (not root, no Open vSwitch or Mininet), the tests that use
the fixtures are skipped with one line saying why.  docs/api.md describes the fixtures.
"""
from __future__ import annotations

import os

import pytest


def cannot_emulate() -> str | None:
    """Why this machine cannot bring a fabric up (None: it can): the checks every
    emulation makes before it starts."""
    if os.geteuid() != 0:
        return "zcube: emulating a fabric needs root (Mininet hosts, Open vSwitch)"
    from testbed.emulation.prereq import check_can_emulate
    from testbed.errors import UsageError
    try:
        check_can_emulate()
    except UsageError as err:
        return f"zcube: {err}"
    return None


@pytest.fixture(scope="session")
def zcube_ovs():
    """The Open vSwitch every fabric of the test session runs on: the system's where one
    answers, else one the testbed starts now and stops at the session's end."""
    why = cannot_emulate()
    if why:
        pytest.skip(why)
    from testbed.emulation.ovs import Ovs
    from testbed.emulation.prereq import quiet_mininet
    quiet_mininet()
    service = Ovs().ensure()
    service.export_env()
    yield service
    service.stop()


@pytest.fixture(scope="module")
def _zcube_shared(zcube_ovs):
    """Fabrics a module's tests share (``shared=True``), torn down at the module's end."""
    live: dict = {}
    yield live
    for running in live.values():
        running.emulation.down()


def _reusable(running) -> bool:
    """Put a shared fabric back as it came up (every failed element restored); False when
    that cannot be done or its controller is gone: the next test then gets a new one."""
    emu = running.emulation
    try:
        if emu.failed:
            emu.restore()
        return not emu.failed and emu.controller is not None and emu.controller.poll() is None
    except Exception:  # noqa: BLE001 - a fabric that cannot be reset is not reused
        return False


def _spec(fabric, policy, params: dict):
    """(Fabric, policy) from a builder name or function with ``params``, a Fabric, or a
    scenario's fabric entry (a mapping with ``builder``, ``params``, ``policy``)."""
    from testbed import api
    if isinstance(fabric, dict):
        entry = dict(fabric)
        params = {**(entry.get("params") or {}), **params}
        policy = policy if policy is not None else entry.get("policy")
        fabric = entry["builder"]
    return api.fabric(fabric, **params), policy


@pytest.fixture
def zcube_fabric(zcube_ovs, _zcube_shared):
    """``zcube_fabric(fabric, policy=None, link_mbps=100, verify=60, shared=False, **params)``
    -> a :class:`testbed.api.RunningFabric` that is up and verified (``verify`` paths
    traced; False: not verified).  ``fabric``: a builder name with its ``params``
    (``"zcube", n=4``), a ``Fabric``, or a scenario's fabric entry.  Torn down after the
    test; with ``shared=True`` the module's tests that ask for the same fabric share one
    bring-up, put back as it came up (failed elements restored) after each test."""
    from controller.routing import default_policy
    from testbed import api
    from testbed.emulation.emulation import Emulation
    started, borrowed = [], []

    def up(fabric, policy=None, link_mbps=100.0, verify=60, shared=False, options=None,
           **params):
        fab, policy = _spec(fabric, policy, params)
        options = dict(options or {}, link_mbps=link_mbps,
                       policy=api.policy_name(policy) or default_policy(fab))
        key = (fab.label, repr(fab.to_json_dict()),
               tuple(sorted((k, repr(v)) for k, v in options.items())))
        if shared and key in _zcube_shared:
            borrowed.append(key)
            return _zcube_shared[key]
        for other in list(_zcube_shared):        # one emulation at a time on a machine
            _zcube_shared.pop(other).emulation.down()
        emu = Emulation(fab, ovs=zcube_ovs, **options)
        running = api.RunningFabric(emu)
        if shared:
            _zcube_shared[key] = running
            borrowed.append(key)
        else:
            started.append(running)
        emu.__enter__()
        if verify is not False:
            found = running.verify(verify)
            if not found.ok:
                raise api.NotVerified(found)
        return running
    yield up
    for running in started:
        running.emulation.down()
    for key in borrowed:
        if key in _zcube_shared and not _reusable(_zcube_shared[key]):
            _zcube_shared.pop(key).emulation.down()
