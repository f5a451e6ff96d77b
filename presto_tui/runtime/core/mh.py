"""The suffix-resampling MH acceptance rule (paper eq. 6, appendix B.1) and epsilon classes.

Sums are taken with `math.fsum`, which rounds the exact sum once: the result
depends only on the values summed, never on how a state was assembled, so the
sequential chain and PreSTO compute bit-identical ratios for the same pair of
states and the coupling test can demand token-for-token equality.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from presto_tui.runtime.core.cutlaw import CutLaw
from presto_tui.runtime.core.types import Proposal, SeqState

ACCEPT, REJECT, UNCERTAIN = "accept", "reject", "uncertain"
EPS_CLASSES = (REJECT, ACCEPT, UNCERTAIN)  # the classifier's order (paper C.3)


@dataclass(frozen=True)
class Score:
    """One proposal scored against the state it would replace."""

    log_q_x: float  # log q_tau(x_{c:T} | x_{0:c}), the current suffix
    log_q_y: float  # log q_tau(y_{c:T} | x_{0:c}), the proposed suffix
    log_p_x: float
    log_p_y: float
    log_target: float  # alpha * (log_p_y - log_p_x)
    log_proposal: float  # log_q_x - log_q_y
    log_ratio: float  # log_target + log_proposal + reverse cut term (unclamped)
    accept_prob: float  # A = min(1, exp(log_ratio))
    eps_class: str
    log_cut_x: float = 0.0  # log lambda(cut; x), the cut law's mass under the current state
    log_cut_y: float = 0.0  # log lambda(cut; y), under the proposal (EntropyCut's reverse move)
    # MultiTryMH: (temperature, log w_j, selection probability) per candidate, and the one selected
    candidates: tuple[tuple[float, float, float], ...] = ()
    selected: int = -1


def eps_class(accept_prob: float, epsilon: float) -> str:
    """Paper sec 3.3: certain accept if A >= 1 - eps, certain reject if A <= eps."""
    if accept_prob >= 1.0 - epsilon:
        return ACCEPT
    if accept_prob <= epsilon:
        return REJECT
    return UNCERTAIN


def score(state: SeqState, cut: int, proposal: Proposal, alpha: float, epsilon: float,
          law: CutLaw | None = None) -> Score:
    """Score the proposal made at `cut` against `state`, the state it was proposed from.

    With a state-dependent cut law (EntropyCut) the ratio gains the reverse-move
    term log lambda(cut; y) - log lambda(cut; x): the reverse move from y must
    pick the same cut under y's own law.
    """
    log_q_x = math.fsum(state.logq[cut:])
    log_p_x = math.fsum(state.logp[cut:])
    log_q_y = math.fsum(proposal.logq)
    log_p_y = math.fsum(proposal.logp)
    log_target = alpha * (log_p_y - log_p_x)
    log_proposal = log_q_x - log_q_y
    log_cut_x = log_cut_y = reverse = 0.0
    if law is not None and law.state_dependent:
        log_cut_x = law.log_prob(cut, state)
        log_cut_y = law.log_prob(cut, state.with_suffix(cut, proposal))
        if law.reverse_term and log_cut_x != log_cut_y:
            reverse = log_cut_y - log_cut_x
    log_ratio = log_target + log_proposal + reverse
    accept_prob = math.exp(min(0.0, log_ratio)) if log_ratio == log_ratio else 0.0
    return Score(log_q_x, log_q_y, log_p_x, log_p_y, log_target, log_proposal, log_ratio,
                 accept_prob, eps_class(accept_prob, epsilon), log_cut_x, log_cut_y)


def accepts(accept_u: float, s: Score) -> bool:
    """u ~ Unif[0, 1) accepts with probability exactly A."""
    return accept_u < s.accept_prob
