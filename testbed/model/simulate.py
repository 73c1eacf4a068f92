"""Flow-level model backend: what the emulation would measure, computed instead of carried.

``simulate(table, workload, link_mbps)`` replays a workload's KV transfers over a fabric as
fluid flows, with no root, no processes and no packets, so fabrics of thousands of GPUs and
hour-long traces fit in minutes on one core.  It returns the same rows as the emulation
(``transfers.csv``: :data:`testbed.emulation.transfers.ROW_FIELDS`; ``links.csv``:
:data:`testbed.emulation.linkstats.FIELDS`), so one summary covers both backends.

What is modelled, and how it maps onto the emulation:

* **Capacity.**  Every cable of the Fabric runs at ``gbps * 1000 * link_mbps / (nic_gbps *
  1000)`` Mb/s, as ``testbed.emulation.network`` shapes it.  Cables are full duplex: each direction
  (directed hop ``(a, b)``) is its own resource, and parallel cables between the same two
  nodes add up (as ``LinkSampler.capacity`` counts them).
* **Sub-flows.**  A transfer is split evenly over the NIC port pairings its routes use,
  exactly as :func:`testbed.emulation.transfers.flows_for` splits it (one TCP connection each in the
  emulation): ZCube stripes half over P1 and half over P2; ROFT has one pairing.  When a
  pairing has several paths (ECMP), the sub-flow is hashed onto one of them, as an OpenFlow
  select group pins a connection to one bucket; the hash is BLAKE2b of
  ``"src>dst>request>chunk>pairing"`` (:func:`ecmp_choice`), so runs are deterministic.
  (CRC32 modulo a small path count is not: its low bits barely move when one digit of the
  key does, and consecutive requests all landed on one spine.)
* **Sharing.**  Active sub-flows get max-min fair rates over the directed hops they cross
  (progressive filling), recomputed at every arrival and completion, but only for the
  connected component of flows that share hops with those that came or went: the max-min
  allocation of the rest of the network cannot change.
* **TCP.**  A flow's goodput is ``efficiency`` times its fair share of the shaped rate
  (default :data:`DEFAULT_EFFICIENCY`), and it starts ``latency_s`` plus, per switch on
  its path, ``hop_bytes`` serialised on the hop that switch sends it on, after its transfer
  is ready (store and forward; defaults fitted to the emulation, see below).  An isolated
  transfer therefore takes that delay plus
  ``bytes_per_subflow * 8 / (subflow_port_mbps * 1e6 * efficiency)``.
* **Not modelled:** queueing delay, packet loss, slow-start dynamics beyond the fixed
  latency, unfairness between TCP flows, headers (link bytes are payload bytes, so a link
  saturated by the model shows ``util`` = ``efficiency``, not 1).

Time 0 is the workload's time origin: ``start_s`` equals ``ready_s``.
"""
from __future__ import annotations

import csv
import hashlib
import math
import os
import time
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from typing import Hashable, Iterator, Mapping, Sequence

from controller.flows import path_addresses
from controller.verify import jain

from controller.pairings import flows_for
from testbed.core.rows import LINK_FIELDS, ROW_FIELDS



# Goodput over the htb-shaped rate: single TCP flows on a link shaped to 100 Mb/s reached
# 95.4-95.5% in five runs of benchmarks/bench_emulation.py (README "Speed").
DEFAULT_EFFICIENCY = 0.954
# Delay before a sub-flow's bytes flow: ``latency_s`` plus, for every switch it crosses, the
# time to serialise ``hop_bytes`` on the hop that switch sends it on (store and forward of
# the segment a switch receives whole; with userspace TSO these are TCP segments of up to
# 64 KB).  Fitting FCT = delay + size / (rate * efficiency) to the isolated 1 MB and 5 MB
# transfers of benchmarks/bench_agents.py (README "Speed": ROFT g0->g5 crosses 3 switches at
# 100 Mb/s, 3.1 ms; ZCube 2 switches at 50 Mb/s per port, 3.6 ms) gives about 12 KB per switch
# and no fixed part.  At real scale (4 KB frames at 400 Gb/s) the same rule gives nanoseconds;
# pass hop_bytes and latency_s for the system you model.
DEFAULT_LATENCY_S = 0.0
DEFAULT_HOP_BYTES = 12_000

