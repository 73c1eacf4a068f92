"""The one text-table aligner and the one CSV writer of ``testbed`` (the pure packages keep
their own small aligners, as they do not import ``testbed``).
"""
from __future__ import annotations

import csv
import io
import os
from typing import Iterable, Optional, Sequence, TextIO


def text_table(head: Sequence, rows: Iterable[Sequence], align: Optional[str] = None,
               rule: bool = False) -> list[str]:
    """The lines of a table: columns two spaces apart, each as wide as its widest cell.
    ``align`` has one letter per column, ``l`` or ``r`` (default: ``l`` then ``r`` for the
    rest: labels, then numbers); with ``rule`` a line of dashes follows the header."""
    table = [[str(c) for c in head]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    align = align or "l" + "r" * (len(widths) - 1)

    def line(cells):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                         for c, w, a in zip(cells, widths, align))
    out = [line(table[0])]
    if rule:
        out.append("  ".join("-" * w for w in widths))
    return out + [line(r) for r in table[1:]]


def write_rows(f: TextIO, rows: Iterable, fields: Sequence[str]) -> None:
    """Header and records onto a stream: a record is a dict (empty cells where a field is
    missing or None) or a sequence in field order."""
    w = csv.writer(f)
    w.writerow(fields)
    for r in rows:
        w.writerow([r.get(k) for k in fields] if isinstance(r, dict) else r)


def write_csv(rows: Iterable, fields: Sequence[str], path: str) -> None:
    """``path`` as CSV (readable by everyone: the results are shared)."""
    with open(path, "w", newline="") as f:
        write_rows(f, rows, fields)
    os.chmod(path, 0o644)


def csv_text(rows: Iterable, fields: Sequence[str]) -> str:
    """The same CSV as a string."""
    buf = io.StringIO()
    write_rows(buf, rows, fields)
    return buf.getvalue()


def fewer(counts: dict, say: str = "{} {}", most: Optional[int] = None) -> tuple[int, str]:
    """``most`` (default: the most of ``counts``, name -> how many) and who has fewer, each
    as ``say`` of its name and count, comma-separated (empty when none):
    ``(10, "roft-spray 6")``."""
    most = max(counts.values()) if most is None else most
    return most, ", ".join(say.format(k, v) for k, v in counts.items() if v < most)
