"""Route verifier (pure): checks a route table against its fabric (valid paths, the promised
pairings, nothing failed crossed) and measures stretch and, for a traffic matrix, the load
on every directed link."""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from controller.relay import inside_server
from controller.routing import RouteTable, ShortestPaths
from topologies.fabric import Fabric
from topologies.nvlink import network_part
from traffic.matrix import matrix

MAX_LISTED = 10
# load over rate beyond this is overload, not float rounding (a NIC at exactly its rate)
OVERLOAD_SLACK = 1e-6


@dataclass
class VerifyReport:
    fabric: str
    policy: str
    pairs: int = 0
    paths: int = 0
    max_paths_per_pair: int = 0
    pairings: dict = field(default_factory=dict)      # "0->1": paths using that pairing
    hops: dict = field(default_factory=dict)          # switches on a path: paths
    stretch_max: float = 0.0
    stretch_mean: float = 0.0
    violations: list = field(default_factory=list)    # the first few, precise
    violations_total: int = 0
    failed: dict = field(default_factory=dict)        # Failures.describe() of the table
    disconnected: int = 0                             # pairs failures cut off
    disconnected_pairs: list = field(default_factory=list)   # the first few
    traffic: str | None = None
    line_rate: bool = False
    loads: dict = field(default_factory=dict)         # link class: stats
    overloaded: list = field(default_factory=list)    # line rate: [link, util] above 1
    overloaded_total: int = 0

    @property
    def ok(self) -> bool:
        return self.violations_total == 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return d

    def to_text(self) -> str:
        lines = [f"fabric {self.fabric}, policy {self.policy}: {self.pairs} ordered pairs, "
                 f"{self.paths} paths (at most {self.max_paths_per_pair} per pair)",
                 *self.path_lines()]
        if self.traffic:
            unit = ("Gb/s; every sender offers its NIC rate, split over its destinations"
                    if self.line_rate else "units; one per pair")
            lines.append(f"link loads under {self.traffic} traffic ({unit}; a pair's demand is "
                         f"split equally over its paths):")
            lines.append(f"  {'class':<14}{'links':>7}{'max':>11}{'mean':>11}{'jain':>8}"
                         f"{'pairs/link':>16}" + (f"{'util max':>10}" if self.line_rate else ""))
            for cls, st in sorted(self.loads.items()):
                pairs = (f"{st['pairs_min']}" if st['pairs_min'] == st['pairs_max']
                         else f"{st['pairs_min']}..{st['pairs_max']}")
                lines.append(f"  {cls:<14}{st['links']:>7}{st['max']:>11.2f}{st['mean']:>11.2f}"
                             f"{st['jain']:>8.4f}{pairs:>16}"
                             + (f"{st['util_max']:>10.2f}" if self.line_rate else ""))
        if self.overloaded:
            lines += self.overload_lines()
        if self.disconnected:
            lines.append(f"failures cut off {self.disconnected} pair(s): "
                         + ", ".join(f"{s}->{d}" for s, d in self.disconnected_pairs)
                         + (" ..." if self.disconnected > len(self.disconnected_pairs) else ""))
        if self.ok and self.failed:
            lines.append("OK: every connected pair routed around the failures, loop-free, on "
                         "live links")
        elif self.ok:
            lines.append("OK: every pair routed, loop-free, on real links, on every promised "
                         "port pairing")
        else:
            lines.append(f"FAILED: {self.violations_total} violation(s); first ones:")
            lines += [f"  {v}" for v in self.violations]
        return "\n".join(lines)

    def path_lines(self) -> list[str]:
        """The port pairings, switches per path and stretch of the routed paths, saying so
        when the policy routed no pair at all."""
        if not self.paths:
            return ["port pairings: none (no pair routed)", "switches per path: none",
                    "stretch over shortest: -"]
        return ["port pairings: "
                + ", ".join(f"{k} x{v}" for k, v in sorted(self.pairings.items())),
                "switches per path: "
                + ", ".join(f"{k}: {v}" for k, v in sorted(self.hops.items())),
                f"stretch over shortest: max {self.stretch_max:.2f}, mean {self.stretch_mean:.3f}"]

    def overload_lines(self) -> list[str]:
        """The warning that links are offered more than their rate, and what it means."""
        listed = self.overloaded[:3]
        shown = ", ".join(f"{link} at {util:.2f}" for link, util in listed)
        more = self.overloaded_total - len(listed)
        return [f"OVERLOADED: {self.overloaded_total} link(s) offered more than their rate, up to "
                f"{listed[0][1]:.2f} times: {shown}{f' and {more} more' if more else ''}",
                f"  under {self.traffic} traffic with every sender at its NIC rate, the senders "
                f"crossing them cannot all get that rate: queues fill and their transfers slow "
                f"down. That is load, not a routing error: the last line says whether the "
                f"routes are correct."]


