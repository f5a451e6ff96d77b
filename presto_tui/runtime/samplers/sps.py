"""Scalable Power Sampling (Ji, Tutunov, Zimmer, Bou Ammar 2026, arXiv 2601.21590): its estimator.

Pure functions, no engine: the session driver (`runtime/methods/sps.py`) feeds them the rollouts
it got back and draws the next chunk from what they return.  Equation numbers are the paper's.

Theorem 3.1 (eq. 2): under pi_alpha ∝ p0^alpha the next token's conditional is the low-temperature
conditional (eq. 1) scaled by a per-token factor,

    p_pow(x_t | prefix) = p0^alpha(x_t | prefix) zeta_t(x_t) / sum_x' p0^alpha(x' | prefix) zeta_t(x'),
    zeta_t(x') = sum over futures y of p0^alpha(y | prefix, x') = E_{y ~ p0(. | prefix, x')}[p0^(alpha-1)(y)]

(sec. 3.1).  Appendix B (algorithm 2) does the same for a chunk of B tokens in x_t's place
(eqs. 11-16): p0^alpha of the whole chunk, zeta of the chunk's futures.

- Eq. 3 (eq. 11 per chunk): zeta_hat(x') = 1/M sum_r p0^(alpha-1)(y_r), M rollouts y_r from p0.
  Here rollouts may come from any proposal q (the engine's q_tau), with the importance weight
  w_r = p0^alpha(y_r) / q(y_r); with q = p0 (tau = 1) that is eq. 3 itself.  A rollout of H
  tokens (truncated horizon) estimates the sum over H-token futures only (eq. 11's H_t).
- Eq. 4 (eq. 13): p_hat = the plug-in of zeta_hat into eq. 2 over the candidate set
  (algorithm 1 line 8: V = G_t).  Its bias is O(1/M) (lemma 3.2): a ratio of unbiased means.
- Eq. 6 (eq. 12): zeta_hat without rollout s; eq. 14: p_hat with every candidate's zeta left
  one out at the same s.
- Eq. 5 (eq. 15): the jackknife, M p_hat - (M - 1)/M sum_s p_hat_{-s}, bias O(1/M^2) (lemma 3.3).

The jackknife's values sum to 1 but may fall below 0 (or above 1) with few rollouts; the paper
samples "w.p." them and says nothing of that case.  `final` clips negatives to 0 and
renormalises (ours), and the events record both the raw jackknife and what was sampled from.

A candidate whose future is empty (its chunk ends at EOS, or at the response's last token) has
zeta = 1 exactly and no rollouts (theorem 3.1's last-token case; eq. 16 for the last chunk).
Sums use `math.fsum`, so a result depends only on the values summed.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass


def log_weight(alpha: float, logp: Sequence[float], logq: Sequence[float]) -> float:
    """A rollout's log importance weight, log p0^alpha(y) - log q(y) (eq. 3's summand when q = p0)."""
    return alpha * math.fsum(logp) - math.fsum(logq)


def log_mean_exp(xs: Sequence[float]) -> float:
    """log of the mean of exp(xs), without overflow; 0.0 (a mean of 1) for no values."""
    if not xs:
        return 0.0
    m = max(xs)
    if m == -math.inf:
        return -math.inf
    return m + math.log(math.fsum(math.exp(x - m) for x in xs) / len(xs))


def log_zeta(log_w: Sequence[float]) -> float:
    """log zeta_hat (eq. 3, eq. 11): the mean of the rollouts' weights; 0.0 without rollouts (no future)."""
    return log_mean_exp(log_w)


def leave_one_out(log_w: Sequence[float], s: int) -> float:
    """log zeta_hat_(LOO-s) (eq. 6, eq. 12): the mean without rollout s; 0.0 without rollouts."""
    if not log_w:
        return 0.0
    return log_mean_exp([w for r, w in enumerate(log_w) if r != s])


def softmax(logits: Sequence[float]) -> list[float]:
    m = max(logits)
    if m == -math.inf:
        return [1.0 / len(logits)] * len(logits)  # nothing has mass: no preference (not reached from an engine)
    e = [math.exp(x - m) for x in logits]
    total = math.fsum(e)
    return [x / total for x in e]


