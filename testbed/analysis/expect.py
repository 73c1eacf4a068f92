"""Expectations: checks a CI pipeline sets on a scenario's results (the scenario's ``expect:``
list and ``zcube run --expect``), one line each, such as
``fct_ms.p99[roft] / fct_ms.p99[zcube] > 1.2`` or
``verdict(fct_ms.p99, roft, zcube) == "zcube lower"``.  A line is parsed with :mod:`ast`
and held to a whitelist of node types (Python never evaluates it), its run names are
checked against the scenario's before anything runs, and it is evaluated given the value
of each figure it reads (:mod:`testbed.analysis.checks` reads them from the runs'
summaries and judges it: pass, FAIL or not judged).
"""
from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from typing import Optional

from testbed.errors import UsageError

__all__ = ["Expectation", "ExpectError", "FAITHFUL", "Figure", "Verdict", "PAIRED_PATHS",
           "evaluate", "parse", "parse_all"]

MAX_CHARS = 1_000          # one expectation; longer is not a check a person reads
# the summary paths that have a paired verdict, and the comparison's label for each
PAIRED_PATHS = {"fct_ms.p50": "FCT p50 ms", "fct_ms.p99": "FCT p99 ms",
                "ttft_ms.p99": "TTFT p99 ms"}
# figures that count or describe rather than time, so an emulator's pace cannot move them:
# judged on a run that was not faithful too
UNTIMED = ("transfers_total", "transfers_verified", "transfers_completed", "requests_total",
           "requests_completed", "repetitions", "cost.", "verify.")
FAITHFUL = "faithful"
BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.Div: operator.truediv}
COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
           ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
KINDS = {"number": "number", "bool": "true/false", "text": "string"}
WORDS = {"True": True, "False": False, "true": True, "false": False}
# a string literal (kept as written), a run in brackets, or verdict()'s arguments
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"|\'[^\'\\]*(?:\\.[^\'\\]*)*\''
_LEXEME = re.compile(rf"({_STRING})|\[([^\[\]\"']*)\]|\bverdict\s*\(([^()\"']*)\)")


class ExpectError(UsageError):
    """A bad expectation: one line, exit status 2."""


@dataclass(frozen=True)
class Figure:
    """A figure of one run: its summary.json path (or ``faithful``) and the run."""
    path: str
    run: str

    def __str__(self) -> str:
        return f"{self.path}[{self.run}]"


@dataclass(frozen=True)
class Verdict:
    """The paired verdict of ``run`` against the reference ``ref`` on a figure."""
    path: str
    run: str
    ref: str

    def __str__(self) -> str:
        return f"verdict({self.path}, {self.run}, {self.ref})"

    def words(self) -> tuple[str, ...]:
        """Every string this verdict can be (:func:`testbed.core.verdict.words`)."""
        return (f"{self.run} lower", f"{self.ref} lower", "level", "not separated")


@dataclass
class Expectation:
    text: str
    where: str                 # "--expect", or "FILE:LINE: expect[i]"
    tree: ast.Expression
    leaves: dict = field(default_factory=dict)     # ast node -> Figure or Verdict

    @property
    def reads(self) -> list:
        """The figures and verdicts it reads, each once, in order."""
        return list(dict.fromkeys(self.leaves.values()))

    def runs(self) -> list[str]:
        """Every run it reads, each once."""
        return list(dict.fromkeys(r for leaf in self.reads for r in (
            (leaf.run, leaf.ref) if isinstance(leaf, Verdict) else (leaf.run,))))

    def judged_runs(self) -> list[str]:
        """The runs whose timed figures it reads (``faithful`` and the figures of
        :data:`UNTIMED` aside): a run not faithful among them leaves it not judged."""
        runs = []
        for leaf in self.reads:
            if isinstance(leaf, Verdict):
                runs += [leaf.run, leaf.ref]
            elif leaf.path != FAITHFUL and not leaf.path.startswith(UNTIMED):
                runs.append(leaf.run)
        return list(dict.fromkeys(runs))

    def error(self, what: str) -> ExpectError:
        text = self.text if len(self.text) <= 120 else self.text[:100] + " ..."
        return ExpectError(f"{self.where}: {text!r}: {what}")


# --- parsing ---------------------------------------------------------------------------------
def _quoted(match) -> str:
    """A bracketed run or verdict()'s arguments as string literals, so that run names with
    ``-`` or ``.`` stay names; a string literal as written."""
    string, run, args = match.groups()
    if string is not None:
        return string
    if run is not None:
        return f"[{run.strip()!r}]"
    return "verdict(" + ", ".join(repr(a.strip()) for a in args.split(",")) + ")"


