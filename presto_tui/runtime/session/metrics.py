"""What MCMC diagnostics read of a chain after each transition (paper eqs. 21-22)."""

from __future__ import annotations

import math

from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.session.events import Transition


def first_difference(a: SeqState, b: SeqState) -> int:
    """The first generated position where two states differ (their length if nowhere)."""
    for i, (x, y) in enumerate(zip(a.tokens, b.tokens)):
        if x != y:
            return i
    return min(a.T, b.T)


def transition(block: int, k: int, accepted: bool, state: SeqState, start: SeqState, alpha: float) -> Transition:
    """The state after transition k: log-target alpha log p0(x), eq. 21's log-likelihood per token,
    eq. 22's confidence (the mean over positions of sum_u p0(u) log p0(u) = minus the entropy)."""
    n = max(1, state.T)
    logp = math.fsum(state.logp)
    return Transition(block, k, accepted, alpha * logp, logp / n, -math.fsum(state.entropy) / n,
                      first_difference(state, start))
