"""Independent re-derivations of the samplers' laws from a synthetic model's conditionals.

Nothing here imports the samplers' own maths (mh, cutlaw, multitry): the law,
transition and convergence tests hold presto-tui's code against these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

MULTITRY_TAUS = (0.25, 0.5, 1.0)


def log_probs(lm, ctx: Sequence[int], tau: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The synthetic model's next-token (log p0, log q_tau, entropy), memoised on what it reads:
    its logits depend on the last `order` tokens of the context only."""
    return _log_probs(lm, tuple(ctx[-lm.order:]) if lm.order else (), tau)


@lru_cache(maxsize=1 << 18)
def _log_probs(lm, key: tuple[int, ...], tau: float):
    z = lm.logits(key)
    logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
    zt = z / tau
    logq = zt - (zt.max() + np.log(np.exp(zt - zt.max()).sum()))
    return logp, logq, float(-(np.exp(logp) * logp).sum())


def suffix_logprobs(lm, prefix: Sequence[int], suffix: Sequence[int], tau: float) -> tuple[float, float]:
    """(log q_tau, log p0) of `suffix` after `prefix`, summed over tokens."""
    lq = lp = 0.0
    ctx = list(prefix)
    for tok in suffix:
        logp, logq, _ = log_probs(lm, ctx, tau)
        lq += logq[tok]
        lp += logp[tok]
        ctx.append(tok)
    return lq, lp


def entropies(lm, prompt: Sequence[int], seq: Sequence[int]) -> list[float]:
    out, ctx = [], list(prompt)
    for tok in seq:
        out.append(log_probs(lm, ctx, 1.0)[2])
        ctx.append(tok)
    return out


def cut_law(lm, prompt, x, kind: str, beta: float = 0.0, mix: float = 0.1) -> dict[int, float]:
    """{cut: probability} under state x: uniform, or EntropyCut's jump law with a uniform share."""
    T = len(x)
    if kind == "uniform":
        return {c: 1.0 / T for c in range(T)}
    h = entropies(lm, prompt, x)
    w = [max(0.0, h[j + 1] - h[j]) ** beta for j in range(T - 1)]
    z = sum(w)
    jump = {0: 0.0, **{j + 1: (1.0 / (T - 1) if z <= 0 else w[j] / z) for j in range(T - 1)}}
    return {c: (1 - mix) * p + mix / T for c, p in jump.items()}


def accept_prob(lm, prompt, x, cut, y_tail, alpha, kind="uniform", beta=0.0, mix=0.1) -> float:
    """A of the suffix-resampling MH move x -> x[:cut] + y_tail (paper eq. 6, reverse cut term)."""
    tau = 1 / alpha
    prefix = tuple(prompt) + tuple(x[:cut])
    lq_x, lp_x = suffix_logprobs(lm, prefix, x[cut:], tau)
    lq_y, lp_y = suffix_logprobs(lm, prefix, y_tail, tau)
    log_r = alpha * (lp_y - lp_x) + lq_x - lq_y
    if kind != "uniform":
        y = tuple(x[:cut]) + tuple(y_tail)
        px, py = cut_law(lm, prompt, x, kind, beta, mix)[cut], cut_law(lm, prompt, y, kind, beta, mix)[cut]
        log_r += math.log(py) - math.log(px) if py > 0 else -math.inf
    return math.exp(min(0.0, log_r))


def log_mixture_density(lm, prefix, tail) -> float:
    """log Q(tail) with Q = (1/3) sum_tau q_tau: MultiTryMH's candidate law."""
    lqs = [suffix_logprobs(lm, prefix, tail, t)[0] for t in MULTITRY_TAUS]
    m = max(lqs)
    return m + math.log(sum(math.exp(v - m) for v in lqs) / len(lqs))


def multitry_weights(lm, prompt, x, cut, tails, alpha) -> tuple[list[float], list[float]]:
    """(log w_j relative to the current suffix u, selection probabilities w_j / W)."""
    prefix = tuple(prompt) + tuple(x[:cut])
    def log_pi_over_q(tail):
        return alpha * suffix_logprobs(lm, prefix, tail, 1.0)[1] - log_mixture_density(lm, prefix, tail)
    u = log_pi_over_q(x[cut:])
    log_w = [log_pi_over_q(t) - u for t in tails]
    m = max(log_w)
    W = sum(math.exp(v - m) for v in log_w)
    return log_w, [math.exp(v - m) / W for v in log_w]


def multitry_accept_prob(log_w: list[float], J: int) -> float:
    W = sum(math.exp(v) for v in log_w)
    return min(1.0, W / (1.0 + W - math.exp(log_w[J])))


def discrete_pit(probs: Sequence[float], k: int, v: float) -> float:
    """Randomized probability-integral transform of outcome k under `probs`: uniform iff k ~ probs."""
    return math.fsum(probs[:k]) + v * probs[k]
