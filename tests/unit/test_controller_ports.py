"""The controller's ports: chosen distinct, and chosen again when one was taken before the
controller bound it (no root, nothing started)."""
import pytest

from testbed.emulation.agents import EmulationError
from testbed.emulation.emulation import Emulation
from testbed.emulation.machine_state import free_ports

TAKEN = EmulationError("the controller exited; see controller.log:\n"
                       "OSError: [Errno 98] Address already in use")


def test_ports_chosen_together_are_distinct():
    for _ in range(50):
        ports = free_ports(2)
        assert len(set(ports)) == 2 and all(1024 <= p < 65536 for p in ports)


def emulation(outcomes):
    emu = Emulation.__new__(Emulation)
    emu.launched = []
    emu._launch_controller = lambda fabric_file, ports: emu.launched.append(ports)

    def wait():
        got = outcomes.pop(0)
        if isinstance(got, Exception):
            raise got
    emu._await_controller = wait
    return emu


def test_a_port_taken_before_the_bind_is_chosen_again():
    emu = emulation([TAKEN, None])
    emu._start_controller("fabric.json")
    assert emu.launched == [None, None]                  # chosen afresh each time


def test_given_ports_other_errors_and_a_third_failure_are_not_retried():
    emu = emulation([TAKEN])
    with pytest.raises(EmulationError):                  # a restart keeps its ports
        emu._start_controller("fabric.json", (6653, 8080))
    assert emu.launched == [(6653, 8080)]
    emu = emulation([EmulationError("the controller exited: ImportError")])
    with pytest.raises(EmulationError):
        emu._start_controller("fabric.json")
    assert len(emu.launched) == 1
    emu = emulation([TAKEN, TAKEN, TAKEN])
    with pytest.raises(EmulationError):
        emu._start_controller("fabric.json")
    assert len(emu.launched) == 3
