"""The examples of docs/api.md that need root run as written: a fabric brought up from
Python, a transfer sent, a switch failed and restored (root, Open vSwitch)."""
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def root_blocks() -> list[str]:
    """The page's fenced ```python blocks marked root (tests/unit/test_api_docs.py runs the
    others)."""
    return re.findall(r"^```python root\n(.*?)^```$", PAGE.read_text(encoding="utf-8"),
                      re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("index", range(len(root_blocks())))
def test_every_root_example_runs(ovs, index, capsys):
    code = root_blocks()[index]
    exec(compile(code, f"{PAGE}:root block {index}", "exec"), {"__name__": "__doc__"})
    assert capsys.readouterr().out
