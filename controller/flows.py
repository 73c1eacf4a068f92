"""What the route table means for each switch and each host (pure): switch flows and select
groups by destination address, host routes and static neighbours, so nothing floods and the
Ryu app and the host setup only translate."""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.addresses import path_addresses
from controller.nvlink_hosts import NvlinkConfig, nvlink_configs, through_hosts
from controller.routing import RouteTable
from topologies.fabric import PREFIX_LEN
from topologies.nvlink import network_part

COOKIE = 0x2C0BE00000000001      # marks the testbed's flows on every switch
PRIO_PAIR = 200                   # (source, destination) flows
PRIO_DST = 100                    # destination flows
PRIO_MISS = 0                     # drop everything else


@dataclass(frozen=True)
class Flow:
    priority: int
    dst: str
    src: str | None
    ports: tuple[int, ...]        # one: output; several: select group over them

    def describe(self, groups: dict) -> str:
        """Canonical text, the same as ``parse_ofctl_flow`` makes of ovs-ofctl output."""
        match = f"priority={self.priority},ip" + (f",nw_src={self.src}" if self.src else "") \
            + f",nw_dst={self.dst}"
        action = (f"output:{self.ports[0]}" if len(self.ports) == 1
                  else f"group:{groups[self.ports]}")
        return f"{match} actions={action}"


@dataclass
class SwitchFlows:
    switch: str
    dpid: int
    flows: list[Flow] = field(default_factory=list)
    groups: dict = field(default_factory=dict)      # ports tuple -> group id

    def describe(self) -> list[str]:
        out = [f.describe(self.groups) for f in self.flows]
        out.append(f"priority={PRIO_MISS} actions=drop")
        return sorted(out)

    def describe_groups(self) -> list[str]:
        return sorted(f"group_id={gid},type=select,"
                      + ",".join(f"bucket=actions=output:{p}" for p in ports)
                      for ports, gid in self.groups.items())


def _next_hops(table: RouteTable, s: str, d: str) -> dict:
    """``(switch, (source address, destination address)) -> next nodes`` of one pair's
    paths, and back along those whose acknowledgements no other pair's routes carry (a
    path that hands over NVLink; one whose reverse pair does, :mod:`.nvlink_hosts`).
    Gathered per switch and addresses first, as many paths share them (ECMP: 32 per
    cross-rail pair on ROFT 32x8)."""
    fabric = table.fabric
    addresses: dict = {}
    nexts: dict = defaultdict(set)
    for path in table.paths(s, d):
        net = network_part(fabric, path)
        if len(net) != len(path):
            continue              # inside one server, or handed over NVLink (below)
        ends = (net[:2], net[-2:])
        ips = addresses.get(ends)
        if ips is None:
            ips = addresses[ends] = path_addresses(fabric, net)[:2]
        for k in range(1, len(net) - 1):
            nexts[(net[k], ips)].add(net[k + 1])
    for _, net, (src_ip, dst_ip), handed in through_hosts(table, s, d):
        for k in range(1, len(net) - 1):
            if handed:
                nexts[(net[k], (src_ip, dst_ip))].add(net[k + 1])
            nexts[(net[k], (dst_ip, src_ip))].add(net[k - 1])
    return nexts


def compile_switch_flows(table: RouteTable) -> dict[str, SwitchFlows]:
    fabric = table.fabric
    # next hops per switch, destination address and source address
    nh: dict = defaultdict(lambda: defaultdict(dict))
    port_cache: dict = {}
    for s, d in table.pairs():
        for (sw, (src_ip, dst_ip)), nodes in _next_hops(table, s, d).items():
            ports = nh[sw][dst_ip].setdefault(src_ip, set())
            for nxt in nodes:
                found = port_cache.get((sw, nxt))
                if found is None:
                    found = port_cache[(sw, nxt)] = {a for a, _ in table.live_ports(sw, nxt)}
                ports.update(found)
    out = {}
    for sw in fabric.switches:
        sf = SwitchFlows(sw.name, sw.dpid)
        for dst_ip, by_src in sorted(nh.get(sw.name, {}).items()):
            choices = Counter(tuple(sorted(p)) for p in by_src.values())
            common = max(choices, key=lambda p: (choices[p], p))
            sf.flows.append(Flow(PRIO_DST, dst_ip, None, common))
            for src_ip, ports in sorted(by_src.items()):
                ports = tuple(sorted(ports))
                if ports != common:
                    sf.flows.append(Flow(PRIO_PAIR, dst_ip, src_ip, ports))
        for f in sf.flows:
            if len(f.ports) > 1 and f.ports not in sf.groups:
                sf.groups[f.ports] = len(sf.groups) + 1
        out[sw.name] = sf
    return out


