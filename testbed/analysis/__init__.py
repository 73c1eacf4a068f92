"""Reading finished runs: the comparison table (``zcube compare``), model-against-emulation
cross-validation (``zcube crossval``) and the self-contained HTML report, rendered from
jinja2 templates.  Every figure comes from summary.json; nothing is computed here that
:mod:`testbed.core.metrics` does not define.  May import experiment, core and the pure
packages; never the emulation or the model directly."""
