"""The ``zcube`` pytest plugin as another project uses it: test files outside this repository
(examples/test_my_fabric.py and docs/api.md's plugin example), run with plain pytest from the
project's Python; as root they bring fabrics up and pass, as an unprivileged user they are
skipped with one line saying why (root, OVS)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def outside():
    """A folder outside the repository holding the two test files, one an unprivileged user
    can read and write (pytest's own tmp_path is root's alone)."""
    where = Path(tempfile.mkdtemp(prefix="zcube-plugin-"))
    try:
        where.chmod(0o777)
        shutil.copy(ROOT / "examples" / "test_my_fabric.py", where)
        page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
        (block,) = re.findall(r"^```python pytest\n(.*?)^```$", page,
                              re.MULTILINE | re.DOTALL)
        (where / "test_from_the_docs.py").write_text(block)
        for p in where.iterdir():
            p.chmod(0o644)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _pytest(where: Path, *prefix: str) -> subprocess.CompletedProcess:
    # a plain environment: nothing of this repository on the path but the installed package
    env = {"PATH": os.environ["PATH"], "HOME": str(where), "LANG": "C.UTF-8"}
    return subprocess.run([*prefix, sys.executable, "-m", "pytest", "-q", "-rs",
                           "-p", "no:cacheprovider", "."], cwd=where, env=env,
                          capture_output=True, text=True, timeout=600)


def test_plugin_tests_outside_the_repository_pass_as_root(ovs, outside):
    got = _pytest(outside)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-2000:]
    assert re.search(r"\b3 passed\b", got.stdout), got.stdout[-2000:]


def test_plugin_tests_are_skipped_with_a_reason_without_root(outside):
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run the tests as an unprivileged user")
    nobody = (setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups")
    probe = subprocess.run([*nobody, sys.executable, "-c", "import pytest, testbed"],
                           cwd=outside, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:               # a clone under a folder only root may enter
        pytest.skip("an unprivileged user cannot import this project's Python here: "
                    + (probe.stderr.strip().splitlines() or ["?"])[-1])
    got = _pytest(outside, *nobody)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-2000:]
    assert re.search(r"\b3 skipped\b", got.stdout), got.stdout[-2000:]
    assert "zcube: emulating a fabric needs root" in got.stdout
