"""Interface and bridge names of a Fabric's nodes, the same in Mininet and containerlab:
``g3-eth1`` inside host g3, bridge ``zca0`` for switch a0 and ``zca0-eth5`` for its port 5."""
from __future__ import annotations

BRIDGE_PREFIX = "zc"     # the testbed's prefix of bridge names


def host_ifname(host: str, port: int) -> str:
    """Interface of NIC port ``port`` inside host ``host``: ``g3-eth1``."""
    return f"{host}-eth{port}"


def nvlink_ifname(host: str) -> str:
    """The NVLink interface inside host ``host``: ``g3-nv``."""
    return f"{host}-nv"


def bridge_name(switch: str, prefix: str = BRIDGE_PREFIX) -> str:
    """Open vSwitch bridge of ``switch``: ``zca0``."""
    return f"{prefix}{switch}"


def switch_ifname(switch: str, port: int, prefix: str = BRIDGE_PREFIX) -> str:
    """Root-namespace interface of OpenFlow port ``port`` of ``switch``: ``zca0-eth5``."""
    return f"{bridge_name(switch, prefix)}-eth{port}"
