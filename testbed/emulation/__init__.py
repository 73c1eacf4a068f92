"""The emulated fabric: OVS without systemd (:mod:`.ovs`), the Mininet build and host
configuration (:mod:`.network`), the :class:`~.emulation.Emulation` lifecycle with its
controller and host agents, verification, KV transfers, calibration, link sampling,
background traffic, RoCE probes and faults; :mod:`.backend` is its side of the backend
contract.  Only here do processes, namespaces and root appear.  May import core and the
pure packages; never the model, the experiment pipeline, analysis or CLI."""
