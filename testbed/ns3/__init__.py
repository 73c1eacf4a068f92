"""The packet-level backend: the same scenario, fabric, routes and workload simulated packet
by packet on ns-3, for tails and for fabrics the emulator cannot hold."""
