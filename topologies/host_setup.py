"""The commands that give a GPU host what the testbed's emulation gives it
(testbed/emulation/network.py), pure: each NIC port's MAC and address, and a policy's routes
and static neighbours, so that nothing needs ARP or flooding; the host sysctls.  The
containerlab export runs them in each container, the Mininet host class of
``topologies/mininet_topo.py`` (``mn --host zcubehost``) in each Mininet host."""
from __future__ import annotations

import shlex

from topologies.fabric import HOST_SYSCTLS, PREFIX_LEN, Fabric
from topologies.ifnames import host_ifname


def host_commands(fabric: Fabric, name: str, cfg, reset: bool = False) -> list[str]:
    """``ip`` commands for host ``name``: each NIC port's MAC and, with ``cfg`` (a
    :class:`controller.flows.HostConfig`), its /32 address, routes and static neighbours;
    without ``cfg``, each port's address on its /16 plane.  ``reset``, for ports that are up
    with addresses of their own (Mininet's /16 ones, whose plane routes would compete with
    the policy's): each port taken down and emptied first, and up again before the routes."""
    host = fabric.host(name)
    dev = {p.index: host_ifname(name, p.index) for p in host.ports}
    out = []
    if reset:
        out += [c for d in dev.values()
                for c in (f"ip link set dev {d} down", f"ip addr flush dev {d}")]
    out += [f"ip link set dev {dev[p.index]} address {p.mac}" for p in host.ports]
    if cfg is None:
        out += [f"ip addr add {p.ip}/{PREFIX_LEN} dev {dev[p.index]}" for p in host.ports]
    else:
        out += [f"ip addr add {ip}/32 dev {dev[port]}" for port, ip in cfg.addresses]
    if reset:
        out += [f"ip link set dev {d} up" for d in dev.values()]
    if cfg is None:
        return out
    out += [f"ip route replace {prefix} dev {dev[port]} src {src} scope link"
            for prefix, port, src in cfg.routes]
    out += [f"ip neigh replace {ip} lladdr {mac} dev {dev[port]} nud permanent"
            for ip, mac, port in cfg.neighbours]
    return out


def sysctl_command() -> str:
    """One ``sysctl`` setting :data:`topologies.fabric.HOST_SYSCTLS` in a host's network
    namespace (``-e``: a kernel without a key skips it)."""
    return "sysctl -q -e -w " + " ".join(shlex.quote(f"{k}={v}")
                                         for k, v in HOST_SYSCTLS.items())
