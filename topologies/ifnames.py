"""Interface and bridge names of a Fabric's nodes, the same in Mininet and containerlab.

A host's NIC port ``p`` is interface ``<host>-eth<p>`` inside the host (``g3-eth1``).  A
switch is an Open vSwitch bridge named with a prefix (switch ``a0`` is bridge ``zca0``) and
its OpenFlow port ``p`` is interface ``<bridge>-eth<p>`` (``zca0-eth5``).  Those interfaces
live in the root namespace, which is why they carry the bridge name: they must be unique on
the machine (and, as Linux requires, at most 15 characters long).
"""
from __future__ import annotations

BRIDGE_PREFIX = "zc"     # the testbed's prefix of bridge names


def host_ifname(host: str, port: int) -> str:
    """Interface of NIC port ``port`` inside host ``host``: ``g3-eth1``."""
    return f"{host}-eth{port}"


def bridge_name(switch: str, prefix: str = BRIDGE_PREFIX) -> str:
    """Open vSwitch bridge of ``switch``: ``zca0``."""
    return f"{prefix}{switch}"


def switch_ifname(switch: str, port: int, prefix: str = BRIDGE_PREFIX) -> str:
    """Root-namespace interface of OpenFlow port ``port`` of ``switch``: ``zca0-eth5``."""
    return f"{bridge_name(switch, prefix)}-eth{port}"
