"""Fail a switch while a transfer runs, and see the reroute verified (root, Open vSwitch).

Switch ``a1`` of ZCube n=4 carries one of the two paths of g0 -> g5; it fails 0.2 s into
an 8 MB transfer, whose half on it moves to the surviving pairing and still arrives
verified.  Then the switch is failed again with the fabric idle, the controller's reroute
is proved on the switches (flows read back, every pair answering), and it is restored.

    sudo .venv/bin/python examples/fail_switch.py
"""
from testbed import api


def main() -> None:
    with api.up("zcube", n=4, gpus_per_server=4, link_mbps=100) as running:
        print("before:", ["-".join(p) for p in running.path("g0", "g5")])
        row = running.transfer("g0", "g5", 8_000_000, fault="a1", fault_at_s=0.2)
        down = next(f for f in row["faults"] if f["action"] == "down")
        print(f"transfer during the failure: verified {row['verified']}, "
              f"{row['attempts']} attempt(s), {row['moves']} move(s); the reroute took "
              f"{down['reroute_s']} s")
        assert row["verified"], row
        out = running.fail("a1")                     # down again, the fabric idle
        print(f"a1 down: rerouted in {out['reroute_s']} s, "
              f"{out['disconnected_pairs']} pair(s) cut off")
        print("after:", ["-".join(p) for p in running.path("g0", "g5")])
        found = running.verify()
        print(f"reroute verified on the switches: {found.ok} "
              f"({found.report['pairs_ok']}/{found.report['pairs_tested']} pairs answer)")
        assert found.ok, found.problems
        running.restore()
        print("restored:", ["-".join(p) for p in running.path("g0", "g5")])


if __name__ == "__main__":
    main()
