"""Traffic, pure: request arrivals, placements, KV-cache transfers and traffic matrices; and
the host agents the emulation runs (stdlib only)."""
