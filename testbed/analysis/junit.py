"""The JUnit XML file ``zcube run`` and ``zcube demo`` write for a CI pipeline
(``--junit-xml``), with :mod:`xml.etree`: one testsuite per scenario run; per run a test
case for "all transfers verified", one for "faithful" and, with faults, one for "fault
schedule run as written"; a test case per expectation (:mod:`testbed.analysis.checks`): a
failure with the values it read, skipped with the reason it was not judged.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field

from testbed.analysis.checks import ERROR, FAIL, NOT_JUDGED, PASS, Outcome, faithful_of, read_text
from testbed.errors import UsageError

VERIFIED, FAITHFUL, FAULTS = "all transfers verified", "faithful", "fault schedule run as written"
# the JUnit result of each outcome of an expectation
RESULT = {PASS: "pass", FAIL: "failure", NOT_JUDGED: "skipped", ERROR: "error"}
# what XML 1.0 cannot hold, even escaped
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass
class Case:
    classname: str
    name: str
    result: str = "pass"        # pass, failure, error or skipped
    message: str = ""           # what failed, or why it was skipped
    detail: str = ""            # the figures it read


@dataclass
class Suite:
    name: str
    scenario: str
    backend: str
    out: str
    code: int = 0
    cases: list = field(default_factory=list)


def check_junit_path(path: str) -> None:
    """Refuse, before anything starts, a ``--junit-xml`` path that cannot be written."""
    from testbed.experiment.pipeline import prepare_out
    if os.path.isdir(path):
        raise UsageError(f"--junit-xml {path}: is a folder")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"--junit-xml {path}: not writable")
    prepare_out(os.path.dirname(os.path.abspath(path)), "--junit-xml")


def suite(sc, out: str, backend: str, code: int, summaries: dict, outcomes: list[Outcome],
          taken=()) -> Suite:
    """The suite of one scenario run into ``out``; named after the scenario, and its
    folder too where a suite already has the scenario's name (``taken``)."""
    name = sc.name if sc.name not in taken else \
        f"{sc.name} ({os.path.basename(os.path.normpath(out))})"
    return Suite(name, sc.name, backend, out, code,
                 run_cases(sc, code, summaries) + [expect_case(sc.name, o) for o in outcomes])


def _verified(cls: str, s: dict) -> Case:
    from testbed.experiment.pipeline import all_verified
    cut = sum(f.get("transfers_cut_off", 0) for f in s.get("faults") or [])
    said = (f"{s['transfers_verified']:,} of {s['transfers_total']:,} transfers verified"
            + (f", {cut:,} cut off by a fault" if cut else ""))
    if all_verified({"": s}):
        return Case(cls, VERIFIED, detail=said)
    first = "; ".join(f"request {f.get('request')} {f.get('src')}->{f.get('dst')}: "
                      f"{f.get('status')}" for f in (s.get("failed") or [])[:5])
    return Case(cls, VERIFIED, "failure", said, f"first not verified: {first}" if first else "")


def _faithful(cls: str, s: dict) -> Case:
    record = s.get("fidelity")
    if record is None:
        return Case(cls, FAITHFUL, detail=f"no emulator to judge ({s.get('backend')} backend)")
    if faithful_of(s):
        return Case(cls, FAITHFUL, detail="every fidelity bound held (docs/fidelity.md)")
    reasons = "; ".join(record.get("reasons") or [])
    return Case(cls, FAITHFUL, "failure", f"not faithful: {reasons}",
                "its figures measure the emulator, not the fabric (docs/fidelity.md)")


def _faults(cls: str, s: dict) -> Case:
    events, missed = len(s.get("faults") or []), s.get("faults_not_run") or 0
    said = f"{events - missed} of {events} fault events run"
    return Case(cls, FAULTS, "failure" if missed else "pass", said if missed else "", said)


def run_cases(sc, code: int, summaries: dict) -> list[Case]:
    """Each run's cases: all transfers verified and faithful, and with faults the fault
    schedule; skipped when interrupted, an error when the run stopped without results."""
    from testbed.experiment.pipeline import EXIT_INTERRUPTED
    out = []
    for _, _, name in sc.run_names():
        cls, s = f"{sc.name}.{name}", summaries.get(name)
        if code == EXIT_INTERRUPTED or s is None:
            stopped = code == EXIT_INTERRUPTED
            why = "interrupted" if stopped else \
                "the run stopped without results (its error is on the console)"
            out += [Case(cls, VERIFIED, "skipped" if stopped else "error", why),
                    Case(cls, FAITHFUL, "skipped", why)]
            continue
        out += [_verified(cls, s), _faithful(cls, s)]
        if s.get("faults"):
            out.append(_faults(cls, s))
    return out


def expect_case(scenario: str, o: Outcome) -> Case:
    """An expectation's case: a failure with the values it read, skipped with the reason
    it was not judged, an error where it read a path the summaries do not have."""
    read = read_text(o)
    message = {PASS: "", FAIL: f"FAIL: {read}", NOT_JUDGED: f"not judged: {o.reason}",
               ERROR: o.reason}[o.status]
    return Case(f"{scenario}.expect", o.expectation.text, RESULT[o.status], message,
                f"read: {read}")


def _xml(text: str) -> str:
    return _NOT_XML.sub("?", text)


def _counts(cases: list[Case]) -> dict:
    n = Counter(c.result for c in cases)
    return {"tests": str(len(cases)), "failures": str(n["failure"]), "errors": str(n["error"]),
            "skipped": str(n["skipped"])}


def junit_tree(suites: list[Suite]) -> ET.ElementTree:
    root = ET.Element("testsuites", name="zcube", **_counts([c for s in suites
                                                              for c in s.cases]))
    for s in suites:
        el = ET.SubElement(root, "testsuite", name=_xml(s.name), **_counts(s.cases))
        props = ET.SubElement(el, "properties")
        for key, value in (("scenario", s.scenario), ("backend", s.backend),
                           ("output", s.out), ("exit_status", str(s.code))):
            ET.SubElement(props, "property", name=key, value=_xml(str(value)))
        for c in s.cases:
            tc = ET.SubElement(el, "testcase", classname=_xml(c.classname), name=_xml(c.name))
            if c.result != "pass":
                ET.SubElement(tc, c.result, message=_xml(c.message)).text = \
                    _xml(c.detail) or None
            elif c.detail:
                ET.SubElement(tc, "system-out").text = _xml(c.detail)
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(suites: list[Suite], path: str) -> None:
    """The JUnit XML file of ``suites`` at ``path``, whole or not at all."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    part = os.path.join(folder, f".{os.path.basename(path)}.part")
    junit_tree(suites).write(part, encoding="utf-8", xml_declaration=True)
    os.replace(part, path)
