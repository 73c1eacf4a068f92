"""Reading finished runs: the comparison (``zcube compare``), the standings and claims,
cross-validation between backends (``zcube crossval``), the HTML report, and the live view.
Every figure comes from summary.json through :mod:`testbed.core.metrics`."""
