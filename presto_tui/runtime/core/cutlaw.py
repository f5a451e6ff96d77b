"""Cut laws: where a transition resamples from (paper sec 3.1; EntropyCut, sec 5 and D.1).

A cut law maps a decision's cut uniform and the current state to a cut, and
gives the log-probability of a cut under a state, which enters the MH ratio
as the reverse-move term log lambda(m; y) - log lambda(m; x).  For PowerMH's
uniform law the term is zero.  EntropyCut's law depends on the state, so a
prefetched node's cut can only be known once its state is (see
runtime/prefetch/kernel.py and stream/: PreSTO draws it from the root's law
and uses the request only if the node's own law gives the same cut).
"""

from __future__ import annotations

import math
from typing import Protocol

from presto_tui.runtime.core.types import SeqState


class CutLaw(Protocol):
    """Where a transition cuts: `cut(u, state)` maps the decision's cut uniform u in [0, 1) and the
    state (T generated tokens) to a cut c in 0..T-1 (tokens[:c] are kept, tokens[c:] proposed anew),
    and `log_prob(cut, state)` is log lambda(c; state), the law `cut` draws from (the PIT check
    holds `cut` to it).

    `state_dependent`: False when the law reads only `state.T` and the prompt (the streaming rule
    then draws cuts on a stand-in state of zeros, and the MH ratio has no reverse-move term, so
    `log_prob` is never scored); True when it reads the tokens, log-probabilities or entropies
    (PreSTO checks each prefetched cut against the node's own law, and the ratio gains
    log lambda(c; y) - log lambda(c; x)).  `reverse_term`: always True for a correct chain (the
    law tests set it False to show that they catch the term's absence).
    """

    state_dependent: bool
    reverse_term: bool

    def cut(self, u: float, state: SeqState) -> int: ...

    def log_prob(self, cut: int, state: SeqState) -> float: ...


def uniform_cut(u: float, T: int) -> int:
    """Unif{0..T-1} from a uniform in [0, 1)."""
    return min(int(u * T), T - 1)


class UniformCut:
    """PowerMH: c ~ Unif{0..T-1} (paper sec 3.1)."""

    state_dependent = False
    reverse_term = True

    def cut(self, u: float, state: SeqState) -> int:
        return uniform_cut(u, state.T)

    def log_prob(self, cut: int, state: SeqState) -> float:
        return -math.log(state.T)


class EntropyJumpCut:
    """EntropyCut (Zhou et al. 2026) made irreducible by a uniform share.

    The published law is lambda_beta(j) proportional to D_j^beta with
    D_j = max(0, h_{j+1} - h_j), h_t the full-vocabulary entropy of p0 at
    generated position t, and cut m = j + 1 (uniform over j in {0..T-2} when
    every jump is zero).  It never cuts at m = 0, so the first generated token
    keeps the value the block extension drew for the whole run: the chain
    leaves pi_alpha invariant but is reducible.  We therefore draw the cut from

        lambda(m; x) = (1 - mix) * lambda_beta(m; x) + mix / T,   m in 0..T-1,

    which reaches every position (and every state in one step).  The MH ratio's
    reverse-move term log lambda(m; y) - log lambda(m; x) keeps the chain exact
    for any mix; mix = 0 is the published law.
    """

    state_dependent = True
    reverse_term = True

    def __init__(self, beta: float = 4.0, mix: float = 0.1):
        self.beta = beta
        self.mix = mix

    def weights(self, state: SeqState) -> list[float]:
        """The published law's unnormalised jump weights D_j^beta, j = 0..T-2 (cut j + 1)."""
        h = state.entropy
        return [max(0.0, h[j + 1] - h[j]) ** self.beta for j in range(len(h) - 1)]

    def probs(self, state: SeqState) -> list[float]:
        """lambda(m; x) for m = 0..T-1."""
        T = state.T
        w = self.weights(state)
        total = math.fsum(w)
        if total > 0.0:
            jump = [0.0] + [wj / total for wj in w]
        else:
            jump = [0.0] + [1.0 / (T - 1)] * (T - 1) if T > 1 else [1.0]
        return [(1.0 - self.mix) * pj + self.mix / T for pj in jump]

    def cut(self, u: float, state: SeqState) -> int:
        acc = 0.0
        last = 0
        for m, pm in enumerate(self.probs(state)):
            if pm > 0.0:
                last = m
                acc += pm
                if acc > u:
                    return m
        return last  # float rounding at the very top of the range

    def log_prob(self, cut: int, state: SeqState) -> float:
        p = self.probs(state)
        pm = p[cut] if 0 <= cut < len(p) else 0.0
        return math.log(pm) if pm > 0.0 else -math.inf

