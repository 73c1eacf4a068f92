"""Capacities and resources of the flow-level model: each directed hop, and the emulator's
forwarding thread when modelled, is a resource a sub-flow can be limited by (goodput in
bytes per second)."""
from __future__ import annotations

from dataclasses import dataclass


def directed_capacity(fabric, link_mbps: float,
                      dead=frozenset()) -> dict[tuple[str, str], float]:
    """Mb/s of every directed hop ``(a, b)`` at the emulation's scale; parallel cables add.
    Keys are in the order ``LinkSampler`` samples them (fabric.links, a->b then b->a), then
    the NVLinks inside the servers; the cables in ``dead`` count nothing."""
    if not link_mbps > 0:
        raise ValueError(f"link_mbps must be greater than 0, got {link_mbps}")
    scale = fabric.scale_for(link_mbps)
    cap: dict[tuple[str, str], float] = {}
    for cable in fabric.links + fabric.nvlinks:
        for hop in ((cable.a, cable.b), (cable.b, cable.a)):
            cap[hop] = cap.get(hop, 0.0) + (0.0 if cable in dead else
                                            cable.gbps * 1000.0 * scale)
    return cap


def goodput_bps(mbps: float, efficiency: float) -> float:
    """Bytes per second a hop of ``mbps`` carries at ``efficiency``."""
    return mbps * 1e6 / 8 * efficiency


@dataclass
class Resources:
    """The resources flows share, by index (hops first, then the datapath if modelled)."""
    capacity: dict                  # directed hop -> Mb/s (the emulation's scale)
    hops: list                      # directed hops in sampling order; index = resource id
    hop_index: dict                 # directed hop -> its index
    cap_bps: list                   # goodput capacity of each resource, bytes per second
    hop_delay: list                 # store-and-forward delay of each hop, seconds
    dp: int | None                  # index of the shared datapath, None when not modelled

    @property
    def n_hops(self) -> int:
        return len(self.hops)


def check_params(sample_s: float, efficiency: float, latency_s: float,
                 hop_bytes: float) -> None:
    """Raise ValueError for a simulation parameter out of its range."""
    if not sample_s > 0:
        raise ValueError(f"sample_s must be greater than 0, got {sample_s}")
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    if not latency_s >= 0:
        raise ValueError(f"latency_s must be >= 0, got {latency_s}")
    if not hop_bytes >= 0:
        raise ValueError(f"hop_bytes must be >= 0, got {hop_bytes}")


def resources(fabric, link_mbps: float, efficiency: float, hop_bytes: float,
              datapath_mbps: float | None = None) -> Resources:
    """The resources of ``fabric`` at the emulated NIC rate ``link_mbps``.

    A hop's goodput is ``efficiency`` times its shaped rate; a hop a switch sends on delays
    a sub-flow by the time to serialise ``hop_bytes`` on it.  ``datapath_mbps`` adds the
    emulator's one forwarding thread as a resource of that goodput (not scaled by
    ``efficiency``: it is measured as goodput)."""
    capacity = directed_capacity(fabric, link_mbps)
    hops = list(capacity)
    hop_index = {h: i for i, h in enumerate(hops)}
    cap_bps = [goodput_bps(capacity[h], efficiency) for h in hops]
    for h, c in capacity.items():
        if not c > 0:
            raise ValueError(f"hop {h[0]}->{h[1]} has no capacity")
    dp = None
    if datapath_mbps is not None:
        if not datapath_mbps > 0:
            raise ValueError(f"datapath_mbps must be greater than 0, got {datapath_mbps}")
        dp = len(hops)
        cap_bps.append(datapath_mbps * 1e6 / 8)
    hop_delay = [hop_bytes * 8 / (capacity[h] * 1e6) if fabric.is_switch(h[0]) else 0.0
                 for h in hops]
    return Resources(capacity=capacity, hops=hops, hop_index=hop_index, cap_bps=cap_bps,
                     hop_delay=hop_delay, dp=dp)
