"""The rows every backend returns and every run folder holds (the records' columns)."""

# one row per transfer (transfers.csv, before the columns ``zcube run`` adds)
ROW_FIELDS = ("request", "chunk", "src", "dst", "pairings", "bytes", "ready_s", "start_s",
              "first_byte_s", "end_s", "fct_ms", "bytes_received", "verified", "status",
              "attempts")

# one row per directed link and sampling interval (links.csv, before ``rep``)
LINK_FIELDS = ("t_s", "src", "dst", "bytes", "mbps", "util")


def link_row(t_s: float, hop: tuple, nbytes: int, seconds: float, capacity_mbps: float) -> dict:
    """One links.csv row: ``nbytes`` carried on directed ``hop`` in ``seconds`` ending at
    ``t_s``, against ``capacity_mbps``."""
    mbps = nbytes * 8 / seconds / 1e6 if seconds > 0 else 0.0
    return {"t_s": round(t_s, 3), "src": hop[0], "dst": hop[1], "bytes": nbytes,
            "mbps": round(mbps, 3),
            "util": round(mbps / capacity_mbps, 4) if capacity_mbps else 0.0}
