"""The flow-level model backend, pure: no emulation, processes or root.

:mod:`testbed.model.simulate` (the entry point, ``simulate()``) ties together
:mod:`~testbed.model.capacity`, :mod:`~testbed.model.flows`, :mod:`~testbed.model.sharing`,
:mod:`~testbed.model.events` and :mod:`~testbed.model.records`; :mod:`testbed.model.backend`
is the :class:`testbed.core.backend.Backend` the experiment runner drives.
"""