def jain(values) -> float:
    values = list(values)
    sq = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * sq) if sq > 0 else 1.0


def _node_class(fabric: Fabric, name: str) -> str:
    if fabric.is_domain(name):
        return "nvlink"
    return "host" if fabric.is_host(name) else fabric.switch(name).group


def _violation(rep: VerifyReport, msg: str) -> None:
    """Count a violation; list it among the first ``MAX_LISTED``."""
    rep.violations_total += 1
    if len(rep.violations) < MAX_LISTED:
        rep.violations.append(msg)


class _Wiring:
    """What the checks read of the fabric: the cables of every directed hop, NIC bandwidth,
    the switches, each host's NIC port per switch, and the fewest switches between hosts."""

    def __init__(self, fabric: Fabric):
        self.cables: Counter = Counter()        # directed hop: parallel cables
        self.cable_gbps: Counter = Counter()    # directed hop: their bandwidth
        for link in fabric.links + fabric.nvlinks:
            for hop in ((link.a, link.b), (link.b, link.a)):
                self.cables[hop] += 1
                self.cable_gbps[hop] += link.gbps
        self.fabric = fabric
        self.nic = {h.name: sum(p.gbps for p in h.ports) for h in fabric.hosts}
        self.switches = {s.name for s in fabric.switches}
        self.attach = {h.name: [sw for sw, _ in fabric.attachments(h.name)]
                       for h in fabric.hosts}
        self.port_of = {(h, sw): p for h, sws in self.attach.items() for p, sw in enumerate(sws)}
        self._sp = ShortestPaths(fabric)
        self._fewest: dict[tuple, int | None] = {}

    def fewest_switches(self, s: str, d: str) -> int | None:
        """The fewest switches any path from host ``s`` to host ``d`` crosses (None: none)."""
        key = (tuple(self.attach[s]), tuple(self.attach[d]))
        got = self._fewest.get(key, -1)
        if got == -1:
            dists = [self._sp.distance(a, b) for a in self.attach[s] for b in self.attach[d]]
            dists = [x for x in dists if x is not None]
            got = min(dists) + 1 if dists else None
            self._fewest[key] = got
        return got


@dataclass
class _Tally:
    """What the checked paths add up to; ``load`` and ``crossing`` by directed hop."""
    with_loads: bool                # all-to-all: loads counted while the paths are checked
    load: Counter = field(default_factory=Counter)
    crossing: Counter = field(default_factory=Counter)     # pairs whose paths cross a hop
    pairings: Counter = field(default_factory=Counter)
    hops: Counter = field(default_factory=Counter)
    stretch_sum: float = 0.0
    stretch_max: float = 0.0
    stretch_n: int = 0              # paths with a stretch (not inside one server)

    def add_path(self, p, n_sw: int, pairing: tuple, best: int | None, share: float,
                 links_of_pair: set | None) -> None:
        """Count one good path crossing ``n_sw`` switches; with ``links_of_pair``, add
        ``share`` to its hops' loads."""
        self.pairings[pairing] += 1
        self.hops[n_sw] += 1
        if best:
            st = n_sw / best
            self.stretch_sum += st
            self.stretch_n += 1
            if st > self.stretch_max:
                self.stretch_max = st
        if links_of_pair is not None:
            for k in range(len(p) - 1):
                hop = (p[k], p[k + 1])
                self.load[hop] += share
                links_of_pair.add(hop)