@dataclass
class HostConfig:
    """What one host needs: its addresses, routes and static neighbours."""
    host: str
    addresses: list          # (port index, ip)
    routes: list             # (destination prefix "a.b.c.d/len", port index, source ip)
    neighbours: list         # (ip, mac, port index)
    nvlink: NvlinkConfig | None = None      # inside a server with NVLink


def compile_host_config(table: RouteTable, hosts=None) -> dict[str, HostConfig]:
    """Every host's configuration, or only that of the ``hosts`` named."""
    configs = HostConfigs(table)
    wanted = None if hosts is None else set(hosts)
    return {name: configs[name] for name in configs if wanted is None or name in wanted}


class HostConfigs(Mapping):
    """Each host's configuration, computed when it is asked for and not kept: a writer that
    goes through the hosts one by one holds one host's routes and neighbours at a time,
    not every host's (they grow with hosts squared)."""

    def __init__(self, table: RouteTable):
        self.table = table
        self.names = [h.name for h in table.fabric.hosts]
        self.mac_of = {p.ip: p.mac for h in table.fabric.hosts for p in h.ports}
        self.nvlink: dict | None = None         # every GPU's NVLink part, once asked for

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name) -> bool:
        return self.table.fabric.is_host(name) if isinstance(name, str) else False

    def __getitem__(self, name: str) -> HostConfig:
        if name not in self:
            raise KeyError(name)
        fabric, table = self.table.fabric, self.table
        use: dict = {}                          # dst ip -> (port, src ip): the first path's
        for d in self.names:
            if d != name:
                for path in table.paths(name, d):
                    if len(network_part(fabric, path)) != len(path):
                        continue            # over NVLink: its own tables (nvlink_hosts)
                    src_ip, dst_ip, sp, _ = path_addresses(fabric, path)
                    use.setdefault(dst_ip, (sp, src_ip))
        routes, neigh = [], []
        by_plane: dict = defaultdict(dict)
        for dst_ip, (port, src_ip) in use.items():
            by_plane[plane_of(dst_ip)][dst_ip] = (port, src_ip)
            neigh.append((dst_ip, self.mac_of[dst_ip], port))
        for plane, dsts in sorted(by_plane.items()):
            choices = set(dsts.values())
            if len(choices) == 1:
                port, src_ip = choices.pop()
                routes.append((plane, port, src_ip))
            else:
                routes += [(f"{ip}/32", port, src_ip)
                           for ip, (port, src_ip) in sorted(dsts.items())]
        host = fabric.host(name)
        if self.nvlink is None:
            self.nvlink = nvlink_configs(table)
        return HostConfig(name, [(p.index, p.ip) for p in host.ports], routes, sorted(neigh),
                          self.nvlink.get(name))


def plane_of(ip: str) -> str:
    """The /16 address plane of a NIC port index (``10.<port>.0.0/16``)."""
    a, b, _, _ = ip.split(".")
    return f"{a}.{b}.0.0/{PREFIX_LEN}"


def parse_ofctl_flow(line: str) -> str | None:
    """Canonical text of one ``ovs-ofctl --no-stats dump-flows`` line, or None for noise."""
    line = line.strip()
    if not line or line.startswith(("OFPST", "NXST")):
        return None
    match, _, actions = line.partition(" actions=")
    fields = [f for f in match.replace(" ", ",").split(",") if f and not f.startswith(
        ("cookie=", "duration=", "table=", "n_packets=", "n_bytes=", "idle_age=", "hard_age=",
         "reset_counts", "send_flow_rem"))]
    prio = next((f for f in fields if f.startswith("priority=")), "priority=32768")
    rest = [f for f in fields if not f.startswith("priority=")]
    proto = [f for f in rest if "=" not in f]
    kv = sorted(f for f in rest if "=" in f and not f.startswith("nw_dst="))
    kv += [f for f in rest if f.startswith("nw_dst=")]
    return ",".join([prio] + proto + kv) + f" actions={actions}"


def parse_ofctl_group(line: str) -> str | None:
    """Canonical text of one ``dump-groups`` line: bucket ids (OpenFlow 1.5 dumps) and
    weights dropped, so it compares with :meth:`SwitchFlows.describe_groups`."""
    line = line.strip()
    if not line.startswith("group_id="):
        return None
    out = []
    for part in line.split(","):
        if part.startswith("bucket="):
            prop = part[len("bucket="):]
            if prop.startswith(("bucket_id:", "weight:")):
                out.append("bucket=")
                continue
        elif part.startswith(("bucket_id:", "weight:")):
            continue
        if out and out[-1] == "bucket=":
            out[-1] += part
        else:
            out.append(part)
    return ",".join(out)
