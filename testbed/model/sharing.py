"""Max-min fair sharing by progressive filling.

:func:`max_min_share` is the textbook form (flows and links by name); :func:`fill` is the
in-place core the event loop calls on one connected component of flows, with link counts
that may be weights (the datapath resource counts each flow once per switch it crosses).
"""
from __future__ import annotations

import math
from heapq import heapify, heappop, heappush
from typing import Hashable, Mapping, Sequence


def max_min_share(flows: Mapping[Hashable, Sequence[Hashable]],
                  capacity: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Max-min fair rates of ``flows`` (flow -> the links it crosses) over links of the
    given ``capacity``, by progressive filling: the link offering the smallest equal share
    to its unfrozen flows is the next bottleneck; its flows are frozen at that share and
    their use is taken off the other links they cross.  Returns flow -> rate (same unit as
    the capacities).  A flow crossing no link is not rate-limited (``math.inf``)."""
    on: dict = {}
    for f, links in flows.items():
        for link in links:
            on.setdefault(link, []).append(f)
    rate = {f: math.inf for f, links in flows.items() if not links}
    rem = {link: float(capacity[link]) for link in on}
    cnt = {link: len(fs) for link, fs in on.items()}
    fill(on, flows, rem, cnt, rate)
    return rate


def fill(on, flow_links, rem, cnt, rate) -> None:
    """Progressive filling in place.  ``on``: link -> its flows; ``rem``/``cnt``: each link's
    capacity and number of flows (consumed); ``rate`` receives flow -> share.

    Freezing flows only raises the share the other links offer, so a heap entry is a lower
    bound of its link's share: a link whose flows changed is re-queued with its current
    share only when it reaches the top, not at every change."""
    heap = [(rem[link] / cnt[link], i, link) for i, link in enumerate(on)]
    heapify(heap)
    seq = len(heap)
    dirty = set()
    while heap:
        share, _, link = heappop(heap)
        c = cnt[link]
        if not c:
            continue                      # every flow here is frozen already
        if link in dirty:
            dirty.discard(link)
            r = rem[link]
            seq += 1
            heappush(heap, ((r if r > 0.0 else 0.0) / c, seq, link))
            continue
        for f in on[link]:
            if f in rate:
                continue
            rate[f] = share
            for link2 in flow_links[f]:
                if link2 != link:
                    cnt[link2] -= 1
                    rem[link2] -= share
                    dirty.add(link2)
        cnt[link] = 0
