"""Route verifier: checks a route table against its fabric and measures link loads.

For every ordered host pair it checks that the policy gives at least one path, that each
path starts at the source, ends at the destination, crosses only switches, follows real
cables and visits no node twice, and that the NIC port pairings the policy promises are all
there.  It reports stretch (switches on a path over the fewest possible for that pair) and,
for a traffic matrix, the load on every directed link, split equally over a pair's paths,
summarised per link class (``host->A``, ``A->B``, ``leaf->spine`` ...) as max, mean and
Jain's fairness index.

A table built around failures is checked the same way, plus: no path may cross a failed
element.  A pair the failures cut off from each other is counted as disconnected, not as a
violation (it has no path to give), and no port pairing is promised around failures.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from topologies.fabric import Fabric
from traffic.matrix import matrix

from .routing import RouteTable, ShortestPaths

MAX_LISTED = 10


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
                 "port pairings: " + ", ".join(f"{k} x{v}" for k, v in sorted(self.pairings.items())),
                 "switches per path: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.hops.items())),
                 f"stretch over shortest: max {self.stretch_max:.2f}, mean {self.stretch_mean:.3f}"]
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


def jain(values) -> float:
    values = list(values)
    sq = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * sq) if sq > 0 else 1.0


def _node_class(fabric: Fabric, name: str) -> str:
    return "host" if fabric.is_host(name) else fabric.switch(name).group


def verify(table: RouteTable, traffic: str | None = None, seed: int = 0,
           line_rate: bool = False) -> VerifyReport:
    """Check every pair's paths; with ``traffic``, add link loads.  With ``line_rate`` every
    sender offers its whole NIC bandwidth, split equally over its destinations, so loads are
    in Gb/s and each link class also gets its utilisation (load / cable bandwidth)."""
    fabric = table.fabric
    damage = table.damage
    rep = VerifyReport(fabric=fabric.name, policy=table.policy_name, traffic=traffic,
                       line_rate=line_rate,
                       failed=table.failed.describe(fabric) if table.failed else {})
    cables: Counter = Counter()
    cable_gbps: Counter = Counter()
    for l in fabric.links:
        for hop in ((l.a, l.b), (l.b, l.a)):
            cables[hop] += 1
            cable_gbps[hop] += l.gbps
    nic = {h.name: sum(p.gbps for p in h.ports) for h in fabric.hosts}
    all_share = 1.0
    if line_rate and len(fabric.hosts) > 1:
        all_share = 1.0 / (len(fabric.hosts) - 1)
    switches = {s.name for s in fabric.switches}
    sp = ShortestPaths(fabric)
    attach = {h.name: [sw for sw, _ in fabric.attachments(h.name)] for h in fabric.hosts}
    port_of = {(h, sw): p for h, sws in attach.items() for p, sw in enumerate(sws)}
    fewest: dict[tuple, int] = {}

    def shortest_switches(s: str, d: str) -> int | None:
        key = (tuple(attach[s]), tuple(attach[d]))
        got = fewest.get(key, -1)
        if got == -1:
            dists = [sp.distance(a, b) for a in attach[s] for b in attach[d]]
            dists = [x for x in dists if x is not None]
            got = min(dists) + 1 if dists else None
            fewest[key] = got
        return got

    load: Counter = Counter()
    crossing: Counter = Counter()     # pairs whose paths cross a directed link
    pairings: Counter = Counter()
    hops: Counter = Counter()
    stretch_sum = 0.0
    stretch_max = 0.0
    with_loads = traffic == "all-to-all"
    violations = rep.violations

    def violation(msg: str):
        rep.violations_total += 1
        if len(violations) < MAX_LISTED:
            violations.append(msg)

    for s, d in table.pairs():
        rep.pairs += 1
        try:
            paths = table.paths(s, d)
        except Exception as err:  # a user's policy may raise anything
            violation(f"{s} -> {d}: policy raised {type(err).__name__}: {err}")
            continue
        if not paths and damage is not None:
            rep.disconnected += 1
            if len(rep.disconnected_pairs) < MAX_LISTED:
                rep.disconnected_pairs.append((s, d))
            continue
        if not paths:
            violation(f"{s} -> {d}: no path")
            continue
        rep.paths += len(paths)
        if len(paths) > rep.max_paths_per_pair:
            rep.max_paths_per_pair = len(paths)
        best = shortest_switches(s, d)
        got_pairings = set()
        share = (nic[s] * all_share if line_rate else 1.0) / len(paths)
        links_of_pair = set() if with_loads else None
        for p in paths:
            where = f"{s} -> {d} path {'-'.join(map(str, p))}"
            if len(p) < 3 or p[0] != s or p[-1] != d:
                violation(f"{where}: must run from {s} through switches to {d}")
                continue
            if any(x not in switches for x in p[1:-1]):
                bad = next(x for x in p[1:-1] if x not in switches)
                violation(f"{where}: {bad} is not a switch")
                continue
            if len(set(p)) != len(p):
                violation(f"{where}: loop (visits a node twice)")
                continue
            broken = next(((p[k], p[k + 1]) for k in range(len(p) - 1)
                           if (p[k], p[k + 1]) not in cables), None)
            if broken:
                violation(f"{where}: no cable {broken[0]}-{broken[1]}")
                continue
            if damage is not None and not damage.path_ok(p):
                dead = next((p[k], p[k + 1]) for k in range(len(p) - 1)
                            if not damage.hop_ok(p[k], p[k + 1]))
                violation(f"{where}: crosses failed {dead[0]}-{dead[1]}")
                continue
            pairing = (port_of[(s, p[1])], port_of[(d, p[-2])])
            got_pairings.add(pairing)
            pairings[pairing] += 1
            n_sw = len(p) - 2
            hops[n_sw] += 1
            if best:
                st = n_sw / best
                stretch_sum += st
                if st > stretch_max:
                    stretch_max = st
            if with_loads:
                for k in range(len(p) - 1):
                    hop = (p[k], p[k + 1])
                    load[hop] += share
                    links_of_pair.add(hop)
        if with_loads:
            for hop in links_of_pair:
                crossing[hop] += 1
        claimed = table.claims(s, d)
        if claimed and not claimed <= got_pairings:
            missing = sorted(claimed - got_pairings)
            violation(f"{s} -> {d}: no path on promised port pairing(s) "
                      + ", ".join(f"{a}->{b}" for a, b in missing))

    rep.pairings = {f"{a}->{b}": c for (a, b), c in sorted(pairings.items())}
    rep.hops = dict(sorted(hops.items()))
    rep.stretch_max = stretch_max
    rep.stretch_mean = stretch_sum / rep.paths if rep.paths else 0.0

    if traffic and not with_loads:
        demands = list(matrix(traffic, fabric, seed))
        if line_rate:
            fan_out = Counter(s for s, _, _ in demands)
            demands = [(s, d, x * nic[s] / fan_out[s]) for s, d, x in demands]
        for s, d, demand in demands:
            paths = [tuple(p) for p in table.paths(s, d)]
            if not paths:
                continue
            share = demand / len(paths)
            links_of_pair = set()
            for p in paths:
                for k in range(len(p) - 1):
                    hop = (p[k], p[k + 1])
                    if hop in cables:
                        load[hop] += share
                        links_of_pair.add(hop)
            for hop in links_of_pair:
                crossing[hop] += 1
    if traffic:
        classes: dict[str, list] = {}
        for (u, v), count in cables.items():
            cls = f"{_node_class(fabric, u)}->{_node_class(fabric, v)}"
            # parallel cables share a node pair's load evenly, as a select group would
            classes.setdefault(cls, []).append((load[(u, v)] / count, crossing[(u, v)],
                                                load[(u, v)] / cable_gbps[(u, v)]))
        for cls, vals in classes.items():
            loads = [v for v, _, _ in vals]
            pairs = [c for _, c, _ in vals]
            rep.loads[cls] = {"links": len(vals), "max": max(loads),
                              "mean": sum(loads) / len(loads), "jain": jain(loads),
                              "pairs_min": min(pairs), "pairs_max": max(pairs)}
            if line_rate:
                utils = [u for _, _, u in vals]
                rep.loads[cls].update(util_max=max(utils), util_mean=sum(utils) / len(utils))
    return rep
