"""The servers' NVLink on the emulation (root): a Linux bridge per server (its NVSwitch,
named as a switch's OVS bridge is: ``zcnv0``) with a veth to each of its GPUs, shaped at
the NVLink's scaled rate both ways, so NVLink traffic never reaches OVS and its one
forwarding thread; and the lines that give a GPU its NVLink address, the routes through
its siblings (:mod:`controller.nvlink_hosts`) and forwarding."""
from __future__ import annotations

from controller.nvlink_hosts import TABLE_BASE, TABLE_FORWARD, table_of
from testbed.emulation.batched_build import NodeBatch
from topologies.fabric import Fabric
from topologies.ifnames import bridge_name, host_ifname, nvlink_ifname, switch_ifname
from topologies.nvlink import NVLINK_PORT

# what forwarding between NVLink and a NIC needs in every GPU's namespace
FORWARD_SYSCTLS = {"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.send_redirects": 0}
RULE_PREF = 100           # the GPUs' own rules, before the main table's (32766)


def root_names(fabric: Fabric, prefix: str) -> list[str]:
    """The NVSwitch bridges and their GPU-facing ports in the root namespace."""
    out = []
    for link in fabric.nvlinks:
        out.append(switch_ifname(link.b, link.b_port, prefix))
    return out + sorted({bridge_name(link.b, prefix) for link in fabric.nvlinks})


def tc_lines(dev: str, mbps: float, leaf: str) -> list[str]:
    """htb at ``mbps`` on ``dev`` with ``leaf`` below it (as every shaped cable port)."""
    r2q = max(10, int(mbps * 1e6 / 8 / 100_000) + 1)
    return [f"qdisc replace dev {dev} root handle 5: htb default 1 r2q {r2q}",
            f"class add dev {dev} parent 5: classid 5:1 htb rate {mbps:.3f}Mbit burst 15k",
            f"qdisc add dev {dev} parent 5:1 handle 10: {leaf}"]


def build_batches(fabric: Fabric, pids: dict[str, int], mbps: float, leaf: str,
                  prefix: str) -> dict[str, NodeBatch]:
    """Per namespace (``""``: the root), the commands that build every server's NVSwitch and
    each GPU's veth to it, shaped at ``mbps`` each way; ``pids``: each GPU's shell."""
    root = NodeBatch(None)
    for br in sorted({link.b for link in fabric.nvlinks}):
        name = bridge_name(br, prefix)
        root.ip += [f"link add {name} type bridge", f"link set dev {name} up"]
    out = {"": root}
    for link in fabric.nvlinks:
        gpu, port = link.a, switch_ifname(link.b, link.b_port, prefix)
        dev = nvlink_ifname(gpu)
        root.ip += [f"link add name {port} type veth peer name {dev} netns {pids[gpu]}",
                    f"link set dev {port} master {bridge_name(link.b, prefix)} up"]
        root.tc += tc_lines(port, mbps, leaf)
        out[gpu] = NodeBatch(pids[gpu], tc=tc_lines(dev, mbps, leaf))
    return out


def host_lines(h, nv, gso: str, tso: bool) -> tuple[list[str], list[str]]:
    """``(ip -batch lines, shell lines)`` giving GPU ``h`` its NVLink part ``nv`` (a
    :class:`controller.nvlink_hosts.NvlinkConfig`): address, rules selecting its tables by
    the arriving interface and its own addresses, routes and neighbours."""
    dev = nvlink_ifname(h.name)
    ip = [f"link set dev {dev} address {nv.mac}", f"addr flush dev {dev}",
          f"addr add {nv.address}/32 dev {dev}", f"link set dev {dev} up",
          f"rule add pref {RULE_PREF} iif {dev} lookup {TABLE_FORWARD}",
          f"rule add pref {RULE_PREF + 1} from {nv.address} lookup {table_of(NVLINK_PORT)}"]
    ip += [f"rule add pref {RULE_PREF + 2} from {p.ip} lookup {TABLE_BASE + p.index}"
           for p in h.ports]
    ip += [route_line(h.name, r) for r in nv.routes]
    ip += [neigh_line(h.name, n) for n in nv.neighbours]
    if gso:
        ip.append(f"link set dev {dev} gso_max_size {gso}")
    sh = [] if tso else [f"ethtool -K {dev} tx off >/dev/null 2>&1 || true"]
    return ip, sh


def _dev(host: str, port: int) -> str:
    return nvlink_ifname(host) if port == NVLINK_PORT else host_ifname(host, port)


def route_line(host: str, route) -> str:
    """``ip -batch`` line setting one NVLink-part route ``(table, prefix, port, via, src)``."""
    table, prefix, port, via, src = route
    how = f"via {via} dev {_dev(host, port)} onlink" if via else \
        f"dev {_dev(host, port)} scope link"
    return f"route replace {prefix} {how}" + (f" src {src}" if src else "") + f" table {table}"


def route_delete_line(key) -> str:
    table, prefix = key
    return f"route del {prefix} table {table}"


def neigh_line(host: str, neigh) -> str:
    ip, mac, port = neigh
    return f"neigh replace {ip} lladdr {mac} dev {_dev(host, port)} nud permanent"


def neigh_delete_line(host: str, key) -> str:
    ip, port = key
    return f"neigh del {ip} dev {_dev(host, port)}"
