"""The event loop of the flow-level model: sub-flow arrivals and completions, max-min rates
recomputed only for the flows that share resources with those that came or went, and each
kept-open connection sending its sub-flows one after another."""
from __future__ import annotations

import math
from collections import deque
from heapq import heappop, heappush

from testbed.model.flows import SubFlows
from testbed.model.sharing import fill

_SAME_TIME_S = 1e-9          # completions this close together are handled as one event
_SAME_RATE = 1e-12           # relative change below which a flow keeps its rate


def spread(bins: list, links, t0: float, t1: float, nbytes: float, sample_s: float) -> None:
    """Credit ``nbytes`` sent evenly over [t0, t1] to every resource of ``links``, in the
    ``sample_s`` intervals of ``bins`` (resource -> {interval: float bytes})."""
    if nbytes <= 0:
        return
    k0 = int(t0 // sample_s)
    k1 = max(k0, math.ceil(t1 / sample_s) - 1)
    if k1 == k0:
        for link in links:
            b = bins[link]
            b[k0] = b.get(k0, 0.0) + nbytes
        return
    per_s = nbytes / (t1 - t0)
    parts, done = [], 0.0
    for k in range(k0, k1):
        x = per_s * (min(t1, (k + 1) * sample_s) - max(t0, k * sample_s))
        parts.append((k, x))
        done += x
    parts.append((k1, nbytes - done))
    for link in links:
        b = bins[link]
        for k, x in parts:
            b[k] = b.get(k, 0.0) + x


def component(flows_on: list, links: list, seeds) -> tuple[list, set]:
    """The flows sharing resources, directly or through others, with the resources
    ``seeds``, in discovery order, and every resource they cross (seeds included)."""
    seen_l = set(seeds)
    stack = list(seen_l)
    comp: list = []
    seen_f: set = set()
    while stack:
        link = stack.pop()
        for f in flows_on[link]:
            if f not in seen_f:
                seen_f.add(f)
                comp.append(f)
                for link2 in links[f]:
                    if link2 not in seen_l:
                        seen_l.add(link2)
                        stack.append(link2)
    return comp, seen_l


class EventLoop:
    """The state of one simulation: per sub-flow its bytes left, rate (bytes/s), when its
    bytes left were last brought up to date and its rate's version; per resource its
    active flows and bytes per interval; per busy kept-open connection the sub-flows queued
    on it; per transfer when its first sub-flow started and its last one finished."""

    def __init__(self, subs: SubFlows, cap_bps: list, dp, sample_s: float, faults=None):
        n_f = len(subs)
        self.faults = faults                # testbed.model.faults.ModelFaults, or None
        self.begun = [False] * n_f
        self.stalled: dict = {}             # sub-flow -> since when a dead hop holds it
        self.gap: dict = {}                 # transfer -> (longest stall, when it ended)
        self.subs, self.links = subs, subs.links
        self.cap_bps, self.dp, self.sample_s = cap_bps, dp, sample_s
        self.rem = [float(b) for b in subs.nbytes]
        self.rate = [0.0] * n_f
        self.last = [0.0] * n_f
        self.ver = [0] * n_f
        self.flows_on: list[set] = [set() for _ in cap_bps]
        self.bins: list[dict] = [{} for _ in cap_bps]
        self.t_first = [math.inf] * len(subs.n_sub)
        self.t_end = [0.0] * len(subs.n_sub)
        self.waiting: dict[int, deque] = {}  # busy connection -> sub-flows queued behind
        self.heap: list = []
        self.events = 0                     # sub-flow arrivals plus completions
        self.recomputations = 0             # instants at which rates were recomputed

    def run(self) -> "EventLoop":
        """Run every sub-flow to completion."""
        arrivals = self.subs.arrivals()
        start, heap, ver = self.subs.start, self.heap, self.ver
        n_f = len(arrivals)
        inf = math.inf
        ai = 0
        faults = self.faults
        while ai < n_f or heap or (faults and faults.todo):
            while heap and heap[0][2] != ver[heap[0][1]]:
                heappop(heap)
            t_arr = start[arrivals[ai]] if ai < n_f else inf
            t_done = heap[0][0] if heap else inf
            now = t_arr if t_arr < t_done else t_done
            if faults is not None and faults.next_s() <= now:
                now = faults.next_s()
            if now == inf:
                break
            seeds = self._complete(now)
            if faults is not None and faults.next_s() <= now:
                seeds += faults.run_due(now, self)
            ai = self._arrive(now, arrivals, ai, seeds)
            if not seeds:
                continue
            comp, seen_l = component(self.flows_on, self.links, seeds)
            if not comp:
                continue
            self.recomputations += 1
            self._reshare(comp, seen_l, now)
        return self

    def _complete(self, now: float) -> list:
        """Finish the flows due by ``now``; the resources they crossed."""
        heap, ver, links = self.heap, self.ver, self.links
        seeds: list = []
        while heap and heap[0][0] <= now + _SAME_TIME_S:
            tf, f, v = heappop(heap)
            if v != ver[f]:
                continue
            self._finish(f, tf)
            self.events += 1
            seeds.extend(links[f])
            self._next_on(f, tf, seeds)
        return seeds

    def _arrive(self, now: float, arrivals: list, ai: int, seeds: list) -> int:
        """Start the flows due by ``now`` from ``arrivals[ai]`` on, or queue those whose
        connection is busy, adding the resources they cross to ``seeds``; the index of the
        next arrival."""
        start, conn, waiting = self.subs.start, self.subs.conn, self.waiting
        n_f = len(arrivals)
        while ai < n_f and start[arrivals[ai]] <= now:
            f = arrivals[ai]
            ai += 1
            self.events += 1
            c = conn[f]
            if c >= 0:
                if c in waiting:
                    waiting[c].append(f)
                    continue
                waiting[c] = deque()
            if not self._start(f, now, seeds):
                self._next_on(f, now, seeds)
        return ai

    def _start(self, f: int, t: float, seeds: list) -> bool:
        """Let ``f`` send from ``t`` on, adding the resources it crosses to ``seeds``;
        False if it had nothing to send (it is done at once)."""
        i = self.subs.transfer[f]
        if t < self.t_first[i]:
            self.t_first[i] = t
        self.begun[f] = True
        self.last[f] = t
        if self.subs.nbytes[f] == 0:
            self._finish(f, t)
            self.events += 1
            return False
        for link in self.links[f]:
            self.flows_on[link].add(f)
        seeds.extend(self.links[f])
        return True

    def _next_on(self, f: int, t: float, seeds: list) -> None:
        """``f`` is done at ``t``: the sub-flows queued on its connection start in turn
        until one has bytes to send, or the connection is idle."""
        c = self.subs.conn[f]
        if c < 0:
            return
        q = self.waiting[c]
        while q:
            if self._start(q.popleft(), t, seeds):
                return
        del self.waiting[c]

    def _finish(self, f: int, tf: float) -> None:
        links = self.links[f]
        spread(self.bins, links, self.last[f], tf, self.rem[f], self.sample_s)
        self.rem[f] = 0.0
        for link in links:
            self.flows_on[link].discard(f)
        i = self.subs.transfer[f]
        if tf > self.t_end[i]:
            self.t_end[i] = tf

    def missing(self) -> dict:
        """Per transfer cut off by a fault, the bytes it never delivered (none without
        faults: every sub-flow completes)."""
        out: dict = {}
        if self.faults is not None:
            for f, i in enumerate(self.subs.transfer):
                if not self.begun[f] or self.rem[f] > 0:
                    out[i] = out.get(i, 0) + round(self.rem[f])
        return out

    def repin(self, f: int, links: tuple, now: float, seeds: list) -> None:
        """Move sub-flow ``f`` onto the resources ``links`` from ``now`` on: one sending has
        its bytes brought up to date and leaves the old ones, both added to ``seeds``."""
        old = self.links[f]
        if self.begun[f] and self.rem[f] > 0:
            r = self.rate[f]
            if r:
                sent = min(r * (now - self.last[f]), self.rem[f])
                spread(self.bins, old, self.last[f], now, sent, self.sample_s)
                self.rem[f] -= sent
            self.last[f] = now
            self.rate[f] = 0.0
            self.ver[f] += 1
            for link in old:
                self.flows_on[link].discard(f)
            for link in links:
                self.flows_on[link].add(f)
            seeds.extend(old)
            seeds.extend(links)
            self.stalled.setdefault(f, now)
        self.links[f] = links

    def _stall(self, f: int, now: float, r_new: float) -> None:
        """Keep the longest wait of each transfer behind a dead hop (from when a sub-flow's
        rate fell to 0 to when it rose again)."""
        if r_new <= 0:
            self.stalled.setdefault(f, now)
            return
        since = self.stalled.pop(f, None)
        if since is not None and now > since:
            i = self.subs.transfer[f]
            if now - since > self.gap.get(i, (0.0, 0.0))[0]:
                self.gap[i] = (now - since, now)

    def _reshare(self, comp: list, seen_l: set, now: float) -> None:
        """Max-min rates of the flows of ``comp`` over the resources ``seen_l``; a flow
        whose rate changed is brought up to date and gets a new completion entry."""
        flows_on, links, dp, cap_bps = self.flows_on, self.links, self.dp, self.cap_bps
        on = {link: flows_on[link] for link in seen_l if flows_on[link]}
        new: dict = {}
        cnt = {link: len(fs) for link, fs in on.items()}
        if dp in cnt:                         # weighted: switches crossed per flow
            cnt[dp] = sum(links[f].count(dp) for f in on[dp])
        fill(on, links, {link: cap_bps[link] for link in on}, cnt, new)
        rate, rem, last, ver, heap = self.rate, self.rem, self.last, self.ver, self.heap
        bins, sample_s = self.bins, self.sample_s
        for f in comp:
            r_new, r_old = new[f], rate[f]
            if r_old and abs(r_new - r_old) <= _SAME_RATE * r_old:
                continue                      # unchanged: its completion entry stands
            if r_old:
                sent = r_old * (now - last[f])
                if sent > rem[f]:
                    sent = rem[f]
                spread(bins, links[f], last[f], now, sent, sample_s)
                rem[f] -= sent
            last[f] = now
            rate[f] = r_new
            ver[f] += 1
            if self.faults is not None:
                self._stall(f, now, r_new)
            if r_new > 0:
                heappush(heap, (now + rem[f] / r_new, f, ver[f]))
