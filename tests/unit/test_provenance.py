"""versions.code: a digest over a package's source and data files that changes with them."""
from testbed.experiment.provenance import code_digest


def test_digest_follows_the_package_files_and_ignores_caches(tmp_path, monkeypatch):
    pkg = tmp_path / "probe_pkg"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("X = 1\n")
    (pkg / "data" / "sizes.csv").write_text("a,b\n1,2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = code_digest(("probe_pkg",))
    assert len(first) == 12 and int(first, 16) >= 0
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.py").write_text("junk\n")
    (pkg / "notes.bak").write_text("not a source file\n")
    assert code_digest(("probe_pkg",)) == first
    (pkg / "data" / "sizes.csv").write_text("a,b\n1,3\n")
    changed = code_digest(("probe_pkg",))
    assert changed != first
    (pkg / "data" / "sizes.csv").rename(pkg / "data" / "other.csv")   # a rename counts too
    assert code_digest(("probe_pkg",)) not in (first, changed)
    assert code_digest(("no_such_package_here",)) == code_digest(())
