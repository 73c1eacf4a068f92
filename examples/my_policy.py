"""A routing policy of your own, checked and compared on the flow-level model (no root).

On a rail-optimised Clos, ECMP hashes each connection onto a spine and two can collide.
``spine_per_server`` removes the hash: every pair that crosses the spines goes through its
source server's spine.  Run from the repository's root:

    .venv/bin/python examples/my_policy.py
"""
from testbed import api


def spine_per_server(fabric, src, dst):
    """A pair on one leaf stays on it; any other goes up to its source server's spine."""
    leaf_src = fabric.attachment(src, 0)[0]          # (switch, port) of NIC port 0
    leaf_dst = fabric.attachment(dst, 0)[0]
    if leaf_src == leaf_dst:
        return [[src, leaf_src, dst]]
    spines = [s.name for s in fabric.groups()["spine"]]
    spine = spines[fabric.host(src).server % len(spines)]
    return [[src, leaf_src, spine, leaf_dst, dst]]


# the scenario names the policy as module:function: the backend imports it from this folder
SCENARIO = {
    "name": "my-policy",
    "backend": "model",
    "link_mbps": 40,
    "repetitions": 5,
    "model": {"preset": "llama3-70b", "prefill_tokens_per_s": 400000},
    "fabrics": [
        {"name": "zcube", "builder": "zcube", "params": {"n": 4, "gpus_per_server": 4}},
        {"name": "roft", "builder": "roft", "params": {"servers": 4, "gpus_per_server": 4},
         "policy": "ecmp"},
        {"name": "roft-mine", "builder": "roft", "params": {"servers": 4, "gpus_per_server": 4},
         "policy": "my_policy:spine_per_server"},
    ],
    "deployment": {"prefill_tp": 4, "decode_tp": 4, "placements": ["cross-rail"]},
    "workload": {"arrivals": "poisson", "rate": 8, "count": 24, "input_tokens": 32768},
}


def main() -> None:
    roft = api.fabric("roft", servers=4, gpus_per_server=4)
    # every pair routed, loop-free, on real cables; link loads under the PD matrix
    report = api.check_routes(roft, spine_per_server, traffic="pd", line_rate=True)
    print(report.to_text())
    assert report.ok, report.violations
    results = api.run(SCENARIO, log=lambda msg: None)
    for p in results.paired:
        print(f"{p.metric:<12} {p.run}/{p.reference} {p.ratio:.3f} "
              f"(95% {p.lo:.3f}-{p.hi:.3f}): {p.words}")


if __name__ == "__main__":
    main()
