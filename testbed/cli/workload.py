"""``zcube workload``: build a PD workload on a fabric and summarise it (no root, no packets).

It shows what the emulation will carry: how many requests and KV transfers, how many bytes,
which GPU pairs talk, and how much of that traffic stays on one switch (rail-aligned) or
must cross the fabric.  ``-o FILE.csv`` writes one row per transfer.
"""
from __future__ import annotations

import csv
import json
import sys

from traffic import arrivals
from traffic.models import get_model, kv_bytes_per_token
from traffic.placement import deploy
from traffic.types import Scale
from traffic.workload import build_workload, percentile

from testbed.errors import UsageError


def _requests(args):
    if args.arrivals == "trace":
        replay = arrivals.read_trace(args.trace or arrivals.MOONCAKE_TRACE,
                                     time_scale=args.time_scale, duration_s=args.duration,
                                     limit=args.count, prefix_cache=args.prefix_cache)
        return replay.requests, replay.skipped
    if args.count is None and args.duration is None:
        raise UsageError("give --count or --duration for synthetic arrivals")
    common = dict(count=args.count, duration_s=args.duration if args.count is None else None,
                  seed=args.seed, input_tokens=args.input_tokens,
                  output_tokens=args.output_tokens)
    if args.arrivals == "poisson":
        return arrivals.poisson(args.rate, **common), []
    return arrivals.bursty(args.rate, args.on_s, args.off_s, **common), []


def workload_from_args(args, fabric):
    """(Workload, skipped trace lines) from the workload options; bad input -> UsageError."""
    try:
        model = get_model(args.model)
        pd = deploy(fabric, args.prefill_tp, args.decode_tp, placement=args.placement,
                    seed=args.seed)
        requests, skipped = _requests(args)
        factor = fabric.scale_for(args.link_mbps)
        work = build_workload(requests, pd, model, scale=Scale(link=factor, size=factor),
                              chunks=args.chunks, mla_senders=args.mla_senders)
    except FileNotFoundError:
        raise UsageError(f"--trace: no such file: {args.trace}") from None
    except ValueError as err:
        raise UsageError(str(err)) from None
    return work, skipped


def cmd_workload(args, fabric) -> int:
    work, skipped = workload_from_args(args, fabric)
    model, pd, factor = work.model, work.deployment, work.scale.link
    attach = {h.name: {sw for sw, _ in fabric.attachments(h.name)} for h in fabric.hosts}
    same = sum(t.bytes for t in work.transfers if attach[t.src] & attach[t.dst])
    pairs = {(t.src, t.dst) for t in work.transfers}
    queue = [s.queue_s for s in work.schedule] or [0.0]
    doc = {"fabric": fabric.label, "model": model.name,
           "kv_bytes_per_token": kv_bytes_per_token(model),
           "placement": args.placement, "prefill_instances": len(pd.prefill),
           "decode_instances": len(pd.decode), "requests": len(work.requests),
           "skipped_trace_lines": len(skipped), "transfers": len(work.transfers),
           "gpu_pairs": len(pairs), "bytes_total": work.bytes_total,
           "same_switch_bytes_share": same / work.bytes_total if work.bytes_total else 0.0,
           "prefill_queue_s": {"p50": percentile(queue, 50), "p99": percentile(queue, 99)},
           "scale": work.scale.to_dict()}
    if args.output:
        with open(args.output, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["request", "src", "dst", "bytes", "ready_s", "chunk"])
            for t in work.transfers:
                w.writerow([t.request, t.src, t.dst, t.bytes, f"{t.ready_s:.6f}", t.chunk])
        print(f"wrote {args.output} ({len(work.transfers)} transfers)", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{doc['fabric']}, {doc['model']} ({doc['kv_bytes_per_token']:,} B/token), "
          f"{args.placement}: {doc['prefill_instances']} prefill x TP{args.prefill_tp}, "
          f"{doc['decode_instances']} decode x TP{args.decode_tp}")
    print(f"requests {doc['requests']:,} ({args.arrivals}; {doc['skipped_trace_lines']} "
          f"malformed trace lines skipped), transfers {doc['transfers']:,} over "
          f"{doc['gpu_pairs']} GPU pairs, {doc['bytes_total']:,} bytes after scaling "
          f"1:{1 / factor:,.0f}")
    print(f"bytes between GPUs sharing a switch: {100 * doc['same_switch_bytes_share']:.1f}%; "
          f"prefill queue wait p50 {doc['prefill_queue_s']['p50']:.3f} s, "
          f"p99 {doc['prefill_queue_s']['p99']:.3f} s")
    return 0


