"""The packet-level backend: the same scenario, fabric, routes and workload simulated
packet by packet on ns-3 (the ``ns3`` package from PyPI), for tails and for fabrics the
emulator cannot hold.  ``routes`` is pure; ``simulate`` imports ns-3 when it runs."""
