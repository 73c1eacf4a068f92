"""The testbed: everything with side effects, and the pipeline that runs experiments.

Layers, each importing only those below it (checked by import-linter in ``make test``)::

    cli         the zcube command: parsing and thin verbs
    analysis    compare, cross-validation, the HTML report
    experiment  scenarios, the runner, records (the one pipeline)
    emulation   Mininet + OVS + the controller, agents, probes, faults  |  model (pure)
    core        the backend contract, record columns, metrics, tables

All of them may import the pure packages (topologies, controller, traffic).
"""
