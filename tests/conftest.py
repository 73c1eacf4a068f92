"""Checks shared by unit and integration tests."""
import csv
import json
import math
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats as sps


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _stats(values, qs):
    want = {"p" + f"{q:g}".replace(".", ""): round(float(np.percentile(values, q)), 3)
            for q in qs}
    want["mean"] = round(float(np.mean(values)), 3)
    return want


def figures(transfers, requests, link_mbps):
    """What summary.json should say of these CSV rows, computed here with numpy."""
    done = [r for r in transfers if r["verified"] == "True"]
    fct = [float(r["fct_ms"]) for r in done]
    slow = [float(r["fct_ms"]) / (int(r["bytes"]) * 8 / (link_mbps * 1e6) * 1000) for r in done]
    ttfb = [(float(r["first_byte_s"]) - float(r["start_s"])) * 1000 for r in done]
    ttft = [float(q["ttft_ms"]) for q in requests if q["ttft_ms"]]
    return {"fct_ms": _stats(fct, (50, 99, 99.9)), "slowdown": _stats(slow, (50, 99)),
            "ttfb_ms": _stats(ttfb, (50, 99)), "ttft_ms": _stats(ttft, (50, 99))}


def check_run_figures(run_dir):
    """Every percentile in a run folder's summary.json (pooled and per repetition) is
    numpy's of the CSV columns, and every spread's interval is Student's t over the
    per-repetition figures."""
    from testbed.experiment.summaries import SPREAD_KEYS
    s = json.loads((run_dir / "summary.json").read_text())
    transfers, requests = _csv(run_dir / "transfers.csv"), _csv(run_dir / "requests.csv")
    want = figures(transfers, requests, s["link_mbps"])
    assert {k: s[k] for k in want} == want, run_dir
    assert len(s["per_rep"]) == s["repetitions"]
    for k, rep in enumerate(s["per_rep"]):
        mine = figures([r for r in transfers if r["rep"] == str(k)],
                       [q for q in requests if q["rep"] == str(k)], s["link_mbps"])
        assert {key: rep[key] for key in mine} == mine, (run_dir, k)
    assert set(s["spread"]) == set(SPREAD_KEYS)
    for key, (field, sub) in SPREAD_KEYS.items():
        xs = [r[field] if sub is None else r[field][sub] for r in s["per_rep"]]
        sp, n = s["spread"][key], len(xs)
        assert sp["n"] == n and sp["mean"] == round(float(np.mean(xs)), 4), key
        if n > 1:
            half = sps.t.ppf(0.975, n - 1) * np.std(xs, ddof=1) / math.sqrt(n)
            assert sp["ci95"] == pytest.approx(half, abs=1e-4), key      # stored to 4 places
        assert (sp["min"], sp["max"]) == (round(min(xs), 4), round(max(xs), 4))
    return s


@pytest.fixture
def run_figures_match():
    """``run_figures_match(run_dir)`` asserts :func:`check_run_figures` and returns the
    summary."""
    return check_run_figures


_GROUP_S: dict = defaultdict(float)       # test file -> seconds (setup, call and teardown)
_STARTED: list = []


def pytest_sessionstart(session):
    import time
    _STARTED.append(time.time())


def pytest_runtest_logreport(report):
    _GROUP_S[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    """The time of every test group (file), slowest first, and of unit and integration."""
    if not _GROUP_S:
        return
    tr = terminalreporter
    tr.section("time per test group")
    kinds = defaultdict(float)
    for group, secs in sorted(_GROUP_S.items(), key=lambda kv: -kv[1]):
        kinds[group.split("/")[1] if group.count("/") > 1 else "other"] += secs
        tr.write_line(f"{secs:8.1f} s  {group}")
    import time
    workers = getattr(tr.config.option, "numprocesses", None)
    wall = (f"   (wall {time.time() - _STARTED[0]:.1f} s, on {workers} workers)"
            if workers and _STARTED else "")
    tr.write_line("   ".join(f"{kind} {secs:.1f} s" for kind, secs in sorted(kinds.items()))
                  + wall)
