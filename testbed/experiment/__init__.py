"""The one experiment pipeline (:mod:`.pipeline`): a validated scenario (:mod:`.scenario`) run
on each fabric through a backend (:mod:`.runner`), its results written once per run
(:mod:`.summaries`).  Imports backends lazily by name, core and the pure packages; never the
analysis or the CLI."""
