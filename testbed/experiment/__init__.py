"""The one experiment pipeline: a typed, validated scenario (:mod:`.scenario`) is carried
by the runner (:mod:`.runner`) on each fabric through a backend, and its records and
summaries are written once per run (:mod:`.records`).  :mod:`.pipeline` is the entry every
verb uses.  May import the emulation and model backends (by name, lazily), core and the
pure packages; never the analysis or the CLI."""
