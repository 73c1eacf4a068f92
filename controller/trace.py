"""Path tracing from link counters (pure): probe ``k`` of a round sends ``3**(k+1)`` packets,
so digit ``k+1`` of a link's counter delta in base 3 says how often probe k crossed it, and
one counter read per round separates up to ``ROUND`` probes."""
from __future__ import annotations

from dataclasses import dataclass

ROUND = 5          # probes per round: 3 + 9 + ... + 243 = 363 packets


def burst_sizes(n: int) -> list[int]:
    return [3 ** (k + 1) for k in range(n)]


def hops_of_path(path) -> tuple:
    """Directed hops ``(u, v)`` of a host-to-host path."""
    return tuple((path[i], path[i + 1]) for i in range(len(path) - 1))


def disjoint_groups(sets, most: int | None = None) -> list[list[int]]:
    """Indices of ``sets`` in groups, in order (each joins the first group it shares no
    element with, of at most ``most``)."""
    groups: list = []
    for k, mine in enumerate(sets):
        for g in groups:
            if (most is None or len(g[0]) < most) and not g[1] & mine:
                g[0].append(k)
                g[1] |= mine
                break
        else:
            groups.append([[k], set(mine)])
    return [g[0] for g in groups]


def decompose(deltas: dict, n_probes: int) -> tuple[list[set], list[set]]:
    """Per probe: the hops it crossed once, and the hops it crossed more than once."""
    crossed = [set() for _ in range(n_probes)]
    repeated = [set() for _ in range(n_probes)]
    limit = 3 ** (n_probes + 1)
    for hop, delta in deltas.items():
        if delta <= 0:
            continue
        rest = delta // 3
        for k in range(n_probes):
            digit = rest % 3
            rest //= 3
            if digit == 1:
                crossed[k].add(hop)
            elif digit == 2:
                repeated[k].add(hop)
        if delta >= limit:                 # more packets than the round sent: noise or a loop
            for k in range(n_probes):
                repeated[k].add(hop)
    return crossed, repeated


@dataclass
class TraceResult:
    ok: bool
    path: tuple | None          # the computed path the probe matched
    message: str = ""


def walk(start: str, hops: set) -> list[str]:
    """Follow crossed hops from ``start`` as far as they go (stops on a fork or a repeat)."""
    nxt: dict = {}
    for u, v in hops:
        nxt.setdefault(u, []).append(v)
    out, seen = [start], {start}
    while len(nxt.get(out[-1], [])) == 1 and nxt[out[-1]][0] not in seen:
        out.append(nxt[out[-1]][0])
        seen.add(out[-1])
    return out


def judge(label: str, candidates: list, crossed: set, repeated: set) -> TraceResult:
    """Did a probe cross exactly one of the computed ``candidates`` paths?"""
    for path in candidates:
        if set(hops_of_path(path)) == crossed and not repeated:
            return TraceResult(True, tuple(path))
    want = candidates[0]
    seen = walk(want[0], crossed)
    if repeated:
        hop = sorted(repeated)[0]
        return TraceResult(False, None, f"{label}: packets crossed {hop[0]}->{hop[1]} more "
                                        f"than once (duplicated or looping)")
    for i in range(1, len(want)):
        if i >= len(seen):
            where = seen[-1]
            return TraceResult(False, None, f"{label}: computed {'-'.join(want)}, but packets "
                                            f"stopped after {'-'.join(seen)} (lost at {where})")
        if seen[i] != want[i] and not any(len(p) > i and p[:i + 1] == tuple(seen[:i + 1])
                                          for p in map(tuple, candidates)):
            return TraceResult(False, None, f"{label}: computed {'-'.join(want)}, but packets "
                                            f"went {'-'.join(seen)}; first wrong hop "
                                            f"{seen[i - 1]}->{seen[i]}")
    extra = sorted(crossed - set(hops_of_path(seen)))
    also = ", ".join(f"{u}->{v}" for u, v in extra) or "nothing"
    return TraceResult(False, None, f"{label}: computed {'-'.join(want)}, crossed "
                                    f"{'-'.join(seen)} plus {also}")
