"""The code's shape: functions a reader can hold, files of a sensible size, no module
reaching into another's private names, no import cycles, and the import contracts and lint
of pyproject.toml (import-linter, ruff) holding."""
import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("topologies", "controller", "traffic", "testbed")
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 600


def product_files():
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_is_longer_than_a_reader_can_hold():
    long = []
    for path in product_files():
        tree = ast.parse(path.read_text())
        long += [f"{path.relative_to(ROOT)}:{f.lineno} {f.name} ({f.end_lineno - f.lineno + 1})"
                 for f in _functions(tree) if f.end_lineno - f.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_file_is_over_the_limit():
    big = [f"{p.relative_to(ROOT)} ({n})" for p in product_files()
           if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES]
    assert not big, f"files over {MAX_FILE_LINES} lines: {big}"


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_no_module_imports_another_modules_private_names():
    bad = []
    for path in product_files():
        me = _module_of(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] not in PACKAGES or node.module == me:
                    continue
                bad += [f"{me} imports {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad


def test_no_import_cycles():
    grimp = pytest.importorskip("grimp")
    import networkx as nx
    graph = grimp.build_graph(*PACKAGES)
    g = nx.DiGraph()
    for mod in graph.modules:
        for dep in graph.find_modules_directly_imported_by(mod):
            # a package's __init__ re-exporting its own modules is not a cycle a reader meets
            if not dep.startswith(mod + ".") and not mod.startswith(dep + "."):
                g.add_edge(mod, dep)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"import cycles: {cycles[:5]}"


def _tool(name):
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else shutil.which(name)


def test_import_contracts_hold():
    exe = _tool("lint-imports")
    if exe is None:
        pytest.skip("import-linter not installed (make setup installs it)")
    out = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_ruff_finds_nothing():
    exe = _tool("ruff")
    if exe is None:
        pytest.skip("ruff not installed (make setup installs it)")
    out = subprocess.run([exe, "check", "--no-cache", *PACKAGES, "tests", "benchmarks"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, NO_COLOR="1"))
    assert out.returncode == 0, out.stdout[-4000:]
