"""How long each want waited, seen by the policy and refused, before it was issued (by why).

A policy's pass that expands the speculation tree ranks what it saw; a want it
refused (`policy.BUDGET`: no slot under the cap; `policy.RANKED`: the cost rule)
stays refused for that reason until the next pass that expands the tree, which
refuses it again or not.  When the want is issued its totals go out with the
`issued` event; the critical path (runtime/session/critpath.py) splits the
time a used proposal was issued late by them: what no pass saw, or saw and
did not refuse, waited "not speculated".  Clocks are whatever the caller's are.
"""

from __future__ import annotations

from collections.abc import Iterable

from presto_tui.runtime.prefetch.stream.decisions import Want

KEEP = 4096  # wants tracked at most; beyond, those of decisions the walker has passed are dropped


class Refusals:
    def __init__(self) -> None:
        self._open: dict[Want, tuple[str, float]] = {}  # refused by the last expanding pass: (why, since)
        self._total: dict[Want, dict[str, float]] = {}

    def passed(self, now: float, refused: Iterable[tuple[Want, str]], k: int) -> None:
        """A pass that expanded the tree at `now` refused `refused`; the walker is at decision k."""
        for want, (why, since) in self._open.items():
            self._add(want, why, now - since)
        self._open = {want: (why, now) for want, why in refused}
        if len(self._total) > KEEP:
            self._total = {w: t for w, t in self._total.items() if w.d >= k}

    def issued(self, want: Want, now: float) -> dict[str, float]:
        """Seconds `want` waited refused, by why, until it was issued at `now` (then forgotten)."""
        if want in self._open:
            why, since = self._open.pop(want)
            self._add(want, why, now - since)
        return {why: s for why, s in self._total.pop(want, {}).items() if s > 0}

    def _add(self, want: Want, why: str, seconds: float) -> None:
        if seconds > 0:
            t = self._total.setdefault(want, {})
            t[why] = t.get(why, 0.0) + seconds
