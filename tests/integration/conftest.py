"""Integration tests: real Mininet hosts, Open vSwitch, the controller.  Root only.

The fixtures are the ``zcube`` pytest plugin's (testbed/pytest_plugin.py), as another
project's tests would use them: one OVS serves the whole session; each test brings its own
fabric up and tears it down, also when it fails, but for tests that share their module's
fabric (``shared=True``), which is reset after each and torn down at the module's end.
"""
import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def ovs(zcube_ovs):
    """The session's Open vSwitch: the ``zcube`` pytest plugin's."""
    return zcube_ovs


@pytest.fixture
def emulate(zcube_fabric):
    """``emulate(fabric, **options)`` -> an Emulation that is up (not yet verified), through
    the plugin's ``zcube_fabric``: torn down after the test; with ``shared=True`` a test
    gets the module's fabric of the same kind, policy and options if one is up (bring-up is
    most of such a test's time), reset after each test."""
    def up(fabric, shared=False, policy=None, link_mbps=100, **options):
        return zcube_fabric(fabric, policy=policy, link_mbps=link_mbps, verify=False,
                            shared=shared, options=options).emulation
    return up
