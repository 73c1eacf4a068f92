"""The flow-level model backend, pure (no emulation, processes or root):
:func:`testbed.model.simulate.simulate` computes what the emulation would measure, and
:mod:`testbed.model.backend` drives it for the experiment runner."""
