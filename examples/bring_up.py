"""Bring a ZCube fabric up from Python and send one KV transfer over it (root, Open
vSwitch): the emulation's switches are proved to forward as routed, the transfer is
striped over both of the pair's NIC port pairings and checked byte for byte, and the
fabric is torn down on leaving the ``with`` block, also after an error.  Run as root:

    sudo .venv/bin/python examples/bring_up.py
"""
from testbed import api


def main() -> None:
    with api.up("zcube", n=4, gpus_per_server=4, policy="zcube", link_mbps=100) as running:
        print(f"up and verified: {running.fabric.label}, policy {running.table.policy_name}")
        for path in running.path("g0", "g5"):          # P1 and P2, one per switch group
            print("path:", " -> ".join(path))
        row = running.transfer("g0", "g5", 4_000_000)   # 4 MB, about 0.2 s at 2 x 100 Mb/s
        print(f"transfer g0 -> g5: {row['bytes_received']:,} bytes, verified "
              f"{row['verified']}, over {row['pairings']} pairings, FCT {row['fct_ms']:.1f} ms")
        assert row["verified"], row
    print("torn down")


if __name__ == "__main__":
    main()
