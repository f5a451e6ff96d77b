"""Cut laws: where a transition resamples from (paper sec 3.1; EntropyCut, sec 5 and D.1).

A cut law maps a decision's cut uniform and the current state to a cut, and
gives the log-probability of a cut under a state, which enters the MH ratio
as the reverse-move term log lambda(m; y) - log lambda(m; x).  For PowerMH's
uniform law the term is zero.  EntropyCut's law depends on the state, so a
prefetched node's cut can only be known once its state is (see presto.py:
PreSTO draws it from the root's law and uses the request only if the node's
own law gives the same cut).
"""

from __future__ import annotations

import math
from typing import Protocol

from presto_tui.runtime.backend import SeqState


class CutLaw(Protocol):
    state_dependent: bool

    def cut(self, u: float, state: SeqState) -> int: ...

    def log_prob(self, cut: int, state: SeqState) -> float: ...


def uniform_cut(u: float, T: int) -> int:
    """Unif{0..T-1} from a uniform in [0, 1)."""
    return min(int(u * T), T - 1)


class UniformCut:
    """PowerMH: c ~ Unif{0..T-1} (paper sec 3.1)."""

    state_dependent = False

    def cut(self, u: float, state: SeqState) -> int:
        return uniform_cut(u, state.T)

    def log_prob(self, cut: int, state: SeqState) -> float:
        return -math.log(state.T)


class EntropyJumpCut:
    """EntropyCut (Zhou et al. 2026): lambda_beta(j) proportional to D_j^beta, cut m = j + 1.

    D_j = max(0, h_{j+1} - h_j) with h_t the full-vocabulary entropy of p0 at
    generated position t; uniform over j in {0..T-2} when every jump is zero.
    The cut m keeps tokens[:m] and resamples from m, so position 0 is never cut.
    """

    state_dependent = True

    def __init__(self, beta: float = 4.0):
        self.beta = beta

    def weights(self, state: SeqState) -> list[float]:
        h = state.entropy
        return [max(0.0, h[j + 1] - h[j]) ** self.beta for j in range(len(h) - 1)]

    def cut(self, u: float, state: SeqState) -> int:
        w = self.weights(state)
        total = math.fsum(w)
        if total <= 0.0:
            return uniform_cut(u, len(w)) + 1
        target = u * total
        acc = 0.0
        last = 0
        for j, wj in enumerate(w):
            if wj > 0.0:
                last = j
                acc += wj
                if acc > target:
                    return j + 1
        return last + 1  # float rounding at the very top of the range

    def log_prob(self, cut: int, state: SeqState) -> float:
        w = self.weights(state)
        total = math.fsum(w)
        if total <= 0.0:
            return -math.log(len(w))
        wj = w[cut - 1] if 1 <= cut <= len(w) else 0.0
        return math.log(wj) - math.log(total) if wj > 0.0 else -math.inf


def make_cut_law(sampler: str, beta: float = 4.0) -> CutLaw:
    return EntropyJumpCut(beta) if sampler == "entropycut" else UniformCut()
