"""What the layers share and agree on: the backend contract (:mod:`.backend`), the record
columns (:mod:`.rows`), every metric (:mod:`.metrics`) and the one text-table and CSV
helper (:mod:`.tables`).  Imports only the pure packages and libraries."""
