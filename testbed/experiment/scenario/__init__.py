"""A scenario file: its model (:mod:`.model`), read and written (:mod:`.files`) from YAML
with the line of every key (:mod:`.yaml_lines`), checked across keys (:mod:`.checks`)
against the limits of one machine (:mod:`.limits`), and the requests it runs
(:mod:`.requests`)."""
from testbed.experiment.scenario.files import describe, dumps, from_dict, load, loads
from testbed.experiment.scenario.model import (
    RANDOM_KINDS,
    Background,
    Deployment,
    EmulationSettings,
    FabricSpec,
    Fault,
    Scenario,
    ScenarioError,
    Sweep,
    Workload,
)

__all__ = ["RANDOM_KINDS", "Background", "Deployment", "EmulationSettings", "FabricSpec",
           "Fault", "Scenario", "ScenarioError", "Sweep", "Workload", "describe", "dumps",
           "from_dict", "load", "loads"]