def parse(text: str, runs: dict, where: str = "--expect") -> Expectation:
    """An expectation from its text; ``runs`` maps each run name the scenario makes to its
    placement.  ExpectError (one line) for a bad one."""
    exp = Expectation(text, where, ast.Expression(body=ast.Constant(True)))
    if not text.strip():
        raise exp.error("an empty expectation")
    if len(text) > MAX_CHARS:
        raise exp.error(f"longer than {MAX_CHARS:,} characters")
    try:
        exp.tree = ast.parse(_LEXEME.sub(_quoted, text.strip()), mode="eval")
    except SyntaxError as err:
        raise exp.error(f"not an expression ({err.msg})") from None
    except (RecursionError, MemoryError):
        raise exp.error("not an expression (nested too deeply)") from None
    except ValueError as err:                     # a null byte
        raise exp.error(f"not an expression ({err})") from None
    try:
        kind = _Checker(exp, runs).kind(exp.tree.body)
    except RecursionError:
        raise exp.error("not an expression (nested too deeply)") from None
    if kind != "bool":
        raise exp.error("not a check: compare it with something (e.g. with < or ==)")
    return exp


def parse_all(sc, extra=()) -> list[Expectation]:
    """The scenario's ``expect`` list, then ``extra`` (``--expect``), each parsed and its run
    names checked against the runs ``sc`` makes: before anything runs."""
    runs = {name: placement for _, placement, name in sc.run_names()}
    lines = sc.expect_lines
    out = []
    for i, text in enumerate(sc.expect):
        line = lines[i] if i < len(lines) else 1
        out.append(parse(text, runs, f"{sc.path}:{line}: expect[{i}]"))
    return out + [parse(text, runs) for text in extra]