def add_workload_args(w, number) -> None:
    """The options that describe a workload (shared by ``workload`` and ``up --kv``)."""
    g = w.add_argument_group("workload")
    g.add_argument("--model", default="llama3-70b",
                   help="model preset: llama3-70b, glm-4.5 (GQA: KV sharded per rank), glm-5 "
                        "(MLA: every decode rank needs the whole latent) (default llama3-70b)")
    g.add_argument("--placement", default="aligned",
                   choices=["aligned", "cross-rail", "random", "packed"],
                   help="where P and D instances sit (default aligned: rank i to rank i on one "
                        "rail; cross-rail: rank layouts differ)")
    g.add_argument("--prefill-tp", type=number(int), default=4, metavar="N",
                   help="tensor-parallel degree of prefill instances (default 4)")
    g.add_argument("--decode-tp", type=number(int), default=4, metavar="N",
                   help="tensor-parallel degree of decode instances (default 4)")
    g.add_argument("--mla-senders", type=number(int), default=1, metavar="N",
                   help="MLA models: prefill ranks that send the latent (default 1)")
    g.add_argument("--arrivals", choices=["trace", "poisson", "bursty"], default="trace",
                   help="request arrivals (default trace: the shipped Mooncake trace)")
    g.add_argument("--trace", metavar="FILE", help="Mooncake-format JSONL trace to replay")
    g.add_argument("--time-scale", type=number(float), default=1.0, metavar="X",
                   help="trace: multiply arrival times (0.5 = replay twice as fast)")
    g.add_argument("--prefix-cache", action="store_true",
                   help="trace: KV of prefix blocks seen before (hash_ids) is not moved")
    g.add_argument("--rate", type=number(float), default=2.0, metavar="R",
                   help="poisson/bursty: requests per second (during on-periods)")
    g.add_argument("--on-s", type=number(float), default=1.0, metavar="S",
                   help="bursty: on-period length")
    g.add_argument("--off-s", type=number(float), default=1.0, metavar="S",
                   help="bursty: off-period length")
    g.add_argument("--input-tokens", type=number(int), default=8192, metavar="N",
                   help="poisson/bursty: prompt tokens per request (default 8192)")
    g.add_argument("--output-tokens", type=number(int), default=256, metavar="N",
                   help="poisson/bursty: output tokens per request (default 256)")
    g.add_argument("--count", type=number(int), default=None, metavar="N",
                   help="number of requests (trace: at most N)")
    g.add_argument("--duration", type=number(float), default=None, metavar="S",
                   help="seconds of arrivals (trace: the first S seconds)")
    g.add_argument("--chunks", type=number(int), default=1, metavar="N",
                   help="layer-wise chunks per transfer (default 1)")
    g.add_argument("--seed", type=number(int), default=0,
                   help="seed for arrivals and placement")


def add_parser(sub, add_fabric_args, number):
    w = sub.add_parser("workload", help="build a PD KV-cache workload on a fabric and summarise it",
                       description=__doc__.split("\n\n")[0])
    add_fabric_args(w)
    add_workload_args(w, number)
    w.add_argument("--link-mbps", type=number(float), default=100.0, metavar="R",
                   help="emulated NIC rate; KV bytes are scaled by the same factor as "
                        "R to the fabric's NIC rate (default 100)")
    w.add_argument("--json", action="store_true", help="print the summary as JSON")
    w.add_argument("-o", "--output", metavar="FILE.csv", help="write one row per transfer")
    return w
