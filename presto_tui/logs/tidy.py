"""Tidy tables as files: a CSV cell says what the same export's JSON says.

Every CSV presto-tui writes (a chain's history from the app, every chain's draws from
`run`, `stats` and the chains screen) goes through `csv_text`, so the same value reads
the same in both forms: a truth value `true`/`false` (JSON's words, not Python's), a
missing value an empty cell (JSON's null), a number that is not finite as the trace writes
it (`inf`, `-inf`, `nan`), and text that a spreadsheet would run as a formula behind an
apostrophe.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence


def number(x: float | None) -> float | str | None:
    """A float for JSON: finite as it is, else the trace's spelling ("inf", "-inf", "nan")."""
    return x if x is None or math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")


def spreadsheet_safe(text: str) -> str:
    """A text cell a spreadsheet will not run as a formula (model text may start with =, +, - or @):
    such a cell gets a leading apostrophe; the JSON export keeps the text as it is."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_cell(value: object, text: bool = False) -> object:
    """`value` as its CSV cell; `text`: a free-text column (guarded against formulas)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return number(value)
    if text and isinstance(value, str):
        return spreadsheet_safe(value)
    return value


def csv_text(fields: Sequence[str], rows: Iterable[Mapping[str, object]], text: Sequence[str] = ()) -> str:
    """A header and one line per row; `text`: the free-text columns."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(fields), lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: csv_cell(v, k in text) for k, v in row.items()})
    return buf.getvalue()
