"""The fabrics as Mininet topologies, for stock Mininet users and for the testbed itself.

    sudo mn --custom topologies/mininet_topo.py --topo zcube,4 \\
            --switch ovs,protocols=OpenFlow13 --controller remote,ip=127.0.0.1
    sudo mn --custom topologies/mininet_topo.py --topo roft,servers=4,gpus_per_server=4
    sudo mn --custom topologies/mininet_topo.py --topo fattree,4

Hosts, switches, port numbers, MACs, IPs and DPIDs are exactly those of the Fabric the
builders make (host ``g3`` NIC port 1 is interface ``g3-eth1``).  These fabrics have loops,
so a flooding controller will storm: install routes with the testbed's controller.
"""
import inspect
import os
import sys

# ``mn --custom`` runs this file with exec(), without __file__; find the repository anyway.
_here = os.path.dirname(os.path.abspath(inspect.currentframe().f_code.co_filename))
_root = os.path.dirname(_here)
if _root not in sys.path:
    sys.path.insert(0, _root)

from mininet.topo import Topo  # noqa: E402

from topologies import build  # noqa: E402
from topologies.fabric import PREFIX_LEN  # noqa: E402


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
            self.addHost(h.name, ip=f"{first.ip}/{PREFIX_LEN}", mac=first.mac)
        for link in fab.links:
            opts = dict(link_opts(link) if callable(link_opts) else (link_opts or {}))
            for side, node, port in (("1", link.a, link.a_port), ("2", link.b, link.b_port)):
                if fab.is_host(node):
                    p = fab.host(node).ports[port]
                    opts["params" + side] = {"ip": f"{p.ip}/{PREFIX_LEN}"}
                    opts["addr" + side] = p.mac
            self.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, **opts)


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
