"""The user documentation keeps up with the code: docs/reference.md documents every verb of
the ``zcube`` command and every long option of each, in that verb's own section (or one it
links to), and every scenario key with its default; every relative link of README.md and
docs/ leads to a file that exists (no root)."""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Optional, get_args, get_origin

import pytest
from pydantic import BaseModel

from testbed.cli.main import make_parser
from testbed.experiment.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _verbs() -> dict[str, argparse.ArgumentParser]:
    """Each verb of ``zcube`` and its parser."""
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _slug(title: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


def _sections(text: str) -> dict[str, str]:
    """Each heading's anchor -> the text up to the next heading."""
    out, slug, lines = {}, "", []
    for line in text.splitlines():
        if line.startswith("#"):
            out[slug] = "\n".join(lines)
            slug, lines = _slug(line.lstrip("#")), []
        else:
            lines.append(line)
    out[slug] = "\n".join(lines)
    return out


def _verb_text(sections: dict[str, str], verb: str) -> str:
    """A verb's section and the sections it links to (the shared option tables)."""
    own = sections.get(_slug(f"`zcube {verb}`"), "")
    linked = re.findall(r"\]\(#([\w-]+)\)", own)
    return "\n".join([own] + [sections.get(s, "") for s in linked])


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings
            if s.startswith("--") and s != "--help"]


@pytest.mark.parametrize("verb", sorted(_verbs()))
def test_every_option_of_every_verb_is_documented_in_its_section(verb):
    sections = _sections(REFERENCE.read_text(encoding="utf-8"))
    assert _slug(f"`zcube {verb}`") in sections, f"no section for zcube {verb}"
    text = _verb_text(sections, verb)
    missing = [o for o in _long_options(_verbs()[verb])
               if not re.search(rf"`{re.escape(o)}[ `=]", text)]
    assert not missing, f"zcube {verb}: {', '.join(missing)} not in docs/reference.md"


def _section_model(annotation) -> Optional[type]:
    """The pydantic model a field holds (itself, or inside Optional, list or Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _section_model(arg)
        if found is not None:
            return found
    return None


def scenario_keys(model: type = Scenario, prefix: str = ""):
    """``(dotted key, field, whether it is a section)`` for every key a scenario takes;
    a list's items are ``key[].item``."""
    for name, field in model.model_fields.items():
        key = prefix + name
        section = _section_model(field.annotation)
        yield key, field, section is not None
        if section is not None:
            listed = get_origin(field.annotation) is list or any(
                get_origin(a) is list for a in get_args(field.annotation))
            yield from scenario_keys(section, key + ("[]." if listed else "."))


def default_text(field) -> str:
    """A key's default as docs/reference.md writes it."""
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory else field.default
    if value is None:
        return "none"
    if value == "":
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, BaseModel):
        return "see below"
    return str(value)


def test_every_scenario_key_and_its_default_is_documented():
    text = REFERENCE.read_text(encoding="utf-8")
    for key, field, section in scenario_keys():
        row = re.search(rf"^\| `{re.escape(key)}` \| ([^|]*) \|", text, re.MULTILINE)
        assert row, f"scenario key {key} not in docs/reference.md"
        if not section:
            assert row.group(1).strip() == default_text(field), key


def test_scenario_keys_are_walked_through_their_sections():
    keys = {k for k, _, _ in scenario_keys()}
    assert {"fabrics[].policy", "workload.rate", "emulation.tcp_cc", "faults[].element",
            "sweep.slo_ttft_ms"} <= keys


def test_relative_links_lead_to_files_and_headings():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
            if "://" in target:
                continue
            doc = page.parent / target if target else page
            assert doc.exists(), f"{page.name}: {target}"
            if anchor:
                assert anchor in _sections(doc.read_text(encoding="utf-8")), \
                    f"{page.name}: {target}#{anchor}"


def test_user_documentation_tells_no_history():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), page.name
        assert not re.search(r"\b(demo|rep|repcr|aa|cv)\d+[a-z]?\b", text), page.name
        assert "/work/" not in text, page.name


def _table_cells(text: str, heading: str) -> set[str]:
    """The names in backquotes in the first column of the table under ``heading``."""
    section = _sections(text)[_slug(heading)]
    firsts = re.findall(r"^\| ([^|]+) \|", section, re.MULTILINE)
    return {name for cell in firsts for name in re.findall(r"`([^`]+)`", cell)}


def test_every_column_of_the_run_files_is_documented():
    from testbed.core.records import LINK_FIELDS, ROW_FIELDS
    from testbed.experiment.summaries import REQUEST_FIELDS
    text = REFERENCE.read_text(encoding="utf-8")
    assert set(ROW_FIELDS) <= _table_cells(text, "transfers.csv")
    assert {"rep", *LINK_FIELDS} <= _table_cells(text, "links.csv")
    assert set(REQUEST_FIELDS) <= _table_cells(text, "requests.csv")


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:,\d{3})*(?:\.\d+)?", text))


def test_the_limits_in_the_scenario_keys_table_are_the_codes():
    """Each key's limit column quotes exactly the bounds its field has (limits.py), and a
    key without an upper bound quotes none."""
    from testbed.experiment.scenario import limits as L
    from testbed.experiment.scenario.model import NAME_RE
    text = REFERENCE.read_text(encoding="utf-8")
    # bounds checked across keys rather than by the field itself
    elsewhere = {"link_mbps": L.LINK_MBPS, "time_dilation": L.TIME_DILATION,
                 "name": (int(re.search(r"\{0,(\d+)\}", NAME_RE.pattern).group(1)) + 1,)}
    for key, field, _ in scenario_keys():
        row = re.search(rf"^\| `{re.escape(key)}` \|[^|]*\|([^|]*)\|", text, re.MULTILINE)
        cell = row.group(1)
        bounds = {L.number(getattr(m, a)) for m in field.metadata
                  for a in ("ge", "gt", "le", "max_length") if getattr(m, a, None) is not None}
        bounds |= {L.number(v) for v in elsewhere.get(key, ())}
        upper = L.shown(field)
        if upper:
            assert upper in cell or f"to {upper.split()[2]}" in cell, (key, cell, upper)
        assert _numbers(cell) <= bounds | {"0"}, (key, cell, bounds)


def test_the_spray_entropy_quoted_is_the_codes():
    from controller.routing import MAX_ENTROPY, SPRAY_ENTROPY
    from testbed.experiment.scenario import FabricSpec
    text = REFERENCE.read_text(encoding="utf-8")
    assert f"(default {SPRAY_ENTROPY}, at most {MAX_ENTROPY})" in text
    assert f"default {SPRAY_ENTROPY})" in FabricSpec.model_fields["policy"].description
    routes = _verbs()["routes"]
    policy = next(a for a in routes._actions if "--policy" in a.option_strings)
    assert f"over {SPRAY_ENTROPY} connections" in policy.help
