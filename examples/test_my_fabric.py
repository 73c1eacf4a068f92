"""End-to-end tests of your own, with the testbed's pytest plugin (installed with the
package: the fixture ``zcube_fabric`` needs no import and no conftest.py).

Copy this file anywhere and run it with plain pytest from the project's .venv:

    sudo .venv/bin/python -m pytest -q test_my_fabric.py

As root each test brings a real fabric up (Mininet hosts, Open vSwitch, the controller
installing the routes), verifies it, and tears it down, also when the test fails; without
root or Open vSwitch the tests are skipped with one line saying why.
"""
import pytest

MB = 1_000_000


@pytest.mark.parametrize("builder, params, switch", [
    ("zcube", {"n": 4, "gpus_per_server": 4}, "a1"),     # one switch of group A
    ("roft", {"servers": 4, "gpus_per_server": 4}, "s0"),  # one spine of the Clos
])
def test_a_pair_delivers_through_a_switch_failure(zcube_fabric, builder, params, switch):
    running = zcube_fabric(builder, **params)     # up, and verified on the switches
    src, dst = "g0", "g5"                         # two GPUs of different servers and rails

    # the paths the switches carry g0 -> g5 on, each from GPU to GPU through the switch
    paths = running.path(src, dst)
    assert paths and all(p[0] == src and p[-1] == dst for p in paths)
    assert any(switch in p for p in paths)

    # one KV transfer over real TCP, checked byte for byte
    assert running.transfer(src, dst, MB)["verified"]

    # fail the switch: the controller reroutes, the pair still delivers, around it
    running.fail(switch)
    assert running.failed["switches"] == [switch]
    assert all(switch not in p for p in running.path(src, dst))
    row = running.transfer(src, dst, MB)
    assert row["verified"] and row["status"] == "ok"
    assert running.verify().ok

    running.restore()
    assert not running.failed
    assert any(switch in p for p in running.path(src, dst))
