"""``zcube workload``: build a PD workload on a fabric and summarise it (no root, no packets).

It shows what a run would send: requests, KV transfers and bytes, the GPU pairs that talk, and
how much of the traffic stays on one switch; ``-o FILE.csv`` writes one row per transfer.
"""
from __future__ import annotations

import json
import os
import sys

from testbed.core.metrics import percentile
from testbed.core.tables import write_csv
from testbed.errors import UsageError
from testbed.experiment.scenario.requests import skips_line
from traffic.models import kv_bytes_per_token

# flag -> (scenario section or None for top level, key)
FLAG_KEYS = {
    "--model": (None, "model"), "--seed": (None, "seed"), "--link-mbps": (None, "link_mbps"),
    "--transport": (None, "transport"), "--time-dilation": (None, "time_dilation"),
    "--buffer-ms": (None, "buffer_ms"), "--calibration-s": (None, "calibration_s"),
    "--placement": ("deployment", "placements"), "--prefill-tp": ("deployment", "prefill_tp"),
    "--decode-tp": ("deployment", "decode_tp"), "--mla-senders": ("deployment", "mla_senders"),
    "--chunks": ("deployment", "chunks"), "--arrivals": ("workload", "arrivals"),
    "--trace": ("workload", "trace"), "--time-scale": ("workload", "time_scale"),
    "--prefix-cache": ("workload", "prefix_cache"), "--rate": ("workload", "rate"),
    "--on-s": ("workload", "on_s"), "--off-s": ("workload", "off_s"),
    "--input-tokens": ("workload", "input_tokens"),
    "--output-tokens": ("workload", "output_tokens"), "--count": ("workload", "count"),
    "--duration": ("workload", "duration_s"), "--tcp-cc": ("emulation", "tcp_cc"),
    "--ecmp": ("emulation", "ecmp"),
}


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def scenario_doc(args, fabric, name: str) -> dict:
    """The scenario (as a plain document) that the workload flags describe on ``fabric``:
    only the flags given are set, so every default is the scenario file's default."""
    doc = {"name": name, "description": f"built from the flags of 'zcube {args.verb}'",
           "backend": "emulation",
           "fabrics": [{"name": fabric.kind, "builder": fabric.kind,
                        "params": dict(fabric.params),
                        "policy": getattr(args, "policy", None)}],
           "deployment": {}, "workload": {}, "emulation": {}}
    for flag, (section, key) in FLAG_KEYS.items():
        value = getattr(args, _dest(flag), None)
        if value is None or value is False:
            continue
        if key == "placements":
            value = [value]
        (doc[section] if section else doc)[key] = value
    if getattr(args, "trace", None) and not getattr(args, "arrivals", None):
        doc["workload"]["arrivals"] = "trace"             # --trace FILE means replay it
    return doc


def _flag_of(key_path: str) -> str | None:
    for flag, (section, key) in FLAG_KEYS.items():
        if key_path in (f"{section}.{key}" if section else key,
                        f"{section}.{key}[0]" if section else key):
            return flag
    return None


def scenario_from_doc(doc: dict):
    """Validate a flag-built scenario; problems come back naming the flag, in one line."""
    from testbed.experiment.scenario import ScenarioError, from_dict
    try:
        return from_dict(doc, path="<flags>", base_dir=os.getcwd())
    except ScenarioError as err:
        where, _, what = str(err).partition(": ")[2].partition(": ")
        if not what:
            raise UsageError(str(err)) from None
        flag = _flag_of(where)
        if where == "workload" and "count or duration" in what:
            raise UsageError("give --count or --duration for synthetic arrivals") from None
        raise UsageError(f"{flag or where}: {what}") from None


def workload_from_args(args, fabric):
    """(Workload, skipped trace lines) from the workload flags, built exactly as the
    experiment pipeline builds a scenario's; bad input -> UsageError."""
    from testbed.experiment.runner import requests_for, workload_for
    sc = scenario_from_doc(scenario_doc(args, fabric, "workload"))
    try:
        requests, skipped = requests_for(sc, sc.seed)
        work = workload_for(sc, sc.fabrics[0].build(), sc.placements[0], sc.seed, requests)
    except FileNotFoundError:
        raise UsageError(f"--trace: {args.trace} is a folder, not a trace file"
                         if os.path.isdir(args.trace)
                         else f"--trace: no such file: {args.trace}") from None
    except ValueError as err:
        raise UsageError(str(err)) from None
    return work, skipped


