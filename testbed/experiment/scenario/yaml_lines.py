"""Scenario text to plain data with the line of every key (:class:`Lines`), and errors that
name it: the YAML is composed, not ``safe_load``-ed, so duplicate keys, tags and aliases are
seen, and a pydantic error becomes the one line ``FILE:LINE: key.path: what``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import yaml
from yaml.constructor import SafeConstructor

MAX_VALUES = 20_000            # values a file may expand to through aliases (anchor bombs)
MAP_TAG, SEQ_TAG = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


class ScenarioError(ValueError):
    """A bad scenario file; the message names the file, line and key."""


def one_line(text: str) -> str:
    """``text`` with every unprintable character (newlines included) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def dotted(loc: tuple) -> str:
    """``("fabrics", 0, "policy")`` -> ``fabrics[0].policy``; the root is ``scenario``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "scenario"


@dataclass(frozen=True)
class Spot:
    key_line: int              # the key's line (for a list item: the item's first line)
    value_line: int            # the value's first line
    end_line: int              # the value's last line


class Lines:
    """Where each key path of one scenario is written; paths never written fall back to
    their nearest written parent (and a dict given in code, with no lines, to line 1)."""

    def __init__(self, path: str, spots: Optional[dict] = None):
        self.path = path
        self.spots = spots or {}

    def spot(self, loc: tuple) -> Spot:
        loc = tuple(loc)
        while loc and loc not in self.spots:
            loc = loc[:-1]
        return self.spots.get(loc, Spot(1, 1, 1))

    def error(self, loc: tuple, msg: str, line: Optional[int] = None) -> ScenarioError:
        line = self.spot(loc).key_line if line is None else line
        return ScenarioError(one_line(f"{self.path}:{line}: {dotted(tuple(loc))}: {msg}"))

    def fail(self, loc: tuple, msg: str, fallback: Optional[tuple] = None):
        """Raise the error of ``loc`` on its key's line; if that key was not written, on the
        line of ``fallback`` (default: of the nearest written parent)."""
        loc = tuple(loc)
        line = None
        if loc not in self.spots and fallback is not None:
            line = self.spot(fallback).key_line
        raise self.error(loc, msg, line)


# --- YAML ------------------------------------------------------------------------------------
def read(text: str, path: str):
    """``(data, Lines)`` of a scenario's text; ScenarioError for anything YAML cannot give
    as plain data: bad syntax, an empty file, a key given twice, an unknown tag, an alias
    that refers to itself or expands too far."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ScenarioError(f"{path}:1: not valid YAML: nested too deeply") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = str(getattr(err, "problem", None) or err).splitlines()[0]
        raise ScenarioError(one_line(f"{path}:{line}: not valid YAML: {problem}")) from None
    if root is None:
        raise ScenarioError(one_line(f"{path}:1: scenario: the file is empty"))
    reader = _Reader(Lines(path))
    try:
        data = reader.value(root, (), root.start_mark.line + 1)
    except RecursionError:
        raise ScenarioError(one_line(f"{path}:1: scenario: nested too deeply")) from None
    return data, reader.lines


