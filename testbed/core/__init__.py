"""What the layers share and agree on: the backend contract (:mod:`.backend`), the records
(:mod:`.records`), every metric (:mod:`.metrics`) and the one text-table and CSV
helper (:mod:`.tables`).  Imports only the pure packages and libraries."""