def plug_in(alpha: float, log_p0: Sequence[float], log_zetas: Sequence[float]) -> list[float]:
    """Eq. 4 (eq. 13): p0^alpha(x') zeta_hat(x'), normalised over the candidates."""
    return softmax([alpha * lp + lz for lp, lz in zip(log_p0, log_zetas)])


def rollouts_per_candidate(log_w: Sequence[Sequence[float]]) -> int:
    """M, the rollouts of every candidate that has any (0: none has); ValueError if they differ."""
    sizes = {len(row) for row in log_w if row}
    if len(sizes) > 1:
        raise ValueError(f"candidates have different numbers of rollouts: {sorted(sizes)}")
    return sizes.pop() if sizes else 0


def jackknife(alpha: float, log_p0: Sequence[float], log_w: Sequence[Sequence[float]]) -> list[float]:
    """Eq. 5 (eq. 15): M p_hat - (M - 1)/M sum_s p_hat_{-s}, where p_hat_{-s} (eq. 14) leaves rollout s
    out of every candidate's zeta at once.  Needs M >= 2 (a leave-one-out mean of nothing is not
    one); candidates without rollouts keep zeta = 1 throughout."""
    M = rollouts_per_candidate(log_w)
    full = plug_in(alpha, log_p0, [log_zeta(row) for row in log_w])
    if M == 0:
        return full  # no candidate has a future: eq. 2 is exact, nothing to correct
    if M < 2:
        raise ValueError("the jackknife needs at least 2 rollouts per candidate")
    loo = [plug_in(alpha, log_p0, [leave_one_out(row, s) for row in log_w]) for s in range(M)]
    return [M * p - (M - 1) / M * math.fsum(column) for p, column in zip(full, zip(*loo))]


def final(probs: Sequence[float]) -> list[float]:
    """What is sampled from: negatives (a jackknife with few rollouts) clipped to 0, renormalised."""
    kept = [max(0.0, p) for p in probs]
    total = math.fsum(kept)
    if not total > 0:  # (the jackknife sums to 1, so some value is positive; kept for safety)
        return [1.0 / len(kept)] * len(kept)
    return [p / total for p in kept]


@dataclass(frozen=True)
class Estimate:
    """One step's numbers, per candidate in the candidates' order."""

    log_zeta: tuple[float, ...]  # eq. 3 / 11 (0.0: no future, zeta = 1 exactly)
    plain: tuple[float, ...]  # eq. 4 / 13
    jackknife: tuple[float, ...]  # eq. 5 / 15, raw (may leave [0, 1]); () when it is not used
    probs: tuple[float, ...]  # what the chunk is drawn from


def estimate(alpha: float, log_p0: Sequence[float], log_w: Sequence[Sequence[float]], use_jackknife: bool) -> Estimate:
    """The step's estimate from each candidate's log p0 (of its chunk) and its rollouts' log weights."""
    zetas = tuple(log_zeta(row) for row in log_w)
    plain = tuple(plug_in(alpha, log_p0, zetas))
    M = rollouts_per_candidate(log_w)
    if not use_jackknife or M == 0:
        return Estimate(zetas, plain, (), plain)
    jk = tuple(jackknife(alpha, log_p0, log_w))
    return Estimate(zetas, plain, jk, tuple(final(jk)))


def pick(probs: Sequence[float], u: float) -> int:
    """The candidate at u in [0, 1) of the probabilities' CDF (inverse-CDF sampling, one uniform)."""
    cdf, acc = [], 0.0
    total = math.fsum(probs)
    for p in probs:
        acc += p / total
        cdf.append(acc)
    cdf[-1] = 1.0  # rounding must not leave a u in [0, 1) past the last candidate
    i = bisect_right(cdf, u)
    while probs[min(i, len(probs) - 1)] <= 0 and i > 0:  # (u on a boundary before a zero: the one below)
        i -= 1
    return min(i, len(probs) - 1)


def top_candidates(chunks: Sequence[tuple[tuple[int, ...], float]], k: int) -> list[int]:
    """Indices of the k most likely distinct chunks among the draws (algorithm 2, line 5: Top@K_t by
    p0), each distinct chunk once (at its first draw), best first; ties go to the earlier draw."""
    first: dict[tuple[int, ...], int] = {}
    for i, (tokens, _) in enumerate(chunks):
        first.setdefault(tokens, i)
    ranked = sorted(first.values(), key=lambda i: (-chunks[i][1], i))
    return ranked[:k]
