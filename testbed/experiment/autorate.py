"""``link_mbps: auto`` (pure): the largest emulated NIC rate at which a workload's peak offered
load, in bytes x switches crossed per second, stays under :data:`SHARE` of the forwarding
ceiling the backend measured (``Backend.forwarding_ceiling``), as the emulator forwards every
packet at every switch it crosses on one thread.
"""
from __future__ import annotations

import math

from controller.pairings import flows_for, mean_switches
from traffic.workload import dilate

WINDOW_S = 0.1          # the window of the peak offered load
# the share of the forwarding ceiling the peak may use: at half, the demo's isolated transfers
# took 1.12x their ideal (not faithful); at a quarter its runs were faithful
SHARE = 0.25
REFERENCE_MBPS = 100.0  # the rate the peak is computed at (it scales with the rate)
PROBE_MBPS = 1000.0     # the rate the ceiling is measured at, and the most auto picks
MIN_MBPS = 1.0          # below this the product refuses (nothing fits)


def peak_switch_mbps(table, work, link_mbps: float, window_s: float = WINDOW_S) -> float:
    """The busiest ``window_s`` window of ``work``'s offered load, in Mb/s x switches
    crossed, with NICs at ``link_mbps`` (``work`` built at that rate): each transfer's bytes
    spread evenly over the time it would take alone (size over its source's NIC rate, from its
    ready time), times the switches its paths cross.  With links and sizes scaled alike, a
    transfer lasts as long at any rate, so the load grows in proportion to the rate."""
    fab = table.fabric
    port_gbps = {p.ip: p.gbps for h in fab.hosts for p in h.ports}
    scale = fab.scale_for(link_mbps)
    bins: dict[int, float] = {}
    for t in work.transfers:
        hops = mean_switches(table, t.src, t.dst)
        for f in flows_for(table, t.src, t.dst, t.bytes):
            bits = f["bytes"] * 8.0 * hops
            rate = port_gbps[f["src"]] * 1e9 * scale          # bits/s of its port
            start, end = t.ready_s, t.ready_s + f["bytes"] * 8.0 / rate
            k = int(start // window_s)
            while k * window_s < end:
                lo, hi = max(start, k * window_s), min(end, (k + 1) * window_s)
                bins[k] = bins.get(k, 0.0) + bits * (hi - lo) / max(end - start, 1e-12)
                k += 1
    return max(bins.values(), default=0.0) / window_s / 1e6


def peak_per_mbps(table, works, dilation: float = 1.0) -> float:
    """The highest peak offered load of ``works`` (built at :data:`REFERENCE_MBPS`) per
    Mb/s of NIC rate, run ``dilation`` times slower."""
    return max((peak_switch_mbps(table, dilate(w, dilation), REFERENCE_MBPS)
                for w in works), default=0.0) / REFERENCE_MBPS


def round_down(x: float) -> float:
    """``x`` rounded down to two significant figures (137.9 -> 130, 8.74 -> 8.7)."""
    if x <= 0:
        return 0.0
    step = 10 ** (math.floor(math.log10(x)) - 1)
    return round(math.floor(x / step + 1e-9) * step, 6)


def choose(fabrics: dict, background_switch_mbps: float = 0.0,
           share: float = SHARE) -> dict:
    """The rate from ``{fabric name: {"ceiling": Mb/s x switches, "per_mbps": peak per
    Mb/s}}``: the largest, to two figures, at which every fabric's peak offered load plus
    the background stays under ``share`` of that fabric's ceiling; at most
    :data:`PROBE_MBPS`.  Returns the record runs keep (``link_mbps`` None when nothing
    fits)."""
    fits = {}
    for name, f in fabrics.items():
        room = share * f["ceiling"] - background_switch_mbps
        fits[name] = PROBE_MBPS if f["per_mbps"] <= 0 else room / f["per_mbps"]
    binding = min(fits, key=fits.get)
    rate = round_down(min(PROBE_MBPS, fits[binding]))
    return {"link_mbps": rate if rate >= MIN_MBPS else None, "binding": binding,
            "share": share, "window_s": WINDOW_S, "probe_mbps": PROBE_MBPS,
            "background_switch_mbps": round(background_switch_mbps, 2),
            "fabrics": {n: {"ceiling_switch_mbps": round(f["ceiling"], 1),
                            "peak_switch_mbps_per_mbps": round(f["per_mbps"], 4),
                            "fits_mbps": round(fits[n], 1)} for n, f in fabrics.items()}}


def describe(choice: dict) -> str:
    """One line for the console: what was picked and why."""
    b = choice["fabrics"][choice["binding"]]
    rate = choice["link_mbps"]
    head = (f"link_mbps auto: {rate:g} Mb/s per GPU" if rate else
            "link_mbps auto: no rate fits")
    return (f"{head} ({choice['binding']} binds: its peak offered load is "
            f"{b['peak_switch_mbps_per_mbps']:.3g} Mb/s x switches per Mb/s of NIC rate in "
            f"{choice['window_s'] * 1000:.0f} ms windows, against {choice['share']:.0%} of the "
            f"{b['ceiling_switch_mbps']:,.0f} Mb/s x switches it forwarded at "
            f"{choice['probe_mbps']:g} Mb/s in calibration)")


def _background_switch_mbps(table, sc) -> float:
    """Background iperf3 (every host at its ``mbps``) in Mb/s x switches, each flow taken
    to cross the fabric's mean number of switches between two hosts."""
    bg = getattr(sc, "background", None)
    if bg is None:
        return 0.0
    hosts = [h.name for h in table.fabric.hosts]
    pairs = [(a, b) for a in hosts for b in hosts if a != b]
    mean = sum(mean_switches(table, a, b) for a, b in pairs) / max(len(pairs), 1)
    return len(hosts) * bg.mbps * mean


def resolve(sc, be, reqs: dict, workload_for, log):
    """``sc`` with ``link_mbps`` chosen (:func:`choose`): each fabric's forwarding ceiling
    measured by ``be`` at :data:`PROBE_MBPS`, and its workloads (every placement and seed,
    ``reqs[seed][0]`` the requests) built by ``workload_for(sc, fabric, placement, seed,
    requests)``.  The choice is kept as the copy's ``auto_choice``."""
    from controller.routing import RouteTable
    from testbed.core.backend import RunError, SessionOptions
    probe = SessionOptions(link_mbps=PROBE_MBPS, verify_sample=sc.verify_sample, log=log,
                           calibration_s=sc.calibration_s, emulation=sc.emulation)
    ref = sc.with_rate(REFERENCE_MBPS)
    fabrics, background = {}, 0.0
    for spec in sc.fabrics:
        fabric = spec.build()
        policy = spec.route_policy(fabric)
        ceiling = be.forwarding_ceiling(fabric, policy, probe)
        if ceiling is None:
            raise RunError(f"link_mbps: auto picks the rate from the emulator's measured "
                           f"forwarding ceiling, which the {be.name} backend does not have: "
                           f"give link_mbps a number")
        table = RouteTable(fabric, policy)
        works = [workload_for(ref, fabric, p, seed, reqs[seed][0])
                 for p in sc.placements for seed in reqs]
        fabrics[spec.name] = {"ceiling": ceiling,      # its links at link_mbps / extra
                              "per_mbps": peak_per_mbps(table, works, sc.time_dilation)
                              / spec.slower_on(be.name)}
        background = max(background, _background_switch_mbps(table, sc))
    choice = choose(fabrics, background)
    log(describe(choice))
    if choice["link_mbps"] is None:
        raise RunError(describe(choice) + ": lower the load, or give link_mbps a number and "
                       "--force")
    return sc.with_rate(choice["link_mbps"], choice)
