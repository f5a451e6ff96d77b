"""Counts in words: "1 chain", "3 chains", one rule for every message and screen."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and its noun, singular for exactly one ("1 step", "2 steps"; `plural` where it is not noun + "s")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
