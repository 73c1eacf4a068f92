"""The ``zcube`` command: argument parsing and the verbs, thin; each verb hands its work to
the experiment pipeline, the emulation or the analysis."""
from testbed.cli.main import main

__all__ = ["main"]
