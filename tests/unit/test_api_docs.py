"""docs/api.md keeps up with testbed.api: every example marked no root runs as written (each
in a fresh namespace and a folder of its own), every one marked root at least compiles, and
every public name of the API is on the page (no root)."""
import os
import re
from pathlib import Path

import pytest

from testbed import api

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "api.md"


def blocks(kind: str) -> list[str]:
    """The page's fenced ```python blocks marked ``kind`` (``no-root``, ``root``, or
    ``pytest``: a test file for the plugin, run by tests/integration/test_plugin.py)."""
    text = PAGE.read_text(encoding="utf-8")
    return re.findall(rf"^```python {kind}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def test_the_page_has_examples_of_both_kinds():
    assert len(blocks("no-root")) >= 5 and len(blocks("root")) >= 2
    # every python block is marked, so none is left out of both tests
    text = PAGE.read_text(encoding="utf-8")
    assert len(re.findall(r"^```python", text, re.MULTILINE)) == \
        len(blocks("no-root")) + len(blocks("root")) + len(blocks("pytest")) \
        + 1                                   # the import line alone


@pytest.mark.parametrize("index", range(len(blocks("no-root"))))
def test_every_no_root_example_runs(index, tmp_path, capsys):
    code = blocks("no-root")[index]
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code, f"{PAGE}:no-root block {index}", "exec"), {"__name__": "__doc__"})
    finally:
        os.chdir(here)
    assert capsys.readouterr().out                   # each shows something


@pytest.mark.parametrize("index", range(len(blocks("root"))))
def test_every_root_example_compiles(index):
    compile(blocks("root")[index], f"{PAGE}:root block {index}", "exec")


def test_every_public_name_is_on_the_page():
    text = PAGE.read_text(encoding="utf-8")
    shown = {"Fabric", "RouteTable", "VerifyReport"}          # other modules' classes
    missing = [n for n in api.__all__ if n not in shown and n not in text]
    assert not missing, missing
