"""What a failed switch does to the routes, without root: the route table around ``a1`` on
ZCube n=4 and on ROFT 4x4 (around its spine ``s1``), checked as the controller's reroute
would be, with the pairs the failure moved and the link loads before and after.

    .venv/bin/python examples/reroute_on_model.py
"""
from testbed import api


def compare(builder: str, dead: str, **params) -> None:
    fab = api.fabric(builder, **params)
    before, after = api.routes(fab), api.routes(fab, failed=[dead])
    moved = [(s, d) for s, d in before.pairs() if before.paths(s, d) != after.paths(s, d)]
    print(f"{fab.label}, {dead} down: {len(moved)} of {len(list(before.pairs()))} pairs "
          f"rerouted, {len(after.disconnected())} cut off")
    s, d = moved[0]
    print(f"  {s} -> {d}: {['-'.join(p) for p in before.paths(s, d)]} becomes "
          f"{['-'.join(p) for p in after.paths(s, d)]}")
    report = api.check_routes(after, traffic="pd", line_rate=True)
    assert report.ok, report.violations
    worst = max(report.loads.items(), key=lambda kv: kv[1]["util_max"])
    print(f"  around the failure: every pair routed on live links; with every sender at "
          f"its NIC rate the busiest links ({worst[0]}) are offered "
          f"{worst[1]['util_max']:.2f} x their rate")


def main() -> None:
    compare("zcube", "a1", n=4, gpus_per_server=4)
    compare("roft", "s1", servers=4, gpus_per_server=4)


if __name__ == "__main__":
    main()
