"""A workload's KV transfers run over an emulated fabric for real: each split over its NIC
port pairings, posted on kept-open connections from seeded source ports (or one connection
per flow), verified byte for byte, and returned as one row per transfer."""
from __future__ import annotations

import random
import time
from collections import defaultdict

from controller.pairings import flows_for
from testbed.core.backend import TRANSPORTS
from testbed.core.records import transfer_row
from testbed.emulation.pin_requests import pinning_paths, post_pins, workload_pins
from traffic.kvpool import RESTART_LANE
from traffic.workload import workload_key

LIVE_POLL_S = 1.0     # with a progress callback, polls while transfers are being started
POLL_S = 0.2          # the longest wait between two polls of the senders' progress
RETRY_S = 30.0        # a flow whose connection dies is tried again over other pairings this long
PORTS = range(10000, 30000)   # seeded source ports: below Linux's ephemeral range (32768-)


def source_ports(key: str, host: str, pairings) -> list[int]:
    """Distinct source ports for one host's ``pairings``, drawn from ``key``."""
    return random.Random(f"{key}:{host}").sample(PORTS, len(pairings))


def connections_by_host(table, workload) -> tuple[dict[str, list], dict[str, list]]:
    """In one pass over the workload's flows, per source host: the (source IP, destination
    IP) pairings its transfers use, with the lane as a third element under ``spray`` (a
    connection each); and the first spare connection (:data:`traffic.kvpool.RESTART_LANE`)
    of the pairing each flow moves to first when its own goes down (its first alternate), as
    ``(source IP, destination IP, lane)``: a run with faults opens those with the others, as
    spare queue pairs set up once, so a moved transfer needs no handshake behind the queue
    of the port it moves to."""
    used: dict[str, set] = defaultdict(set)
    spare: dict[str, set] = defaultdict(set)
    for t in workload.transfers:
        for f in flows_for(table, t.src, t.dst, 1):
            used[t.src].add((f["src"], f["dst"]) + ((f["lane"],) if "lane" in f else ()))
            if f["alternates"]:
                src, dst = f["alternates"][0]
                spare[t.src].add((src, dst, f.get("lane", 0) + RESTART_LANE))
    return ({h: sorted(p) for h, p in used.items()}, {h: sorted(p) for h, p in spare.items()})


def pairings_by_host(table, workload) -> dict[str, list]:
    """The pairings of :func:`connections_by_host`."""
    return connections_by_host(table, workload)[0]


def spares_by_host(table, workload) -> dict[str, list]:
    """The spare connections of :func:`connections_by_host`."""
    return connections_by_host(table, workload)[1]


def open_connections(emu, workload, seeded: bool = True,
                     spares: bool = False) -> tuple[dict, int]:
    """Open and warm up every kept-open connection the workload will use, all hosts at
    once, from the workload's :func:`source_ports` (``seeded=False``: keep those open, any
    port for new ones), and with ``spares`` the first spare of each pairing a flow moves to
    (:func:`spares_by_host`, from any port); ``{pairing: error}`` for those that failed,
    and how many could not have their port."""
    wanted, extra = connections_by_host(emu.table, workload)
    extra = extra if spares else {}
    hosts = sorted(set(wanted) | set(extra))
    key = workload_key(workload) if seeded else None
    ports = {h: source_ports(key, h, p) for h, p in wanted.items()} if key else {}
    if ports:                                  # on the paths the other backends draw
        pins = workload_pins(emu.table, workload, wanted, ports) if pinning_paths(emu) else []
        if pins or emu.pins:
            post_pins(emu, pins)
    for host in hosts:
        pairs, more = wanted.get(host, []), extra.get(host, [])
        msg = {"op": "connect", "pairings": pairs + more, "warmup": True}
        if key:
            msg["ports"] = ports.get(host, []) + [0] * len(more)
        emu.agent(host).post(msg)
    errors, moved = {}, 0
    for host in hosts:
        reply = emu.agent(host).reply()
        errors.update(reply.get("errors") or {})
        moved += reply.get("moved") or 0
    return errors, moved


