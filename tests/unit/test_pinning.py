"""Pinning the datapath apart from the hosts' receive work ($ZCUBE_PIN=on), without root:
what it sets on which process and port, and that it leaves alone what it did not start."""
from types import SimpleNamespace

import pytest

import testbed.emulation.pinning as pinning
from topologies import zcube


def fake_emu(ours=True, datapath="user"):
    cmds = []
    node = SimpleNamespace(cmd=lambda c: cmds.append(c) or "")
    fab = zcube(2, 2)
    agents = {h.name: SimpleNamespace(proc=SimpleNamespace(pid=1000 + i))
              for i, h in enumerate(fab.hosts)}
    emu = SimpleNamespace(fabric=fab, datapath=datapath, ovs=SimpleNamespace(ours=ours),
                          agents=agents, net=SimpleNamespace(get=lambda name: node),
                          vswitchd_pid=lambda: 42)
    return emu, cmds


@pytest.fixture
def affinity(monkeypatch):
    """pid -> the CPUs it was given; the machine has CPUs 0-3."""
    given = {}
    monkeypatch.setattr(pinning.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(pinning, "set_affinity", lambda pid, cpus: given.__setitem__(pid, cpus)
                        or 3)
    return given


def test_off_by_default_nothing_is_touched(monkeypatch, affinity):
    monkeypatch.delenv("ZCUBE_PIN", raising=False)
    emu, cmds = fake_emu()
    assert pinning.pin(emu) == "" and not cmds and not affinity
    pinning.unpin(emu)
    assert not affinity


def test_the_datapath_gets_the_last_core_and_the_hosts_the_others(monkeypatch, affinity):
    monkeypatch.setenv("ZCUBE_PIN", "on")
    emu, cmds = fake_emu()
    said = pinning.pin(emu)
    assert affinity[42] == {3} and "CPU 3" in said
    assert all(affinity[a.proc.pid] == {0, 1, 2} for a in emu.agents.values())
    ports = sum(len(h.ports) for h in emu.fabric.hosts)
    assert len(cmds) == len(emu.fabric.hosts)
    assert sum(c.count("/queues/rx-0/rps_cpus") for c in cmds) == ports
    assert all(c.startswith("unshare -m sh -c ") and "echo 7 > " in c for c in cmds)
    pinning.unpin(emu)
    assert affinity[42] == {0, 1, 2, 3}                  # every core back


@pytest.mark.parametrize("ours, datapath", [(False, "user"), (True, "kernel")])
def test_a_datapath_the_testbed_did_not_start_is_left_alone(monkeypatch, affinity, ours,
                                                            datapath):
    monkeypatch.setenv("ZCUBE_PIN", "on")
    emu, cmds = fake_emu(ours, datapath)
    assert "no userspace datapath of ours" in pinning.pin(emu)
    pinning.unpin(emu)
    assert not affinity and not cmds


def test_masks_are_hexadecimal_bit_sets():
    assert (pinning.mask({0}), pinning.mask({0, 1, 2}), pinning.mask({4, 5})) == ("1", "7", "30")
