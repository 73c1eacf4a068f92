"""The fabrics as Mininet topologies, for stock Mininet users and for the testbed itself.

    sudo mn --custom topologies/mininet_topo.py --topo zcube,4 \\
            --switch ovs,protocols=OpenFlow13 --controller remote,ip=127.0.0.1
    sudo mn --custom topologies/mininet_topo.py --topo roft,servers=4,gpus_per_server=4
    sudo mn --custom topologies/mininet_topo.py --topo fattree,4

Hosts, switches, port numbers, MACs, IPs and DPIDs are exactly those of the Fabric the
builders make (host ``g3`` NIC port 1 is interface ``g3-eth1``).  These fabrics have loops,
so a flooding controller will storm: install routes with the testbed's controller
(``python -m controller.launch``), and give the hosts what the testbed's emulation gives
them with ``--host zcubehost`` (``--host zcubehost,policy=P`` for the controller's ``--policy
P``): every NIC port's address, the policy's routes and static neighbours, so that
``pingall`` is clean.  Stock Mininet alone addresses each host's first port and adds no
routes: every ping fails.
"""
import inspect
import os
import site
import sys

# ``mn --custom`` runs this file with exec(), without __file__; find the repository anyway.
_here = os.path.dirname(os.path.abspath(inspect.currentframe().f_code.co_filename))
_root = os.path.dirname(_here)
if _root not in sys.path:
    sys.path.insert(0, _root)

from mininet.node import Host  # noqa: E402
from mininet.topo import Topo  # noqa: E402

from topologies import build  # noqa: E402
from topologies.fabric import PREFIX_LEN  # noqa: E402
from topologies.host_setup import host_commands, sysctl_command  # noqa: E402


class FabricTopo(Topo):
    """A Mininet Topo built from a Fabric (or from a builder name and its parameters)."""

    def build(self, fabric=None, kind="zcube", link_opts=None, switch_opts=None, **params):
        fab = fabric if fabric is not None else build(kind, **params)
        self.fabric = fab
        switch_opts = dict(switch_opts or {})
        for sw in fab.switches:
            self.addSwitch(sw.name, dpid=sw.dpid_hex, **switch_opts)
        for h in fab.hosts:
            first = h.ports[0]
            # the fabric rides along for a host class that configures more (ZCubeHost)
            self.addHost(h.name, ip=f"{first.ip}/{PREFIX_LEN}", mac=first.mac, fabric=fab)
        for link in fab.links:
            opts = dict(link_opts(link) if callable(link_opts) else (link_opts or {}))
            for side, node, port in (("1", link.a, link.a_port), ("2", link.b, link.b_port)):
                if fab.is_host(node):
                    p = fab.host(node).ports[port]
                    opts["params" + side] = {"ip": f"{p.ip}/{PREFIX_LEN}"}
                    opts["addr" + side] = p.mac
            self.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, **opts)


# (id of a fabric, policy) -> (the fabric, its HostConfigs): one route table per fabric and
# policy, shared by its hosts (each host's configuration is computed when it is asked for)
_CONFIGS: dict = {}


def zcube_host_commands(fabric, name: str, policy=None) -> list[str]:
    """The commands :class:`ZCubeHost` runs in host ``name``: the host sysctls, then every
    NIC port emptied and given its MAC and /32 address, and the routes and static neighbours
    of ``policy`` (None: the fabric's default, as the controller's)."""
    return [sysctl_command()] + host_commands(fabric, name, _host_configs(fabric, policy)[name],
                                              reset=True)


def _host_configs(fabric, policy):
    got = _CONFIGS.get((id(fabric), policy))
    if got is None or got[0] is not fabric:
        flows, routing = _controller()
        got = (fabric, flows.HostConfigs(routing.RouteTable(fabric, policy)))
        _CONFIGS[(id(fabric), policy)] = got
    return got[1]


def _controller():
    """``controller.flows`` and ``controller.routing``.  The Python that runs ``mn`` (the
    system's) may lack what they need (networkx): then the repository's .venv of the same
    Python version, where there is one, is added as a site directory, after the system's."""
    try:
        from controller import flows, routing
    except ImportError:
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        site.addsitedir(os.path.join(_root, ".venv", "lib", version, "site-packages"))
        try:
            from controller import flows, routing
        except ImportError as err:
            raise ImportError(f"--host zcubehost needs the testbed's Python packages ({err}): "
                              f"run 'make setup', or run mn with .venv/bin/python") from None
    return flows, routing


class ZCubeHost(Host):
    """A host configured as the testbed's emulation configures its own: every NIC port's MAC
    and address, the routes and static neighbours of a policy, the host sysctls.  With stock
    Mininet: ``mn --custom topologies/mininet_topo.py --topo zcube,4 --host zcubehost``, or
    ``--host zcubehost,policy=P`` for a controller started with ``--policy P``."""

    def config(self, fabric=None, policy=None, **params):
        done = super().config(**params)
        if fabric is None:
            raise ValueError(f"--host zcubehost: {self.name} is not a fabric's host; give "
                             f"--topo zcube, roft or fattree of {_here}/mininet_topo.py")
        failed = []
        for cmd in zcube_host_commands(fabric, self.name, policy):
            said = self.cmd(f"{cmd} 2>&1").strip()
            if said:
                failed.append(f"{cmd}: {said}")
        if failed:
            raise RuntimeError(f"--host zcubehost: {self.name}: " + "; ".join(failed[:3]))
        return done


class ZCubeTopo(FabricTopo):
    def build(self, n=4, gpus_per_server=None, parallel=1, nic_gbps=400.0, **opts):
        super().build(kind="zcube", n=n, gpus_per_server=gpus_per_server, parallel=parallel,
                      nic_gbps=nic_gbps, **opts)


class RoftTopo(FabricTopo):
    def build(self, servers=4, gpus_per_server=4, spines=None, oversubscription=1.0,
              nic_gbps=400.0, radix=64, **opts):
        super().build(kind="roft", servers=servers, gpus_per_server=gpus_per_server,
                      spines=spines, oversubscription=oversubscription, nic_gbps=nic_gbps,
                      radix=radix, **opts)


class FatTreeTopo(FabricTopo):
    def build(self, k=4, gpus_per_server=1, nic_gbps=400.0, **opts):
        super().build(kind="fattree", k=k, gpus_per_server=gpus_per_server, nic_gbps=nic_gbps,
                      **opts)


topos = {"zcube": ZCubeTopo, "roft": RoftTopo, "fattree": FatTreeTopo}
hosts = {"zcubehost": ZCubeHost}