class _Reader:
    """Plain data from composed nodes.  An alias stands for its anchor's very node, whose
    marks are the anchor's: inside one, every key takes the line the alias is used on."""

    def __init__(self, lines: Lines):
        self.lines = lines
        self.left = MAX_VALUES
        self.seen: set = set()                   # nodes read once (a second time: an alias)
        self.open: set = set()                   # collection nodes being read (cycles)
        self.constructor = SafeConstructor()

    def value(self, node, loc: tuple, line: int, aliased: bool = False):
        self.left -= 1
        if self.left < 0:
            raise self.lines.error(loc, f"aliases expand to more than {MAX_VALUES} values", line)
        aliased = aliased or id(node) in self.seen
        self.seen.add(id(node))
        self.lines.spots[loc] = (Spot(line, line, line) if aliased else
                                 Spot(line, node.start_mark.line + 1, node.end_mark.line + 1))
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, loc, line)
        if id(node) in self.open:
            raise self.lines.error(loc, "an alias refers to the value that holds it", line)
        want = MAP_TAG if isinstance(node, yaml.MappingNode) else SEQ_TAG
        if node.tag != want:
            raise self.lines.error(loc, f"unsupported tag {node.tag!r}", line)
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self.mapping(node, loc, line if aliased else None)
            return [self.value(item, loc + (i,), line if aliased or id(item) in self.seen
                               else item.start_mark.line + 1, aliased)
                    for i, item in enumerate(node.value)]
        finally:
            self.open.discard(id(node))

    def mapping(self, node, loc: tuple, aliased_line: Optional[int]) -> dict:
        out: dict = {}
        first: dict = {}
        for k_node, v_node in node.value:
            line = aliased_line or k_node.start_mark.line + 1
            if not isinstance(k_node, yaml.ScalarNode):
                raise self.lines.error(loc, "a key must be a plain name, not a list or mapping",
                                       line)
            key = k_node.value
            if key in first:
                raise self.lines.error(loc + (key,), f"given twice (first on line {first[key]})",
                                       line)
            first[key] = line
            out[key] = self.value(v_node, loc + (key,), line, aliased_line is not None)
        return out

    def scalar(self, node, loc: tuple, line: int):
        try:
            value = self.constructor.construct_object(node)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as err:
            problem = str(getattr(err, "problem", None) or err).splitlines()[0]
            raise self.lines.error(loc, f"cannot read this value: {problem}", line) from None
        if isinstance(value, (list, dict, set)):                 # e.g. "!!map x"
            raise self.lines.error(loc, f"unsupported tag {node.tag!r}", line)
        return value


# --- pydantic errors -------------------------------------------------------------------------
KINDS = {"string_type": "a non-empty string", "int_type": "a whole number",
         "float_type": "a number", "finite_number": "a number", "bool_type": "true or false",
         "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping of keys"}
NAME_RULE = "is not a usable name (letters, digits, '.', '_', '-'; at most 40 characters)"


def _got(value) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def message(err: dict, known) -> str:
    """What one pydantic error means, in the scenario's words; ``known(loc)`` lists the keys
    of the section at ``loc``."""
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "extra_forbidden":
        return f"unknown key (known: {', '.join(known(err['loc'][:-1]))})"
    if kind == "missing":
        return f"missing required key {err['loc'][-1]!r}"
    if kind in KINDS:
        return f"expected {KINDS[kind]}, got {_got(value)}"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return f"expected one of {', '.join(choices)}, got {_got(value)}"
    if kind == "greater_than_equal":
        return f"must be {ctx['ge']:g} or more, got {value}"
    if kind == "greater_than":
        return f"must be greater than {ctx['gt']:g}, got {value}"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']:,} (this product's limit), got {value}"
    if kind == "too_long":
        return f"at most {ctx['max_length']:,} items (this product's limit), got " \
               f"{ctx.get('actual_length', 'more')}"
    if kind == "too_short":
        return "must not be empty"
    if kind == "string_too_short":
        return f"expected a non-empty string, got {value!r}"
    if kind == "string_pattern_mismatch":
        return f"{value!r} {NAME_RULE}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    return str(err.get("msg", kind))


def explain(exc, lines: Lines, known) -> ScenarioError:
    """The ScenarioError of the first problem in the file among a ValidationError's."""
    best = None
    for i, err in enumerate(exc.errors(include_url=False)):
        loc = tuple(err["loc"])
        if err["type"] == "missing":
            where = loc[:-1]
            spot = lines.spot(where)
            order, line = spot.end_line, spot.value_line        # after the section's own keys
        else:
            where, spot = loc, lines.spot(loc)
            line = spot.key_line if err["type"] == "extra_forbidden" else spot.value_line
            order = line
        if best is None or (order, i) < best[0]:
            best = ((order, i), where, line, err)
    _, where, line, err = best
    return lines.error(where, message(err, known), line)