class _Checker:
    """Walks a parsed expectation, refusing every node outside the grammar; :meth:`kind` is
    what a node gives: ``number``, ``bool`` or ``text`` (a verdict or a string)."""

    def __init__(self, exp: Expectation, runs: dict):
        self.exp, self.runs = exp, runs

    def kind(self, node) -> str:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise self.exp.error(f"{_shown(node)} is not part of an expectation (figures as "
                                 "path[run], numbers, + - * /, comparisons, and, or, not, "
                                 "verdict())")
        return method(node)

    def _Constant(self, node) -> str:
        if isinstance(node.value, bool):
            return "bool"
        if isinstance(node.value, (int, float)):
            return "number"
        if isinstance(node.value, str):
            return "text"
        raise self.exp.error(f"{node.value!r} is neither a number nor a string")

    def _Name(self, node) -> str:
        if node.id in WORDS:
            return "bool"
        first = next(iter(self.runs), "zcube")
        raise self.exp.error(f"{node.id}: a figure names its run, as {node.id}[{first}]")

    def _Attribute(self, node) -> str:
        path = _path(node)
        if path is None:
            raise self.exp.error(f"{_shown(node)}: not a figure")
        first = next(iter(self.runs), "zcube")
        raise self.exp.error(f"{path}: a figure names its run, as {path}[{first}]")

    def _run(self, name: str) -> str:
        if name in self.runs:
            return name
        several = len(set(self.runs.values())) > 1
        raise self.exp.error(f"no run {name!r} (runs: {', '.join(self.runs)}"
                             + ("; with several placements a run is <fabric>-<placement>"
                                if several else "") + ")")

    def _Subscript(self, node) -> str:
        path = _path(node.value)
        if not path or not isinstance(node.slice, ast.Constant):
            raise self.exp.error(f"{_shown(node)}: a figure is a summary.json path and a run "
                                 "in brackets, as fct_ms.p99[zcube]")
        run = self._run(str(node.slice.value))
        if path == "fidelity.faithful":
            raise self.exp.error(f"write faithful[{run}] (true on backends without an "
                                 "emulator to judge)")
        self.exp.leaves[node] = Figure(path, run)
        return "bool" if path == FAITHFUL else "number"

    def _Call(self, node) -> str:
        args = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if not (isinstance(node.func, ast.Name) and node.func.id == "verdict") \
                or node.keywords or len(args) != 3 or len(node.args) != 3:
            raise self.exp.error(f"{_shown(node)}: the one call is verdict(figure, run, "
                                 "reference), as verdict(fct_ms.p99, roft, zcube)")
        path, run, ref = (str(a) for a in args)
        if path not in PAIRED_PATHS:
            raise self.exp.error(f"verdict(): {path} has no paired verdict (one of "
                                 f"{', '.join(PAIRED_PATHS)})")
        run, ref = self._run(run), self._run(ref)
        if run == ref:
            raise self.exp.error(f"verdict(): {run} against itself")
        if self.runs[run] != self.runs[ref]:
            raise self.exp.error(f"verdict(): {run} ({self.runs[run]}) and {ref} "
                                 f"({self.runs[ref]}) are in different placements; only runs "
                                 "of one placement are paired")
        self.exp.leaves[node] = Verdict(path, run, ref)
        return "text"

    def _BinOp(self, node) -> str:
        if type(node.op) not in BINARY:
            raise self.exp.error(f"{_shown(node)}: arithmetic is + - * / only")
        if {self.kind(node.left), self.kind(node.right)} != {"number"}:
            raise self.exp.error(f"{_shown(node)}: arithmetic between numbers only")
        return "number"

    def _UnaryOp(self, node) -> str:
        want = "bool" if isinstance(node.op, ast.Not) else "number"
        if type(node.op) not in (ast.Not, ast.USub, ast.UAdd) or self.kind(node.operand) != want:
            raise self.exp.error(f"{_shown(node)}: 'not' takes a check, '-' a number")
        return want

    def _BoolOp(self, node) -> str:
        if any(self.kind(v) != "bool" for v in node.values):
            raise self.exp.error(f"{_shown(node)}: 'and' and 'or' join checks")
        return "bool"

    def _Compare(self, node) -> str:
        sides = [node.left, *node.comparators]
        kinds = [self.kind(s) for s in sides]
        for op, (a, b), (ka, kb) in zip(node.ops, zip(sides, sides[1:]), zip(kinds, kinds[1:])):
            if type(op) not in COMPARE:
                raise self.exp.error(f"{_shown(node)}: compare with == != < <= > >=")
            if ka != kb:
                raise self.exp.error(f"{_shown(node)}: compares a {KINDS[ka]} with a "
                                     f"{KINDS[kb]}")
            if ka != "number" and type(op) not in (ast.Eq, ast.NotEq):
                raise self.exp.error(f"{_shown(node)}: a {KINDS[ka]} is compared with == or !=")
            if ka == "text":
                self._verdict_words(a, b)
        return "bool"

    def _verdict_words(self, a, b) -> None:
        """A verdict compared with a string that it can be."""
        leaves = [self.exp.leaves.get(s) for s in (a, b)]
        verdicts = [x for x in leaves if isinstance(x, Verdict)]
        if len(verdicts) != 1:
            if not verdicts:
                raise self.exp.error("compares two strings; a string is compared with a "
                                     "verdict()")
            return
        said = next(s.value for s in (a, b) if isinstance(s, ast.Constant))
        if said not in verdicts[0].words():
            raise self.exp.error(f"{verdicts[0]} is never {said!r} (it is one of "
                                 + ", ".join(f'"{w}"' for w in verdicts[0].words()) + ")")


def _path(node) -> Optional[str]:
    """``fct_ms.p99`` from the names and attributes it is written with (None: not a path)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id in WORDS:
        return None
    return ".".join([node.id, *reversed(parts)])


def _shown(node) -> str:
    """A node as the user wrote it, near enough (runs come back quoted)."""
    try:
        return re.sub(r"\['([^']*)'\]", r"[\1]", ast.unparse(node))
    except (AttributeError, ValueError, RecursionError):
        return type(node).__name__


# --- evaluating ------------------------------------------------------------------------------
def evaluate(exp: Expectation, values: dict) -> bool:
    """Whether ``exp`` holds, given the value of each of its :attr:`~Expectation.reads`
    (a number, a bool for ``faithful``, a verdict's words); ZeroDivisionError propagates."""
    return bool(_value(exp.tree.body, exp, values))


def _value(node, exp: Expectation, values: dict):
    """A node's value, given each leaf's; ZeroDivisionError propagates."""
    if node in exp.leaves:
        return values[exp.leaves[node]]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return WORDS[node.id]
    if isinstance(node, ast.BinOp):
        return BINARY[type(node.op)](_value(node.left, exp, values),
                                     _value(node.right, exp, values))
    if isinstance(node, ast.UnaryOp):
        v = _value(node.operand, exp, values)
        return {ast.Not: operator.not_, ast.USub: operator.neg,
                ast.UAdd: operator.pos}[type(node.op)](v)
    if isinstance(node, ast.BoolOp):
        got = [_value(v, exp, values) for v in node.values]
        return all(got) if isinstance(node.op, ast.And) else any(got)
    sides = [_value(s, exp, values) for s in (node.left, *node.comparators)]
    return all(COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, sides, sides[1:]))