def cmd_workload(args, fabric) -> int:
    from testbed.experiment.summaries import skipped_fields
    work, skipped = workload_from_args(args, fabric)
    model, pd, factor = work.model, work.deployment, work.scale.link
    attach = {h.name: {sw for sw, _ in fabric.attachments(h.name)} for h in fabric.hosts}
    same = sum(t.bytes for t in work.transfers if attach[t.src] & attach[t.dst])
    pairs = {(t.src, t.dst) for t in work.transfers}
    queue = [s.queue_s for s in work.schedule] or [0.0]
    doc = {"fabric": fabric.label, "model": model.name,
           "kv_bytes_per_token": kv_bytes_per_token(model),
           "placement": pd.placement, "prefill_instances": len(pd.prefill),
           "decode_instances": len(pd.decode), "requests": len(work.requests),
           **skipped_fields(skipped), "transfers": len(work.transfers),
           "gpu_pairs": len(pairs), "bytes_total": work.bytes_total,
           "same_switch_bytes_share": same / work.bytes_total if work.bytes_total else 0.0,
           "prefill_queue_s": {"p50": percentile(queue, 50), "p99": percentile(queue, 99)},
           "scale": work.scale.to_dict()}
    if args.output:
        write_csv(([t.request, t.src, t.dst, t.bytes, f"{t.ready_s:.6f}", t.chunk]
                   for t in work.transfers),
                  ("request", "src", "dst", "bytes", "ready_s", "chunk"), args.output)
        print(f"wrote {args.output} ({len(work.transfers)} transfers)", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{doc['fabric']}, {doc['model']} ({doc['kv_bytes_per_token']:,} B/token), "
          f"{pd.placement}: {doc['prefill_instances']} prefill x TP{pd.prefill[0].tp}, "
          f"{doc['decode_instances']} decode x TP{pd.decode[0].tp}")
    arrivals = args.arrivals or ("trace" if args.trace else "poisson")
    print(f"requests {doc['requests']:,} ({arrivals}; "
          f"{doc['skipped_trace_lines']} "
          f"trace lines not replayed), transfers {doc['transfers']:,} over "
          f"{doc['gpu_pairs']} GPU pairs, {doc['bytes_total']:,} bytes after scaling "
          f"1:{1 / factor:,.0f}")
    if skipped["count"]:
        print(skips_line(skipped, where="--json"))
    print(f"bytes between GPUs sharing a switch: {100 * doc['same_switch_bytes_share']:.1f}%; "
          f"prefill queue wait p50 {doc['prefill_queue_s']['p50']:.3f} s, "
          f"p99 {doc['prefill_queue_s']['p99']:.3f} s")
    return 0


def add_workload_args(w, number) -> None:
    """The options that describe a workload (shared by ``workload`` and ``up --kv``).  An
    option left out takes the scenario file's default (``zcube run --help``)."""
    from traffic.placement import PLACEMENTS
    g = w.add_argument_group("workload (each is the scenario key named; defaults as in a "
                             "scenario file)")
    g.add_argument("--model", help="model: llama3-70b, glm-4.5 (GQA: KV sharded per rank), "
                                   "glm-5 (MLA: every decode rank needs the whole latent) "
                                   "(default llama3-70b)")
    g.add_argument("--placement", choices=list(PLACEMENTS),
                   help="where P and D instances sit (default aligned: rank i to rank i on one "
                        "rail; cross-rail: rank layouts differ)")
    g.add_argument("--prefill-tp", type=number(int), metavar="N",
                   help="tensor-parallel degree of prefill instances (default 4)")
    g.add_argument("--decode-tp", type=number(int), metavar="N",
                   help="tensor-parallel degree of decode instances (default 4)")
    g.add_argument("--mla-senders", type=number(int), metavar="N",
                   help="MLA models: prefill ranks that send the latent (default 1)")
    g.add_argument("--arrivals", choices=["poisson", "bursty", "trace"],
                   help="request arrivals (default poisson; trace replays the shipped "
                        "Mooncake trace, or --trace FILE)")
    g.add_argument("--trace", metavar="FILE", help="Mooncake-format JSONL trace to replay "
                                                   "(implies --arrivals trace)")
    g.add_argument("--time-scale", type=number(float), metavar="X",
                   help="trace: multiply arrival times (0.5 = replay twice as fast; default 1)")
    g.add_argument("--prefix-cache", action="store_true", default=None,
                   help="trace: KV of prefix blocks seen before (hash_ids) is not moved")
    g.add_argument("--rate", type=number(float), metavar="R",
                   help="poisson/bursty: requests per second (during on-periods; default 2)")
    g.add_argument("--on-s", type=number(float), metavar="S",
                   help="bursty: on-period length (default 1)")
    g.add_argument("--off-s", type=number(float), metavar="S",
                   help="bursty: off-period length (default 1)")
    g.add_argument("--input-tokens", type=number(int), metavar="N",
                   help="poisson/bursty: prompt tokens per request (default 8192)")
    g.add_argument("--output-tokens", type=number(int), metavar="N",
                   help="poisson/bursty: output tokens per request (default 256)")
    g.add_argument("--count", type=number(int), metavar="N",
                   help="number of requests (trace: at most N); poisson/bursty need --count "
                        "or --duration")
    g.add_argument("--duration", type=number(float), metavar="S",
                   help="seconds of arrivals (trace: the first S seconds)")
    g.add_argument("--chunks", type=number(int), metavar="N",
                   help="layer-wise chunks per transfer (default 1)")
    g.add_argument("--seed", type=number(int),
                   help="seed for arrivals and placement (default 1)")
    g.add_argument("--time-dilation", type=number(float), metavar="X",
                   help="run X times slower than the real pace: transfers X times bigger, "
                        "times X times later, results in undilated units (scenario key "
                        "time_dilation; default 1)")
    g.add_argument("--buffer-ms", type=number(float), metavar="MS",
                   help="emulation: queue behind each shaped port, MS of its emulated rate in "
                        "bytes, at least two 64 KB segments (scenario key buffer_ms; default "
                        "a 64-packet FIFO)")
    g.add_argument("--calibration-s", type=number(int), metavar="S", help="emulation: "
                   "whole seconds per iperf3 calibration, 1-60 (key calibration_s; default 2)")
    g.add_argument("--transport", choices=["pool", "tcp-per-transfer"],
                   help="KV transport (scenario key transport; default pool: kept-open, "
                        "warmed-up connections per port pairing, as RDMA queue pairs; "
                        "tcp-per-transfer: a new connection per transfer and pairing)")


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
