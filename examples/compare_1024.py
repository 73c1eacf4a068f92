"""ZCube against a rail-optimised Clos at 1,024 GPUs each, at real rates on the flow-level
model (no root, well under a minute): the same question as the small fabrics, at the size
of a production pod.  Run from the repository's root:

    .venv/bin/python examples/compare_1024.py
"""
from testbed import api

SCENARIO = {
    "name": "compare-1024",
    "backend": "model",
    "link_mbps": 400000,                       # real 400 Gb/s NICs: no scaling on the model
    "repetitions": 3,
    "model": {"preset": "llama3-70b", "prefill_tokens_per_s": 200000},
    "fabrics": [
        {"name": "zcube", "builder": "zcube", "params": {"n": 32, "gpus_per_server": 8}},
        {"name": "roft", "builder": "roft",
         "params": {"servers": 128, "gpus_per_server": 8}, "policy": "ecmp"},
    ],
    # TP8: each prefill rank sends its KV heads to one decode rank, crossing rails
    "deployment": {"prefill_tp": 8, "decode_tp": 8, "placements": ["cross-rail"]},
    "workload": {"arrivals": "poisson", "rate": 40, "count": 200, "input_tokens": 16384},
}


def main() -> None:
    results = api.run(SCENARIO, log=print)
    for name, r in results.runs.items():
        print(f"{name}: {r.transfers_verified}/{r.transfers_total} transfers verified, "
              f"FCT p99 {r.fct_ms['p99']:.3f} ms, TTFT p99 {r.ttft_ms['p99']:.1f} ms")
    for p in results.paired:
        print(f"{p.metric:<12} roft/zcube {p.ratio:.3f} (95% {p.lo:.3f}-{p.hi:.3f}): {p.words}")
    print(f"results in {results.output}")


if __name__ == "__main__":
    main()