def verify(table: RouteTable, traffic: str | None = None, seed: int = 0,
           line_rate: bool = False) -> VerifyReport:
    """Check every pair's paths; with ``traffic``, add link loads.  With ``line_rate`` every
    sender offers its whole NIC bandwidth, split equally over its destinations, so loads are
    in Gb/s and each link class also gets its utilisation (load / cable bandwidth)."""
    fabric = table.fabric
    rep = VerifyReport(fabric=fabric.name, policy=table.policy_name, traffic=traffic,
                       line_rate=line_rate,
                       failed=table.failed.describe(fabric) if table.failed else {})
    wiring = _Wiring(fabric)
    tally = _Tally(with_loads=traffic == "all-to-all")
    all_share = 1.0
    if line_rate and len(fabric.hosts) > 1:
        all_share = 1.0 / (len(fabric.hosts) - 1)
    for s, d in table.pairs():
        offered = wiring.nic[s] * all_share if line_rate else 1.0
        _check_pair(rep, tally, wiring, table, s, d, offered)
    rep.pairings = {f"{a}->{b}": c for (a, b), c in sorted(tally.pairings.items())}
    rep.hops = dict(sorted(tally.hops.items()))
    rep.stretch_max = tally.stretch_max
    rep.stretch_mean = tally.stretch_sum / tally.stretch_n if tally.stretch_n else 0.0
    if traffic and not tally.with_loads:
        _add_matrix_loads(tally, wiring, table, traffic, seed, line_rate)
    if traffic:
        rep.loads = _class_loads(fabric, wiring, tally, line_rate)
    if traffic and line_rate:
        over = _overloaded(wiring, tally)
        rep.overloaded, rep.overloaded_total = over[:MAX_LISTED], len(over)
    return rep


def _check_pair(rep: VerifyReport, tally: _Tally, wiring: _Wiring, table: RouteTable,
                s: str, d: str, offered: float) -> None:
    """Check the paths of the pair ``s -> d`` and count the good ones; ``offered`` is the
    pair's demand, split equally over its paths when loads are counted here."""
    rep.pairs += 1
    try:
        paths = table.paths(s, d)
    except Exception as err:  # a user's policy may raise anything
        _violation(rep, f"{s} -> {d}: policy raised {type(err).__name__}: {err}")
        return
    if not paths and table.damage is not None:
        rep.disconnected += 1
        if len(rep.disconnected_pairs) < MAX_LISTED:
            rep.disconnected_pairs.append((s, d))
        return
    if not paths:
        _violation(rep, f"{s} -> {d}: no path")
        return
    rep.paths += len(paths)
    if len(paths) > rep.max_paths_per_pair:
        rep.max_paths_per_pair = len(paths)
    inside = inside_server(table.fabric, s, d) is not None
    best = None if inside else wiring.fewest_switches(s, d)
    got_pairings = set()
    share = offered / len(paths)
    links_of_pair = set() if tally.with_loads else None
    for p in paths:
        error = _path_error(p, s, d, wiring, table.damage)
        if error:
            _violation(rep, error)
            continue
        net = network_part(table.fabric, p)
        pairing = (wiring.port_of[(net[0], net[1])], wiring.port_of[(net[-1], net[-2])]) \
            if net else (-1, -1)
        got_pairings.add(pairing)
        tally.add_path(p, max(0, len(net) - 2), pairing, best, share, links_of_pair)
    if tally.with_loads:
        for hop in links_of_pair:
            tally.crossing[hop] += 1
    claimed = table.claims(s, d)
    if claimed and not claimed <= got_pairings:
        missing = sorted(claimed - got_pairings)
        _violation(rep, f"{s} -> {d}: no path on promised port pairing(s) "
                   + ", ".join(f"{a}->{b}" for a, b in missing))


