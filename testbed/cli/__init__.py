"""The ``zcube`` command (:func:`testbed.cli.main.main`): argument parsing and the verbs,
thin; each verb hands its work to the experiment pipeline, the emulation or the analysis."""
