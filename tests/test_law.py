"""The chain's law, checked against exact enumeration on a tiny model (DESIGN.md sec 3).

With 3 tokens and a horizon of T = 3 there are 27 states; alpha = 2 and a
flat model keep the K-step law spread over many of them.  The PowerMH kernel
P is computed exactly from the model's conditionals (paper eqs. 5-6, uniform
cut), so the distribution after K transitions from a fixed start is e_x P^K.
Many independent chains of each sampler are compared to it by total-variation
distance, against a bound that holds with probability 1 - 1e-4 for the number
of chains used (expected TV of an empirical distribution plus McDiarmid's
deviation: one chain moves the TV by at most 1/M).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from helpers import small_backend
from presto_tui.runtime.backend import SeqState
from presto_tui.runtime.params import SamplerParams
from presto_tui.runtime.presto import ChainState, make_kernel, run_block

V, T, K, ALPHA = 3, 3, 3, 2.0
PROMPT = (1,)
CHAINS = 4000
DELTA = 1e-4


def backend():
    return small_backend(vocab=V, order=2, seed=3, sharpness=0.5)


def suffix_logprobs(lm, prefix, suffix, tau):
    """(log q_tau, log p0) of `suffix` after `prefix`, summed over tokens."""
    lq = lp = 0.0
    ctx = list(prefix)
    for tok in suffix:
        logp, logq, _ = lm.log_probs(ctx, tau)
        lq += logq[tok]
        lp += logp[tok]
        ctx.append(tok)
    return lq, lp


def exact_kernel(lm, alpha=ALPHA, tau=1 / ALPHA, proposal_correction=True):
    states = list(itertools.product(range(V), repeat=T))
    index = {s: i for i, s in enumerate(states)}
    P = np.zeros((len(states), len(states)))
    for x in states:
        for c in range(T):
            prefix = PROMPT + x[:c]
            lq_x, lp_x = suffix_logprobs(lm, prefix, x[c:], tau)
            for tail in itertools.product(range(V), repeat=T - c):
                y = x[:c] + tail
                lq_y, lp_y = suffix_logprobs(lm, prefix, tail, tau)
                log_r = alpha * (lp_y - lp_x) + ((lq_x - lq_y) if proposal_correction else 0.0)
                a = math.exp(min(0.0, log_r))
                w = math.exp(lq_y) / T
                P[index[x], index[y]] += w * a
                P[index[x], index[x]] += w * (1 - a)
    return states, index, P


def target(lm, states):
    w = np.array([math.exp(ALPHA * suffix_logprobs(lm, PROMPT, s, 1.0)[1]) for s in states])
    return w / w.sum()


def tv_bound(p, m, delta=DELTA):
    return 0.5 * float(np.sqrt(p * (1 - p) / m).sum()) + math.sqrt(math.log(1 / delta) / (2 * m))


START = (0, 2, 1)


@pytest.fixture(scope="module")
def exact():
    lm = backend().lm
    states, index, P = exact_kernel(lm)
    p0 = np.zeros(len(states))
    p0[index[START]] = 1.0
    return states, index, P, p0 @ np.linalg.matrix_power(P, K)


def start_state(lm):
    ctx, q, p, h = list(PROMPT), [], [], []
    for tok in START:
        logp, logq, ent = lm.log_probs(ctx, 1 / ALPHA)
        q.append(float(logq[tok])), p.append(float(logp[tok])), h.append(ent)
        ctx.append(tok)
    return SeqState(PROMPT, START, tuple(q), tuple(p), tuple(h))


def test_kernel_leaves_the_power_target_invariant():
    """Sanity of the enumerator itself: pi_alpha P = pi_alpha, rows sum to 1."""
    lm = backend().lm
    states, _, P = exact_kernel(lm)
    pi = target(lm, states)
    assert np.allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert np.abs(pi @ P - pi).max() < 1e-12


def test_bound_detects_a_wrong_kernel(exact):
    """Power: dropping the proposal correction moves the K-step law beyond the bound."""
    states, index, _, law = exact
    _, _, P_wrong = exact_kernel(backend().lm, proposal_correction=False)
    p0 = np.zeros(len(states))
    p0[index[START]] = 1.0
    wrong = p0 @ np.linalg.matrix_power(P_wrong, K)
    assert 0.5 * np.abs(wrong - law).sum() > 2 * tv_bound(law, CHAINS)


CONFIGS = [
    ("none", "decision"),
    ("bfs", "decision"),
    ("predictive", "decision"),
    ("spine", "decision"),
    ("bfs", "node"),
    ("predictive", "node"),
]


@pytest.mark.parametrize("prefetch,inputs", CONFIGS)
def test_k_step_law_matches_enumeration(exact, prefetch, inputs):
    states, index, _, law = exact
    b = backend()
    start = start_state(b.lm)
    counts = np.zeros(len(states))
    for seed in range(CHAINS):
        params = SamplerParams(prefetch=prefetch, inputs=inputs, alpha=ALPHA, max_new_tokens=T,
                               steps=K, budget=4, seed=seed)
        chain = ChainState(start, block=0)
        for chain, _, _ in run_block(b, params, chain, make_kernel(params)):
            pass
        assert chain.k == K
        counts[index[chain.state.tokens]] += 1
    tv = 0.5 * np.abs(counts / CHAINS - law).sum()
    assert tv < tv_bound(law, CHAINS), f"TV {tv:.4f} exceeds bound {tv_bound(law, CHAINS):.4f}"
