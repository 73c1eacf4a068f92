"""The rows every backend returns and every run folder holds (the records' columns)."""

# one row per transfer (transfers.csv, before the columns ``zcube run`` adds)
ROW_FIELDS = ("request", "chunk", "src", "dst", "pairings", "bytes", "ready_s", "start_s",
              "first_byte_s", "end_s", "fct_ms", "bytes_received", "verified", "status",
              "attempts")

# one row per directed link and sampling interval (links.csv, before ``rep``)
LINK_FIELDS = ("t_s", "src", "dst", "bytes", "mbps", "util")