def _path_error(p, s: str, d: str, wiring: _Wiring, damage) -> str | None:
    """What is wrong with path ``p`` of the pair ``s -> d`` (the first problem found), or
    None when it is good."""
    where = f"{s} -> {d} path {'-'.join(map(str, p))}"
    if len(p) < 3 or p[0] != s or p[-1] != d:
        return f"{where}: must run from {s} through switches to {d}"
    net = network_part(wiring.fabric, p)
    inner = list(net[1:-1]) if net else []
    if any(x not in wiring.switches for x in inner) or (net and len(net) < 3):
        bad = next((x for x in inner if x not in wiring.switches), net[-1] if net else p[1])
        return f"{where}: {bad} is not a switch"
    if any(wiring.fabric.is_domain(x) for x in inner):
        return f"{where}: hands over NVLink between switches (only at either end)"
    if len(set(p)) != len(p):
        return f"{where}: loop (visits a node twice)"
    broken = next(((p[k], p[k + 1]) for k in range(len(p) - 1)
                   if (p[k], p[k + 1]) not in wiring.cables), None)
    if broken:
        return f"{where}: no cable {broken[0]}-{broken[1]}"
    if damage is not None and not damage.path_ok(p):
        dead = next((p[k], p[k + 1]) for k in range(len(p) - 1)
                    if not damage.hop_ok(p[k], p[k + 1]))
        return f"{where}: crosses failed {dead[0]}-{dead[1]}"
    return None


def _add_matrix_loads(tally: _Tally, wiring: _Wiring, table: RouteTable, traffic: str,
                      seed: int, line_rate: bool) -> None:
    """Loads of a traffic matrix other than all-to-all: each demand split equally over its
    pair's paths (with ``line_rate``, a sender's NIC rate split over its destinations)."""
    demands = list(matrix(traffic, table.fabric, seed))
    if line_rate:
        fan_out = Counter(s for s, _, _ in demands)
        demands = [(s, d, x * wiring.nic[s] / fan_out[s]) for s, d, x in demands]
    for s, d, demand in demands:
        paths = [tuple(p) for p in table.paths(s, d)]
        if not paths:
            continue
        share = demand / len(paths)
        links_of_pair = set()
        for p in paths:
            for k in range(len(p) - 1):
                hop = (p[k], p[k + 1])
                if hop in wiring.cables:
                    tally.load[hop] += share
                    links_of_pair.add(hop)
        for hop in links_of_pair:
            tally.crossing[hop] += 1


def _overloaded(wiring: _Wiring, tally: _Tally) -> list[list]:
    """``[directed link, utilisation]`` of every link offered more than its rate, busiest
    first."""
    utils = ((tally.load[hop] / wiring.cable_gbps[hop], hop) for hop in wiring.cables)
    return [[f"{u}->{v}", round(util, 4)]
            for util, (u, v) in sorted(utils, key=lambda x: (-x[0], x[1]))
            if util > 1 + OVERLOAD_SLACK]

def _class_loads(fabric: Fabric, wiring: _Wiring, tally: _Tally, line_rate: bool) -> dict:
    """Per link class (``A->B``, ...): links, max, mean and Jain index of the load per cable,
    the fewest and most pairs crossing a link, and with ``line_rate`` the utilisation."""
    classes: dict[str, list] = {}
    for (u, v), count in wiring.cables.items():
        cls = f"{_node_class(fabric, u)}->{_node_class(fabric, v)}"
        # parallel cables share a node pair's load evenly, as a select group would
        classes.setdefault(cls, []).append((tally.load[(u, v)] / count, tally.crossing[(u, v)],
                                            tally.load[(u, v)] / wiring.cable_gbps[(u, v)]))
    out = {}
    for cls, vals in classes.items():
        loads = [v for v, _, _ in vals]
        pairs = [c for _, c, _ in vals]
        out[cls] = {"links": len(vals), "max": max(loads), "mean": sum(loads) / len(loads),
                    "jain": jain(loads), "pairs_min": min(pairs), "pairs_max": max(pairs)}
        if line_rate:
            utils = [u for _, _, u in vals]
            out[cls].update(util_max=max(utils), util_mean=sum(utils) / len(utils))
    return out
