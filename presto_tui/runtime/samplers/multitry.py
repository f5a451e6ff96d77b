"""MultiTryMH: a multiple-try Metropolis transition over whole suffixes (paper sec 5, D.1).

Each transition draws a uniform cut c and M candidate suffixes after x_{0:c},
each at a temperature drawn uniformly from {0.25, 0.5, 1.0} and held for its
whole suffix.  Drawing the temperature per candidate makes the candidates
i.i.d. from the mixture Q(z) = (1/3) sum_tau prod_t q_tau(z_t | ...), so this
is the independence form of multiple-try Metropolis (Liu et al. 2000):

    log w_j = alpha (log p0(y_j) - log p0(u)) + log Q(u) - log Q(y_j)
    select J with probability w_J / W,  W = sum_j w_j
    accept with min{1, W / (1 + W - w_J)}

with u the current suffix.  The log-probabilities at the other temperatures
come from the same forward pass (`Request.score_taus`).

An earlier specification of this sampler wrote Q as (1/M) sum_m over the M
*drawn* temperatures; that density is not the candidates' proposal law, and
the exact oracle in tests/test_law.py shows that the chain it gives does not
leave pi_alpha invariant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from presto_tui.runtime.core.mh import Score, eps_class
from presto_tui.runtime.core.params import MULTITRY_TAUS
from presto_tui.runtime.core.randomness import SEED_LIMIT, DecisionInputs
from presto_tui.runtime.core.types import Proposal, SeqState


@dataclass(frozen=True)
class Candidates:
    seeds: tuple[int, ...]
    taus: tuple[float, ...]
    select_u: float


def candidates(inp: DecisionInputs, tries: int) -> Candidates:
    """The decision's candidate seeds, temperatures and selection uniform, derived from its inputs."""
    rng = np.random.default_rng([inp.seed, 0x4D54])
    seeds = tuple(int(s) for s in rng.integers(0, SEED_LIMIT, tries))
    taus = tuple(MULTITRY_TAUS[int(i)] for i in rng.integers(0, len(MULTITRY_TAUS), tries))
    return Candidates(seeds, taus, float(rng.random()))


def _lse(xs) -> float:
    xs = [x for x in xs if x != -math.inf]
    if not xs:
        return -math.inf
    m = max(xs)
    return m + math.log(math.fsum(math.exp(x - m) for x in xs))


def log_mixture(logq_at_sums: list[float]) -> float:
    """log Q(suffix) = log of (1/3) sum_tau q_tau(suffix), from the per-temperature sums."""
    return _lse(logq_at_sums) - math.log(len(logq_at_sums))


def select(probs: list[float], u: float) -> int:
    acc = 0.0
    for j, p in enumerate(probs):
        acc += p
        if u < acc:
            return j
    return max(j for j, p in enumerate(probs) if p > 0)


def selection(proposals: list[Proposal], cands: Candidates, alpha: float) -> tuple[list[float], int]:
    """(selection probabilities w_j / W, the selected J), from the candidates alone.

    w_j / W does not depend on the current suffix u (its terms cancel), so J is
    drawn once, before any state is known, and every later step uses this J:
    recomputing it with weights shifted by u could, for a selection uniform
    within rounding of a boundary, pick another candidate than the walk moved to.
    """
    log_w = [alpha * math.fsum(p.logp) - log_mixture([math.fsum(a) for a in p.logq_at]) for p in proposals]
    log_W = _lse(log_w)
    probs = [math.exp(lw - log_W) if log_W > -math.inf else 1.0 / len(log_w) for lw in log_w]
    return probs, select(probs, cands.select_u)


def log_ratio_terms(log_w: list[float], J: int) -> tuple[float, float]:
    """(log W, log(1 + W - w_J)): the two terms of the acceptance ratio's log, log W - log(1 + W - w_J)."""
    return _lse(log_w), _lse([0.0, _lse([lw for j, lw in enumerate(log_w) if j != J])])


def mtm_score(state: SeqState, cut: int, proposals: list[Proposal], cands: Candidates, alpha: float,
              epsilon: float, J: int) -> Score:
    """The multiple-try acceptance probability of the selected candidate J against `state`."""
    probs, _ = selection(proposals, cands, alpha)
    lp_y = [math.fsum(p.logp) for p in proposals]
    lq_y = [log_mixture([math.fsum(a) for a in p.logq_at]) for p in proposals]
    lp_u = math.fsum(state.logp[cut:])
    lq_u = log_mixture([math.fsum(a[cut:]) for a in state.logq_at])
    log_w = [alpha * (lp - lp_u) + lq_u - lq for lp, lq in zip(lp_y, lq_y)]
    log_W, log_rest = log_ratio_terms(log_w, J)
    log_ratio = log_W - log_rest
    accept_prob = math.exp(min(0.0, log_ratio)) if log_ratio == log_ratio else 0.0
    return Score(
        log_q_x=lq_u, log_q_y=lq_y[J], log_p_x=lp_u, log_p_y=lp_y[J],
        log_target=alpha * (lp_y[J] - lp_u), log_proposal=lq_u - lq_y[J], log_ratio=log_ratio,
        accept_prob=accept_prob, eps_class=eps_class(accept_prob, epsilon),
        candidates=tuple((t, lw, p) for t, lw, p in zip(cands.taus, log_w, probs)), selected=J)
