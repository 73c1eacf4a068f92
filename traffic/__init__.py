"""Traffic: pure workload models (traffic matrices, later PD workloads) and host agents."""
