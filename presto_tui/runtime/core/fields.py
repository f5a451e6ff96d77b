"""Reading a JSON object that came from outside (a trace line, a method's event): each field checked for
its type and range, and a `SchemaError` naming the field when it does not fit.  The trace schema
(`logs/schema.py`) and every method's own event decoders (`Method.events`) read with these, so a
damaged or crafted trace gets the same one-line message whoever reads it.  Nothing read is ever
evaluated.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MAX_COUNT", "MAX_TEXT", "MAX_TOKEN_ID", "SchemaError", "check", "get", "read_bool", "read_choice",
           "read_finite", "read_float", "read_int", "read_list", "read_opt_int", "read_row", "read_str",
           "read_tokens", "write_num"]

MAX_TOKEN_ID = 2**31 - 1
MAX_TEXT = 1 << 20  # a string field longer than this is not something presto-tui wrote
MAX_COUNT = 2**53


class SchemaError(ValueError):
    """An object that does not fit the schema; the message names the field."""


def check(ok: bool, where: str, what: str) -> None:
    """Raise SchemaError("field `where` `what`") unless `ok`."""
    if not ok:
        raise SchemaError(f"field '{where}' {what}")


def get(d: dict, key: str, where: str = "") -> Any:
    """Field `key` of an object; SchemaError naming it where it is missing."""
    if key not in d:
        raise SchemaError(f"missing field '{where}{key}'")
    return d[key]


def read_int(v: Any, where: str, lo: int = 0, hi: int = MAX_COUNT) -> int:
    """A whole number in lo..hi (not a bool)."""
    check(isinstance(v, int) and not isinstance(v, bool), where, "should be an integer")
    check(lo <= v <= hi, where, f"should lie in {lo}..{hi}")
    return v


def read_opt_int(v: Any, where: str, lo: int = 0, hi: int = MAX_COUNT) -> int | None:
    """A whole number in lo..hi, or None."""
    return None if v is None else read_int(v, where, lo, hi)


def read_float(v: Any, where: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A number; JSON has no infinities, so -inf/inf/nan travel as strings (MH ratios can be -inf)."""
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        x = float(v)
    else:
        check(isinstance(v, (int, float)) and not isinstance(v, bool), where, "should be a number")
        x = float(v)
    check(math.isnan(x) or lo <= x <= hi, where, f"should lie in [{lo:g}, {hi:g}]")
    return x


def read_finite(v: Any, where: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A finite number in [lo, hi]."""
    x = read_float(v, where, lo, hi)
    check(math.isfinite(x), where, "should be a finite number")
    return x


def read_str(v: Any, where: str, max_len: int = MAX_TEXT) -> str:
    """Text of at most `max_len` characters."""
    check(isinstance(v, str), where, "should be a string")
    check(len(v) <= max_len, where, f"is longer than {max_len} characters")
    return v


def read_list(v: Any, where: str) -> list:
    """A JSON array."""
    check(isinstance(v, list), where, "should be a list")
    return v


def read_tokens(v: Any, where: str) -> tuple[int, ...]:
    """A list of token ids."""
    check(isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_TOKEN_ID
                                       for x in v), where, "should be a list of token ids")
    return tuple(v)


def read_bool(v: Any, where: str) -> bool:
    """true or false."""
    check(isinstance(v, bool), where, "should be true or false")
    return v


def read_choice(v: Any, where: str, choices: tuple[str, ...]) -> str:
    """One of `choices`."""
    check(isinstance(v, str) and v in choices, where, f"should be one of {', '.join(choices)}")
    return v


def read_row(v: Any, where: str, widths: tuple[int, ...]) -> list:
    """A list of one of the `widths`."""
    check(isinstance(v, list) and len(v) in widths, where,
           f"should be a list of {' or '.join(map(str, widths))} values")
    return v


def write_num(x: float) -> float | str:
    """JSON has no infinities; MH ratios can be -inf when a proposal has p0 = 0."""
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")
