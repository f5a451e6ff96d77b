"""What MCMC diagnostics read of a chain after each transition, and what a session's answer is
worth under p0 (paper eqs. 21-22)."""

from __future__ import annotations

import math
from collections.abc import Sequence

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


def answer_quality(tokens: Sequence[int], logp: Sequence[float], entropy: Sequence[float],
                   eos_id: int | None) -> tuple[float, float]:
    """Eqs. 21-22 of a session's answer: the log-likelihood per token under p0 and the confidence
    (minus the mean entropy of p0) over its terminal response, the tokens up to and excluding the
    first EOS: what a person reads and a grader grades, one definition for every sampler (an MH
    chain's state runs on past EOS to T; a baseline's sample stops after its EOS).  NaN for an
    empty response (EOS first), whose mean over no tokens is undefined."""
    m = tokens.index(eos_id) if eos_id is not None and eos_id in tokens else len(tokens)
    if m == 0:
        return math.nan, math.nan
    return math.fsum(logp[:m]) / m, -math.fsum(entropy[:m]) / m
