"""The numbers eqs. 21-22 read, and what MCMC diagnostics read of a chain after each transition.

The terminal response is one thing for every method: the text a person gets, the
generated tokens up to and excluding the first EOS (`core.types.cut_at_eos`, which
`display_text` decodes for the grader, the answer and the vote).  An MH chain's
state runs past EOS to the horizon T (appendix B.1), a baseline's sample stops
after EOS; both are scored over the response alone, so an empty answer is an
empty answer whichever method gave it.  Paper eqs. 21-22 over the response's n
tokens: the log-likelihood (1/n) log p0(x_1:n | x_0) and the confidence, the
mean over its positions of sum_u p0(u) log p0(u) (minus the entropy of p0).  A
response of no tokens (EOS first) has neither: NaN in the events, null in JSON,
left out of means and of the paired tests (their `undefined` says how many pairs that left out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from presto_tui.runtime.core.types import SeqState, cut_at_eos
from presto_tui.runtime.session.events import Transition


def response_scores(tokens: Sequence[int], logp: Sequence[float], entropy: Sequence[float],
                    eos_id: int | None) -> tuple[float, float]:
    """(eq. 21, eq. 22) of the terminal response of `tokens` (per-token log p0 and entropy of p0
    aligned with them); NaN for both where the response is empty."""
    n = len(cut_at_eos(tokens, eos_id))
    if n == 0:
        return math.nan, math.nan
    return math.fsum(logp[:n]) / n, -math.fsum(entropy[:n]) / n


def first_difference(a: SeqState, b: SeqState) -> int:
    """The first generated position where two states differ (their length if nowhere)."""
    for i, (x, y) in enumerate(zip(a.tokens, b.tokens)):
        if x != y:
            return i
    return min(a.T, b.T)


def transition(block: int, k: int, accepted: bool, state: SeqState, start: SeqState, alpha: float,
               eos_id: int | None) -> Transition:
    """The state after transition k: the log-target alpha log p0(x) over the whole state (the MH
    target), and eqs. 21-22 of the response it gives (`response_scores`)."""
    loglik, confidence = response_scores(state.tokens, state.logp, state.entropy, eos_id)
    return Transition(block, k, accepted, alpha * math.fsum(state.logp), loglik, confidence,
                      first_difference(state, start))
