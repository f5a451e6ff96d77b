"""What the chains screen shows of a prompt's chains (pure): every chain's log-target after each
transition, where the burn-in ends, and how one block mixes (each chain's autocorrelation by
lag, R-hat over the first n kept draws as n grows).

The mixing numbers are the diagnostics module's (`autocorrelation`, `running_rhat`: ArviZ's),
read from the draws the selection keeps (`--burn-in`/`--thin` as `run` and `stats` read them);
nothing is recomputed here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from presto_tui.api.diagnostics import ALL, Selection, autocorrelation, available, draws_of, running_rhat
from presto_tui.api.events import SessionSummary
from presto_tui.views.state.reducer import SessionView

MAX_LAG = 40  # the autocorrelation plot's lags at most (a chain of K draws has K - 1)


def trace_points(view: SessionView) -> tuple[list[int], list[float]]:
    """(transition number from 1, log-target after it) over every block of the chain."""
    draws = view.summary.draws
    return list(range(1, len(draws) + 1)), [d.log_target for d in draws]


def burn_in_ends(view: SessionView, selection: Selection) -> list[float]:
    """Where each block's burn-in ends on the trace plot's x axis (between the last transition it
    drops and the first it keeps); none without a burn-in."""
    if selection.burn_in == 0:
        return []
    out, seen = [], set()
    for i, d in enumerate(view.summary.draws):
        if d.block not in seen:
            seen.add(d.block)
            out.append(i + selection.burn_in + 0.5)
    return out


@dataclass(frozen=True)
class Mixing:
    """One block's mixing over the chains: `acf[m]` chain m's autocorrelation at lags 0..; `rhat`
    (n kept draws per chain, R-hat over them; None where undefined, inf where the chains never move
    but differ); `draws` kept per chain."""

    block: int
    draws: int
    acf: tuple[tuple[float, ...], ...]
    rhat: tuple[tuple[int, float | None], ...]

    def acf_points(self, chain: int) -> tuple[list[int], list[float]]:
        """(lag, autocorrelation) of chain `chain` where it is defined."""
        pts = [(lag, r) for lag, r in enumerate(self.acf[chain]) if math.isfinite(r)]
        return [p[0] for p in pts], [p[1] for p in pts]

    def rhat_points(self) -> tuple[list[int], list[float]]:
        """(n, R-hat) where it is a number (an infinite one is not drawn: the diagnostics say it)."""
        pts = [(n, r) for n, r in self.rhat if r is not None and math.isfinite(r)]
        return [p[0] for p in pts], [p[1] for p in pts]


def shown_block(summaries: Sequence[SessionSummary]) -> int | None:
    """The block the mixing plots show: the latest one every chain has draws in (a live run's
    current block once every chain reached it)."""
    lasts = [s.draws[-1].block for s in summaries if s.draws]
    return min(lasts) if lasts and len(lasts) == len(summaries) else None


def mixing(summaries: Sequence[SessionSummary], selection: Selection = ALL) -> Mixing | None:
    """How the shown block mixes, over the draws `selection` keeps (None: no block every chain has
    reached, or no ArviZ to compute it)."""
    block = shown_block(summaries)
    if block is None or not available():
        return None
    draws = draws_of(summaries, block, "log_target", selection)
    k = draws.shape[1]
    acf = autocorrelation(draws, max_lag=min(MAX_LAG, max(0, k - 1))) if k else np.zeros((len(summaries), 0))
    return Mixing(block, k, tuple(tuple(float(x) for x in row) for row in acf), tuple(running_rhat(draws)))