_SAME_TIME_S = 1e-9          # completions this close together are handled as one event
_SAME_RATE = 1e-12           # relative change below which a flow keeps its rate


# -- capacities and max-min sharing ----------------------------------------------------------

def directed_capacity(fabric, link_mbps: float) -> dict[tuple[str, str], float]:
    """Mb/s of every directed hop ``(a, b)`` at the emulation's scale; parallel cables add.
    Keys are in the order ``LinkSampler`` samples them (fabric.links, a->b then b->a)."""
    if not link_mbps > 0:
        raise ValueError(f"link_mbps must be greater than 0, got {link_mbps}")
    scale = fabric.scale_for(link_mbps)
    cap: dict[tuple[str, str], float] = {}
    for l in fabric.links:
        for hop in ((l.a, l.b), (l.b, l.a)):
            cap[hop] = cap.get(hop, 0.0) + l.gbps * 1000.0 * scale
    return cap


def max_min_share(flows: Mapping[Hashable, Sequence[Hashable]],
                  capacity: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Max-min fair rates of ``flows`` (flow -> the links it crosses) over links of the
    given ``capacity``, by progressive filling: the link offering the smallest equal share
    to its unfrozen flows is the next bottleneck; its flows are frozen at that share and
    their use is taken off the other links they cross.  Returns flow -> rate (same unit as
    the capacities).  A flow crossing no link is not rate-limited (``math.inf``)."""
    on: dict = {}
    for f, links in flows.items():
        for l in links:
            on.setdefault(l, []).append(f)
    rate = {f: math.inf for f, links in flows.items() if not links}
    rem = {l: float(capacity[l]) for l in on}
    cnt = {l: len(fs) for l, fs in on.items()}
    _fill(on, flows, rem, cnt, rate)
    return rate


def _fill(on, flow_links, rem, cnt, rate) -> None:
    """Progressive filling in place.  ``on``: link -> its flows; ``rem``/``cnt``: each link's
    capacity and number of flows (consumed); ``rate`` receives flow -> share.

    Freezing flows only raises the share the other links offer, so a heap entry is a lower
    bound of its link's share: a link whose flows changed is re-queued with its current
    share only when it reaches the top, not at every change."""
    heap = [(rem[l] / cnt[l], i, l) for i, l in enumerate(on)]
    heapify(heap)
    seq = len(heap)
    dirty = set()
    while heap:
        share, _, l = heappop(heap)
        c = cnt[l]
        if not c:
            continue                      # every flow here is frozen already
        if l in dirty:
            dirty.discard(l)
            r = rem[l]
            seq += 1
            heappush(heap, ((r if r > 0.0 else 0.0) / c, seq, l))
            continue
        for f in on[l]:
            if f in rate:
                continue
            rate[f] = share
            for l2 in flow_links[f]:
                if l2 != l:
                    cnt[l2] -= 1
                    rem[l2] -= share
                    dirty.add(l2)
        cnt[l] = 0


# -- result --------------------------------------------------------------------------------------

@dataclass
class ModelResult:
    """What :func:`simulate` computed.

    ``rows``: one dict per transfer (keys :data:`testbed.emulation.transfers.ROW_FIELDS`), in workload
    order.  ``links``: every directed hop in every ``sample_s`` interval (keys
    :data:`testbed.emulation.linkstats.FIELDS`); it is built on first use and holds
    intervals x hops rows, so for long runs on large fabrics prefer :meth:`iter_links`,
    :meth:`write_links_csv`, :meth:`link_bytes` and :meth:`link_summary`, which read the
    sparse per-hop counts.  ``events``: sub-flow arrivals plus completions;
    ``recomputations``: how many times rates were recomputed (events at the same instant
    share one); ``runtime_s``: wall-clock seconds of the simulation itself."""
    rows: list[dict]
    events: int
    recomputations: int
    runtime_s: float
    sample_s: float
    intervals: int
    capacity: dict                      # directed hop -> Mb/s
    params: dict
    _bins: dict = field(default_factory=dict, repr=False)   # hop -> {interval: int bytes}
    _links: list | None = field(default=None, repr=False)

    def _row(self, k: int, hop, b: int) -> dict:
        mbps = b * 8 / self.sample_s / 1e6
        cap = self.capacity[hop]
        return {"t_s": round((k + 1) * self.sample_s, 3), "src": hop[0], "dst": hop[1],
                "bytes": b, "mbps": round(mbps, 3),
                "util": round(mbps / cap, 4) if cap else 0.0}

    def iter_links(self) -> Iterator[dict]:
        """``links`` rows one at a time: interval by interval, hops in fabric order."""
        for k in range(self.intervals):
            for hop in self.capacity:
                yield self._row(k, hop, self._bins.get(hop, {}).get(k, 0))

    @property
    def links(self) -> list[dict]:
        if self._links is None:
            self._links = list(self.iter_links())
        return self._links

    def link_bytes(self) -> dict[tuple[str, str], int]:
        """Total bytes each directed hop carried (hops that carried nothing are left out)."""
        return {hop: sum(b.values()) for hop, b in self._bins.items() if b}

    def write_links_csv(self, path: str) -> None:
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=LINK_FIELDS)
            w.writeheader()
            w.writerows(self.iter_links())
        os.chmod(path, 0o644)

    def link_summary(self) -> dict | None:
        """Same figures as ``LinkSampler.summary()`` on ``links`` (max utilisation of any
        sample; mean and Jain's index of per-hop mean utilisation over the samples between
        the first and the last that carried anything, over hops that carried traffic), from
        the sparse counts."""
        active = {k for bins in self._bins.values() for k, b in bins.items() if b > 0}
        if not active:
            return None
        lo, hi = min(active), max(active)
        width = hi - lo + 1
        best, means = 0.0, []
        for hop, bins in self._bins.items():
            total, moved = 0.0, False
            for k, b in bins.items():
                if not b:
                    continue
                u = self._row(k, hop, b)["util"]
                best = max(best, u)
                if lo <= k <= hi and u:
                    total += u
                    moved = True
            if moved:
                means.append(total / width)
        return {"max": best,
                "mean": round(sum(means) / len(means), 4) if means else 0.0,
                "jain": round(jain(means), 4) if means else 1.0}


# -- the simulation ----------------------------------------------------------------------------

def ecmp_choice(key: str, n: int) -> int:
    """Which of ``n`` equal paths the connection named ``key`` takes (fixed, well mixed)."""
    if n <= 1:
        return 0
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") % n


def simulate(table, workload, link_mbps: float, *, sample_s: float = 0.5,
             efficiency: float = DEFAULT_EFFICIENCY,
             latency_s: float = DEFAULT_LATENCY_S,
             hop_bytes: float = DEFAULT_HOP_BYTES,
             datapath_mbps: float | None = None) -> ModelResult:
    """Carry ``workload.transfers`` over ``table.fabric`` as fluid flows (module docstring).

    ``link_mbps`` is the emulated NIC rate, as for ``Emulation``; ``sample_s`` the interval of
    the ``links`` rows; ``efficiency`` (0 < e <= 1) the goodput fraction of a flow's fair
    share; ``latency_s`` (>= 0) the fixed delay between a transfer being ready and its
    sub-flows starting to send, and ``hop_bytes`` (>= 0) what each switch on a path stores
    before forwarding, serialised at the rate of the hop it forwards on (module docstring).

    ``datapath_mbps`` models the emulator itself, for comparing with it: one forwarding
    thread that every packet crosses once per switch, shared by all flows, with this much
    goodput in Mb/s times switches crossed (from the emulation's iperf3 calibration).  A
    flow crossing k switches uses k units of it per byte.  It joins every flow into one
    max-min problem, so it is for small fabrics.  None (default): a real fabric, no such
    limit."""
    if not sample_s > 0:
        raise ValueError(f"sample_s must be greater than 0, got {sample_s}")
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    if not latency_s >= 0:
        raise ValueError(f"latency_s must be >= 0, got {latency_s}")
    if not hop_bytes >= 0:
        raise ValueError(f"hop_bytes must be >= 0, got {hop_bytes}")
    wall0 = time.perf_counter()
    fabric = table.fabric
    capacity = directed_capacity(fabric, link_mbps)
    hops = list(capacity)
    hop_index = {h: i for i, h in enumerate(hops)}
    # goodput capacity per hop index, bytes per second
    cap_bps = [capacity[h] * 1e6 / 8 * efficiency for h in hops]
    for h, c in capacity.items():
        if not c > 0:
            raise ValueError(f"hop {h[0]}->{h[1]} has no capacity")
    n_hops = len(hops)
    dp = None                                  # index of the shared datapath, if modelled
    if datapath_mbps is not None:
        if not datapath_mbps > 0:
            raise ValueError(f"datapath_mbps must be greater than 0, got {datapath_mbps}")
        dp = n_hops
        cap_bps.append(datapath_mbps * 1e6 / 8)

    # -- sub-flows: (start time, transfer, bytes, hop indices) --------------------------
    routes: dict[tuple[str, str], list] = {}        # pair -> [(pairing, [hop tuples])]

    def route(src, dst):
        r = routes.get((src, dst))
        if r is None:
            by_pairing: dict = {}
            for p in table.paths(src, dst):
                by_pairing.setdefault(path_addresses(fabric, p)[:2], []).append(
                    tuple(hop_index[(p[i], p[i + 1])] for i in range(len(p) - 1)))
            # flows_for fixes the order of the pairings and so which gets the odd bytes
            order = [(f["src"], f["dst"]) for f in flows_for(table, src, dst, 0)]
            r = routes[(src, dst)] = [(k, by_pairing[pr]) for k, pr in enumerate(order)]
        return r

    transfers = workload.transfers
    n_t = len(transfers)
    # store-and-forward delay of each hop a switch sends on, seconds
    hop_delay = [hop_bytes * 8 / (capacity[h] * 1e6) if fabric.is_switch(h[0]) else 0.0
                 for h in hops]
    sub_start, sub_transfer, sub_bytes, sub_links = [], [], [], []
    n_sub = [0] * n_t
    first_delay = [latency_s] * n_t
    for i, t in enumerate(transfers):
        r = route(t.src, t.dst)
        share, extra = divmod(int(t.bytes), len(r))
        n_sub[i] = len(r)
        for k, paths in r:
            path = paths[ecmp_choice(f"{t.src}>{t.dst}>{t.request}>{t.chunk}>{k}", len(paths))]
            delay = latency_s + sum(hop_delay[h] for h in path)
            sub_start.append(t.ready_s + delay)
            sub_transfer.append(i)
            sub_bytes.append(share + (1 if k < extra else 0))
            # the datapath, once per switch crossed: a weight in the max-min problem
            sub_links.append(path if dp is None else path + (dp,) * (len(path) - 1))
            first_delay[i] = delay if k == 0 else min(first_delay[i], delay)
    n_f = len(sub_start)
    arrivals = sorted(range(n_f), key=lambda f: (sub_start[f], f))

    # -- state --------------------------------------------------------------------------
    rem = [float(b) for b in sub_bytes]       # bytes still to send
    rate = [0.0] * n_f                        # bytes/s
    last = [0.0] * n_f                        # when rem was last brought up to date
    ver = [0] * n_f                           # completion-heap entry that is current
    flows_on: list[set] = [set() for _ in cap_bps]
    bins: list[dict] = [{} for _ in cap_bps]  # hop -> {interval: float bytes}
    t_end = [0.0] * n_t
    left = list(n_sub)
    heap: list = []
    events = recomputations = 0
    inf = math.inf

    def spread(links, t0, t1, nbytes):
        """Credit ``nbytes`` sent evenly over [t0, t1] to every hop of ``links``."""
        if nbytes <= 0:
            return
        k0 = int(t0 // sample_s)
        k1 = max(k0, math.ceil(t1 / sample_s) - 1)
        if k1 == k0:
            for l in links:
                b = bins[l]
                b[k0] = b.get(k0, 0.0) + nbytes
            return
        per_s = nbytes / (t1 - t0)
        parts, done = [], 0.0
        for k in range(k0, k1):
            x = per_s * (min(t1, (k + 1) * sample_s) - max(t0, k * sample_s))
            parts.append((k, x))
            done += x
        parts.append((k1, nbytes - done))
        for l in links:
            b = bins[l]
            for k, x in parts:
                b[k] = b.get(k, 0.0) + x

    def finish(f, tf):
        spread(sub_links[f], last[f], tf, rem[f])
        rem[f] = 0.0
        for l in sub_links[f]:
            flows_on[l].discard(f)
        i = sub_transfer[f]
        left[i] -= 1
        if tf > t_end[i]:
            t_end[i] = tf

    ai = 0
    while ai < n_f or heap:
        while heap and heap[0][2] != ver[heap[0][1]]:
            heappop(heap)
        t_arr = sub_start[arrivals[ai]] if ai < n_f else inf
        t_done = heap[0][0] if heap else inf
        now = t_arr if t_arr < t_done else t_done
        if now == inf:
            break
        seeds: list = []
        while heap and heap[0][0] <= now + _SAME_TIME_S:
            tf, f, v = heappop(heap)
            if v != ver[f]:
                continue
            finish(f, tf)
            events += 1
            seeds.extend(sub_links[f])
        while ai < n_f and sub_start[arrivals[ai]] <= now:
            f = arrivals[ai]
            ai += 1
            events += 1
            last[f] = now
            if sub_bytes[f] == 0:             # nothing to send: done when it starts
                finish(f, now)
                events += 1
                continue
            for l in sub_links[f]:
                flows_on[l].add(f)
            seeds.extend(sub_links[f])
        if not seeds:
            continue
        # connected component of flows sharing hops with those that came or went
        seen_l = set(seeds)
        stack = list(seen_l)
        comp: list = []
        seen_f: set = set()
        while stack:
            l = stack.pop()
            for f in flows_on[l]:
                if f not in seen_f:
                    seen_f.add(f)
                    comp.append(f)
                    for l2 in sub_links[f]:
                        if l2 not in seen_l:
                            seen_l.add(l2)
                            stack.append(l2)
        if not comp:
            continue
        recomputations += 1
        on = {l: flows_on[l] for l in seen_l if flows_on[l]}
        new: dict = {}
        cnt = {l: len(fs) for l, fs in on.items()}
        if dp in cnt:                         # weighted: switches crossed per flow
            cnt[dp] = sum(sub_links[f].count(dp) for f in on[dp])
        _fill(on, sub_links, {l: cap_bps[l] for l in on}, cnt, new)
        for f in comp:
            r_new, r_old = new[f], rate[f]
            if r_old and abs(r_new - r_old) <= _SAME_RATE * r_old:
                continue                      # unchanged: its completion entry stands
            if r_old:
                sent = r_old * (now - last[f])
                if sent > rem[f]:
                    sent = rem[f]
                spread(sub_links[f], last[f], now, sent)
                rem[f] -= sent
            last[f] = now
            rate[f] = r_new
            ver[f] += 1
            heappush(heap, (now + rem[f] / r_new, f, ver[f]))

    # -- outputs --------------------------------------------------------------------------
    rows = []
    for i, t in enumerate(transfers):
        start = t.ready_s
        end = t_end[i] if n_sub[i] else start
        rows.append({"request": t.request, "chunk": t.chunk, "src": t.src, "dst": t.dst,
                     "pairings": n_sub[i], "bytes": t.bytes, "ready_s": round(t.ready_s, 6),
                     "start_s": round(start, 6), "first_byte_s": round(start + first_delay[i], 6),
                     "end_s": round(end, 6), "fct_ms": round((end - start) * 1000, 3),
                     "bytes_received": t.bytes, "verified": True, "status": "ok",
                     "attempts": 1})
    int_bins: dict = {}
    intervals = 0
    for l, b in enumerate(bins[:n_hops]):    # the datapath is no link: not in links.csv
        if not b:
            continue
        out, acc, prev = {}, 0.0, 0
        for k in sorted(b):                   # cumulative rounding: totals stay exact
            acc += b[k]
            cur = round(acc)
            if cur != prev:
                out[k] = cur - prev
            prev = cur
        if out:
            int_bins[hops[l]] = out
            intervals = max(intervals, max(out) + 1)
    return ModelResult(rows=rows, events=events, recomputations=recomputations,
                       runtime_s=time.perf_counter() - wall0, sample_s=sample_s,
                       intervals=intervals, capacity=capacity,
                       params={"backend": "model", "policy": table.policy_name,
                               "link_mbps": link_mbps, "efficiency": efficiency,
                               "latency_s": latency_s, "hop_bytes": hop_bytes,
                               "datapath_mbps": datapath_mbps,
                               "sample_s": sample_s},
                       _bins=int_bins)
