"""Reading a scenario from YAML or a dict into :class:`.model.Scenario` (every error naming
its line, before anything is built), writing it back, and its keys for --help."""
from __future__ import annotations

import os
from typing import Optional

import yaml
from pydantic import ValidationError

from testbed.experiment.scenario import keys as scenario_keys
from testbed.experiment.scenario.checks import check
from testbed.experiment.scenario.model import SECTIONS, Scenario
from testbed.experiment.scenario.yaml_lines import Lines, ScenarioError, explain, one_line, read

__all__ = ["describe", "dumps", "from_dict", "load", "loads"]


# --- reading and writing ---------------------------------------------------------------------
def _validate(data, lines: Lines, base_dir: str, path: str, text: Optional[str]) -> Scenario:
    try:
        sc = Scenario.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as err:
        raise explain(err, lines, _known) from None
    for i, spec in enumerate(sc.fabrics):
        spec._line = lines.spot(("fabrics", i)).key_line
        spec._folder = os.path.abspath(base_dir)
    sc._expect_lines = [lines.spot(("expect", i)).key_line for i in range(len(sc.expect))]
    check(sc, lines)
    sc._path = path
    sc._text = dumps(sc) if text is None else text
    return sc


def loads(text: str, path: str = "<scenario>") -> Scenario:
    """Parse and validate a scenario; every problem is a ScenarioError naming file and line.
    Relative trace paths are taken from the folder of ``path``."""
    data, lines = read(text, path)
    return _validate(data, lines, os.path.dirname(os.path.abspath(path)), path, text)


def load(path: str) -> Scenario:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ScenarioError(one_line(f"{path}: no such scenario file")) from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as err:
        raise ScenarioError(one_line(f"{path}: cannot read the scenario: {err}")) from None
    return loads(text, path)


def from_dict(doc: dict, path: str = "<flags>", base_dir: str = ".") -> Scenario:
    """Validate a plain dict exactly as a file holding it would be (errors name line 1);
    relative trace paths are taken from ``base_dir``.  Its ``text`` is :func:`dumps`'s."""
    return _validate(_plain(doc), Lines(path), base_dir, path, None)


def dumps(sc: Scenario) -> str:
    """YAML that :func:`loads` reads back into an equal scenario: every key, defaults filled
    in, trace paths absolute, the model a preset name or all its fields."""
    return yaml.safe_dump(sc.model_dump(mode="python"), sort_keys=False, allow_unicode=True,
                          default_flow_style=False)


def _plain(value):
    """Tuples as lists (YAML has no tuples), through nested dicts and lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# --- the keys, for error messages and --help -------------------------------------------------
def _known(loc: tuple) -> list[str]:
    return scenario_keys.known(Scenario, SECTIONS, loc)


def describe() -> str:
    """Every key a scenario takes, with its default, limit and meaning (for --help)."""
    return scenario_keys.describe(Scenario, SECTIONS)
