"""Which code made a run: a digest over the installed product's own source and data files
(``versions.code``), so results gathered over several calls show whether one version made them.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os

PACKAGES = ("topologies", "controller", "traffic", "testbed")
SUFFIXES = (".py", ".j2", ".json", ".yaml", ".yml", ".csv", ".jsonl", ".txt")


def code_digest(packages=PACKAGES) -> str:
    """12 hex digits of SHA-256 over every source and data file of ``packages``."""
    h = hashlib.sha256()
    for pkg in packages:
        spec = importlib.util.find_spec(pkg)
        root = os.path.dirname(spec.origin) if spec and spec.origin else None
        if root is None:
            continue
        for dirpath, dirnames, files in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.join(pkg, os.path.relpath(path, root))
                h.update(rel.encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read())
                h.update(b"\0")
    return h.hexdigest()[:12]