def run_transfers(emu, workload, start_delay_s: float = 1.0, corrupt: set | None = None,
                  timeout_s: float | None = None, t0: float | None = None,
                  retry_s: float = RETRY_S, transport: str = "pool",
                  progress=None) -> list[dict]:
    """Run every transfer of ``workload`` on ``emu``; ``corrupt`` (transfer indices) makes
    those senders flip a byte, to prove the receiver notices.  Workload time 0 is ``t0``
    (wall clock; default ``start_delay_s`` from now, after the pool's connections are
    open).  ``progress(share, rows=None)``: the share of flows sent, at every poll (while
    transfers are still being started, one poll a second, with the rows so far)."""
    corrupt = corrupt or set()
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    if transport == "pool" and t0 is None:
        open_connections(emu, workload, seeded=False)
    jobs_by_host: dict[str, list] = defaultdict(list)
    meta = {}
    t0 = time.time() + start_delay_s if t0 is None else t0
    for i, t in enumerate(workload.transfers):
        job_id = f"t{i}"
        flows = flows_for(emu.table, t.src, t.dst, t.bytes)
        jobs_by_host[t.src].append({"id": job_id, "at": t0 + t.ready_s, "flows": flows,
                                    "corrupt": i in corrupt, "retry_s": retry_s})
        meta[job_id] = (t, len(flows))
    for agent in emu.each_agent():
        agent.call({"op": "reset"})
    for host, jobs in jobs_by_host.items():
        emu.agent(host).call({"op": "schedule", "jobs": jobs, "transport": transport})
    if timeout_s is None:
        slowest_mbps = (min(link.gbps for link in emu.fabric.links) * 1000
                        * emu.fabric.scale_for(emu.link_mbps))
        last = max((t.ready_s for t in workload.transfers), default=0.0)
        timeout_s = (max(0.0, t0 - time.time()) + last + 30 + retry_s
                     + workload.bytes_total * 8 / (slowest_mbps * 1e6))
    deadline = time.time() + timeout_s
    expected = sum(n for _, n in meta.values())
    senders = sorted(jobs_by_host)
    # no polls while transfers are still being started: each poll wakes every sending agent
    last = max((t.ready_s for t in workload.transfers), default=0.0)
    until = min(t0 + last, deadline)
    while progress is not None and time.time() < until - LIVE_POLL_S:
        time.sleep(LIVE_POLL_S)          # a live view watches: one poll a second meanwhile,
        sent = sum(emu.agent(h).call({"op": "progress"})["sent"] for h in senders)
        progress(sent / max(1, expected), _collect(emu, meta, t0))    # with the rows so far
    time.sleep(max(0.0, until - time.time()))
    wait = 0.01                            # doubling to POLL_S: short transfers end soon
    while time.time() < deadline:          # cheap polls: a count from each sending agent
        sent = sum(emu.agent(h).call({"op": "progress"})["sent"] for h in senders)
        if progress is not None:
            progress(sent / expected if expected else 1.0)
        if sent >= expected:
            break
        time.sleep(wait)
        wait = min(POLL_S, 2 * wait)
    return _collect(emu, meta, t0)


def _collect(emu, meta, t0) -> list[dict]:
    """The rows of every transfer from what the agents recorded so far."""
    sent, received = [], []
    for agent in emu.each_agent():
        res = agent.call({"op": "results"})
        sent += res["sent"]
        received += res["received"]
    return _rows(meta, sent, received, t0)


def _congestion(snd: list) -> dict:
    """The flows' congestion control as they started (the smallest window, in segments, and
    pacing rate) and as their verdicts came back (the kept-open transport's senders say)."""
    def least(key):
        return min((r[key] for r in snd if r.get(key) is not None), default=None)
    return {"cwnd": least("cwnd"), "cwnd_end": least("cwnd_end"),
            "pacing_mbps": least("pacing_mbps")}


def _rows(meta, sent, received, t0) -> list[dict]:
    by_job_s, by_job_r = defaultdict(list), defaultdict(list)
    for r in sent:
        by_job_s[r["id"]].append(r)
    for r in received:
        by_job_r[r.get("id")].append(r)
    return [_row(t, n_flows, by_job_s.get(job_id, []), by_job_r.get(job_id, []), t0)
            for job_id, (t, n_flows) in meta.items()]


def _verdict(snd: list, final: dict, good: dict, n_flows: int) -> tuple[bool, str]:
    """Whether every flow of a transfer was verified, and its status."""
    if len(good) == n_flows and len(snd) == n_flows and all(r.get("ok") for r in snd):
        return True, "ok"
    if len(snd) < n_flows:
        return False, "unfinished"
    bad = [r.get("status", "missing") for r in final.values() if not r.get("verified")]
    status = bad[0] if bad else next((r.get("error", "failed") for r in snd
                                      if not r.get("ok")), "missing")
    return False, status if len(status) < 120 else status[:117] + "..."


def _row(t, n_flows: int, snd: list, rcv: list, t0: float) -> dict:
    """One transfer's row from its senders' and receivers' records (Unix times; ``t0`` is
    workload time 0)."""
    # a flow tried again over another pairing has one receiver record per attempt:
    # the verified one counts, else the last attempt's
    good = {r.get("flow"): r for r in rcv if r.get("verified")}
    last: dict = {}
    for r in rcv:
        k = r.get("flow")
        if k not in last or (r.get("attempt") or 1) >= (last[k].get("attempt") or 1):
            last[k] = r
    final = {**last, **good}
    verified, status = _verdict(snd, final, good, n_flows)

    def rel(x):
        return None if x is None else round(x - t0, 6)
    again = [r["first_byte"] for r in good.values()
             if (r.get("attempt") or 1) > 1 and "first_byte" in r]
    gap = max(((r["gap_s"], r["gap_end"]) for r in good.values() if r.get("gap_end")),
              default=None)
    return transfer_row(
        t, pairings=n_flows, t0=t0, start=min((r["start"] for r in snd), default=None),
        first_byte=min((r["first_byte"] for r in good.values() if "first_byte" in r),
                       default=None),
        end=max((r["end"] for r in snd), default=None),
        bytes_received=sum(r["bytes"] for r in final.values()), verified=verified,
        status=status, attempts=max((r.get("attempts", 1) for r in snd), default=0),
        retry_first_byte_s=rel(max(again)) if again else None,
        avoided=any(r.get("avoided") for r in snd),
        moves=sum(r.get("moves") or 0 for r in snd),
        gap_s=None if gap is None else round(gap[0], 6),
        gap_end_s=None if gap is None else rel(gap[1]), **_congestion(snd),
        received_s=rel(max((r["end"] for r in good.values()), default=None)))
