"""From requests to KV-cache transfers, and from transfer times to TTFT (pure): prefill
queueing, each chunk's ready time and the decode instance, then TTFT (ZCUBE.md section 5)
as queue wait + prefill + KV transfer + one decode step."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from .models import ModelSpec, kv_bytes
from .placement import Deployment, kv_layout
from .types import Request, Scale, Transfer


@dataclass(frozen=True)
class Scheduled:
    """Where and when one request is served."""
    request: Request
    prefill: int                # prefill instance index
    decode: int                 # decode instance index
    prefill_start_s: float
    prefill_end_s: float
    kv_bytes: int               # bytes of one full KV copy to move (after scaling)

    @property
    def queue_s(self) -> float:
        return self.prefill_start_s - self.request.arrival_s


@dataclass
class Workload:
    requests: list[Request]
    schedule: list[Scheduled]
    transfers: list[Transfer]
    model: ModelSpec
    deployment: Deployment
    scale: Scale
    chunks: int = 1
    notes: dict = field(default_factory=dict)
    seed: int | None = None      # the repetition's seed: it salts the connections' ECMP draw

    @property
    def bytes_total(self) -> int:
        return sum(t.bytes for t in self.transfers)

    def transfers_of(self) -> dict[int, list[Transfer]]:
        out: dict[int, list[Transfer]] = {}
        for t in self.transfers:
            out.setdefault(t.request, []).append(t)
        return out


def build_workload(requests: list[Request], deployment: Deployment, model: ModelSpec,
                   scale: Scale | None = None, chunks: int = 1,
                   mla_senders: int = 1) -> Workload:
    """Schedule ``requests`` on ``deployment`` and list the KV transfers they cause."""
    if chunks < 1:
        raise ValueError(f"chunks must be at least 1, got {chunks}")
    if not deployment.prefill or not deployment.decode:
        raise ValueError("the deployment needs at least one prefill and one decode instance")
    scale = scale or Scale()
    free_at = [0.0] * len(deployment.prefill)
    layouts: dict[tuple[int, int], list] = {}
    schedule, transfers = [], []
    for n, req in enumerate(sorted(requests, key=lambda r: (r.arrival_s, r.id))):
        p = min(range(len(free_at)), key=lambda i: (max(free_at[i], req.arrival_s), i))
        d = n % len(deployment.decode)
        start = max(free_at[p], req.arrival_s)
        uncached = max(0, req.input_tokens - req.cached_tokens)
        duration = uncached / model.prefill_tokens_per_s
        end = start + duration
        free_at[p] = end
        total = kv_bytes(model, uncached, scale)
        schedule.append(Scheduled(req, p, d, start, end, total))
        layout = layouts.get((p, d))
        if layout is None:
            layout = layouts[(p, d)] = kv_layout(model, deployment.prefill[p],
                                                 deployment.decode[d], mla_senders=mla_senders)
        for c in range(chunks):
            ready = start + duration * (c + 1) / chunks
            for src, dst, frac in layout:
                size = int(round(total * frac / chunks))
                if size > 0:
                    transfers.append(Transfer(req.id, src, dst, size, ready, c))
    return Workload(list(requests), schedule, transfers, model, deployment, scale, chunks)


def ttft_s(s: Scheduled, transfers_done_s: float | None, model: ModelSpec) -> float:
    """Time to first token: arrival -> last KV byte delivered -> one decode step.
    ``transfers_done_s`` is when the request's last transfer finished (None: nothing moved,
    e.g. the whole prefix was cached, so the decode starts when the prefill ends)."""
    done = s.prefill_end_s if transfers_done_s is None else max(transfers_done_s, s.prefill_end_s)
    return done + model.decode_step_ms / 1000.0 - s.request.arrival_s


def slo_throughput(rates: list[float], p99_ttft_s: list[float], slo_s: float) -> float | None:
    """The largest arrival rate of a sweep whose P99 TTFT stays within ``slo_s`` (None if
    none does).  Rates and their measured P99 TTFTs are given pairwise."""
    ok = [r for r, t in zip(rates, p99_ttft_s) if t <= slo_s]
    return max(ok) if ok else None


def dilate(work: Workload, factor: float, bytes_factor: float | None = None) -> Workload:
    """The same workload ``factor`` times slower: every KV transfer ``factor`` times bigger
    and every time (arrivals, prefill, ready times) ``factor`` times later, so on links of
    the same rate each transfer takes ``factor`` times longer while the load (bytes per
    second) stays the same.  A machine that cannot keep up with the per-packet work of the
    real pace can run the dilated one; its measured times, divided by ``factor``, are
    the undilated system's (``Scale.time_dilation`` records the factor).

    ``bytes_factor`` (default ``factor``) sets how much bigger transfers become on their
    own: sent over links ``factor / bytes_factor`` times slower, each transfer again takes
    ``factor`` times longer, so the figures divide back the same way, while the links send
    fewer packets per second (``FabricSpec.extra_dilation``)."""
    grow = factor if bytes_factor is None else bytes_factor
    if factor == 1 and grow == 1:
        return work
    if not (factor > 0 and grow > 0):
        raise ValueError(f"time dilation must be greater than 0, got {factor} (bytes "
                         f"{grow})")

    def req(r: Request) -> Request:
        return replace(r, arrival_s=r.arrival_s * factor)
    schedule = [replace(s, request=req(s.request), prefill_start_s=s.prefill_start_s * factor,
                        prefill_end_s=s.prefill_end_s * factor,
                        kv_bytes=int(round(s.kv_bytes * grow))) for s in work.schedule]
    transfers = [replace(t, bytes=int(round(t.bytes * grow)), ready_s=t.ready_s * factor)
                 for t in work.transfers]
    return replace(work, requests=[req(r) for r in work.requests], schedule=schedule,
                   transfers=transfers,
                   scale=replace(work.scale, time_dilation=work.scale.time_dilation * factor))


def workload_key(workload) -> str:
    """A digest of what ``workload`` sends, when and where, and of its seed: what every
    backend seeds the connections' ECMP draw with, so one repetition hashes the same way in
    every run and each repetition draws its own paths (a trace replays the same requests
    in every repetition; its seed still draws new paths)."""
    h = hashlib.sha256(f"seed {getattr(workload, 'seed', None)};".encode())
    for t in workload.transfers:
        h.update(f"{t.src} {t.dst} {t.bytes} {t.ready_s:.6f};".encode())
    return h.hexdigest()
