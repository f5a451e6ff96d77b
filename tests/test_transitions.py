"""Transition-level exactness: every realized MH transition draws from the laws it should.

The law test (test_law.py) compares whole K-step distributions; a selection
bias that moves them by less than its bound gets through.  Here every realized
transition of many chains is checked on its own, against laws re-derived
independently from the model (tests/oracle.py): the randomized probability
integral transforms (PIT) of

- the cut, under the cut law of the state the chain held,
- the accept decision, against an independently recomputed A,
- every proposed token, under q_tau given its context (MultiTryMH: each
  candidate under its own temperature), and MultiTryMH's selected candidate J
  under the selection probabilities w_j / W

must be i.i.d. uniform.  A traversal rule that redraws a cut it has looked at
(a deferred decision losing its inputs, an infeasible node turned into a leaf)
skews the cuts it lets through, which the cut PIT sees with thousands of
transitions where the K-step law needs hundreds of thousands of chains.
"""

from __future__ import annotations

import numpy as np
import oracle
import pytest
from helpers import small_backend
from scipy import stats

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.session.events import RoundDone
from presto_tui.runtime.session.runner import run_session

pytestmark = pytest.mark.slow

PROMPT = (1, 2)
T, K, CHAINS = 10, 20, 150
P_MIN = 1e-4  # deterministic seeds: a fixed draw, far from this for the correct samplers
ENTROPYCUT = dict(beta=2.0, cut_mix=0.1)

CASES = [
    ("powermh", "none", "decision", 1),
    ("powermh", "bfs", "node", 6),
    ("powermh", "predictive", "node", 6),
    ("powermh", "bfs", "decision", 6),
    ("powermh", "predictive", "decision", 6),
    ("powermh", "spine", "decision", 6),
    ("powermh", "stream", "decision", 6),  # the default: the extension overlapped with the first proposals
    ("powermh", "stream-waited", "decision", 6),  # the block waits for its extension
    ("powermh", "stream-fill", "decision", 6),
    ("powermh", "stream-cost", "decision", 6),  # the cost policy (the default is the shared one)
    ("entropycut", "none", "decision", 1),
    ("entropycut", "bfs", "node", 6),
    ("entropycut", "predictive", "node", 6),
    ("entropycut", "spine", "decision", 6),
    ("entropycut", "stream", "decision", 6),
    ("multitry", "none", "decision", 4),
    ("multitry", "predictive", "node", 8),
    ("multitry", "spine", "decision", 8),
    ("multitry", "stream", "decision", 8),
    ("multitry", "stream-waited", "decision", 8),
]


def backend():
    return small_backend(vocab=5, order=2, seed=4, sharpness=1.2)


def realized_transitions(params: SamplerParams, chains: int = CHAINS):
    """(state before, decision, request records, accepted) of every realized transition, per chain."""
    b = backend()
    out = []
    for seed in range(chains):
        chain = []
        for ev in run_session(b, params.with_(seed=seed), list(PROMPT)):
            if isinstance(ev, RoundDone):
                tree = ev.tree
                before = [tree.root] + tree.states_after_steps()[:-1]
                for state, step in zip(before, tree.steps):
                    dec = tree.decisions[step.decision]
                    chain.append((state, dec, tree.requests, step.accepted))
        out.append(chain)
    return b, out


def chains_for(params: SamplerParams) -> int:
    return CHAINS // 2 if params.sampler == "multitry" else CHAINS  # 4 candidates a transition


def pit_streams(params: SamplerParams, law_of: SamplerParams | None = None) -> dict[str, list[float]]:
    """PIT values of every realized transition of `params`' chains, under the laws `law_of`
    (default: the same parameters) says they were drawn from."""
    b, per_chain = realized_transitions(params, chains_for(params))
    params = law_of or params
    lm = b.lm
    rng = np.random.default_rng(12345)
    kind = "entropy" if params.sampler == "entropycut" else "uniform"
    streams: dict[str, list[float]] = {"cut": [], "accept": [], "tokens": []}
    if params.sampler == "multitry":
        streams["select"] = []
    for chain in per_chain:
        for state, dec, requests, accepted in chain:
            x = state.tokens
            law = oracle.cut_law(lm, PROMPT, x, kind, params.beta, params.cut_mix)
            streams["cut"].append(oracle.discrete_pit([law[c] for c in range(len(x))], dec.cut, rng.random()))
            reqs = [requests[r] for r in dec.candidates] if dec.candidates else [requests[dec.request]]
            for req in reqs:
                ctx = list(PROMPT) + list(x[: dec.cut])
                for tok in req.proposal.tokens:
                    q = np.exp(oracle.log_probs(lm, ctx, req.tau)[1])
                    streams["tokens"].append(oracle.discrete_pit(q, tok, rng.random()))
                    ctx.append(tok)
            if dec.candidates:
                tails = [r.proposal.tokens for r in reqs]
                log_w, probs = oracle.multitry_weights(lm, PROMPT, x, dec.cut, tails, params.alpha)
                J = dec.candidates.index(dec.request)
                streams["select"].append(oracle.discrete_pit(probs, J, rng.random()))
                A = oracle.multitry_accept_prob(log_w, J)
            else:
                A = oracle.accept_prob(lm, PROMPT, x, dec.cut, requests[dec.request].proposal.tokens,
                                       params.alpha, kind, params.beta, params.cut_mix)
            v = rng.random()
            streams["accept"].append(v * A if accepted else A + v * (1 - A))
    return streams


def uniformity_p(u) -> float:
    return float(stats.kstest(u, "uniform").pvalue)


def independence_p(u, bins: int = 4) -> float:
    """Chi-square of consecutive pairs (u_t, u_t+1) against the uniform grid."""
    u = np.asarray(u)
    a = np.minimum((u[:-1] * bins).astype(int), bins - 1)
    b = np.minimum((u[1:] * bins).astype(int), bins - 1)
    counts = np.bincount(a * bins + b, minlength=bins * bins)
    return float(stats.chisquare(counts).pvalue)


def case_params(sampler, prefetch, inputs, budget) -> SamplerParams:
    extra = dict(ENTROPYCUT) if sampler == "entropycut" else {}
    if prefetch == "stream-fill":  # the streaming rule with N live and no speculation past a known state
        prefetch, extra = "stream", {**extra, "budget_policy": "fill", "speculate": "none"}
    if prefetch == "stream-cost":  # one chain's own width instead of the engine's shared budget
        prefetch, extra = "stream", {**extra, "budget_policy": "cost"}
    if prefetch == "stream-waited":  # the streaming rule, its first proposals only once the extension arrived
        prefetch, extra = "stream", {**extra, "speculate": "proposal,block"}
    return SamplerParams(sampler=sampler, prefetch=prefetch, inputs=inputs, budget=budget,
                         max_new_tokens=T, steps=K, alpha=4.0, **extra)


@pytest.mark.parametrize("sampler,prefetch,inputs,budget", CASES)
def test_every_transition_draws_from_its_laws(sampler, prefetch, inputs, budget):
    params = case_params(sampler, prefetch, inputs, budget)
    streams = pit_streams(params)
    assert len(streams["cut"]) == chains_for(params) * K
    for name, u in streams.items():
        assert uniformity_p(u) > P_MIN, f"{name}: PIT not uniform (KS p={uniformity_p(u):.2e})"
        assert independence_p(u) > P_MIN, f"{name}: consecutive PITs dependent (p={independence_p(u):.2e})"


def test_the_cut_pit_sees_a_slightly_wrong_cut_law():
    """Power: cuts drawn with EntropyCut's uniform share at 0.3 instead of 0.1 move each
    cut's probability by at most 0.2 / T, a bias of the size a traversal rule's selection
    effect produces; the cut PIT under the expected law sees it, under the true law not."""
    expected = case_params("entropycut", "none", "decision", 1)
    drawn = expected.with_(cut_mix=0.3)
    assert uniformity_p(pit_streams(drawn)["cut"]) > P_MIN
    assert uniformity_p(pit_streams(drawn, law_of=expected)["cut"]) < 1e-6


def test_deferred_predictive_decision_carries_its_inputs_into_the_next_round():
    """White-box, node inputs, predictive rule: a deferred decision that stops the walk keeps
    cut, seed and acceptance uniform as the next round's root decision (the bfs twin is in
    test_rounds.py)."""
    from presto_tui.runtime.core.randomness import node_inputs
    from presto_tui.runtime.prefetch.kernel import ChainState, build_kernel
    from presto_tui.runtime.prefetch.tree import NodeStatus

    params = SamplerParams(prefetch="predictive", inputs="node", budget=6, max_new_tokens=24, steps=80)
    b = small_backend()
    (prop,) = b.generate([__import__("presto_tui.runtime.core.types", fromlist=["Request"]).Request(
        PROMPT, params.block, 7, params.proposal_tau)])
    chain = ChainState(SeqState(PROMPT).extended(prop), 0)
    kernel = build_kernel(params)
    checked = 0
    while chain.k < params.steps:
        after, tree = kernel.step(b, chain)
        if tree.stop_reason == NodeStatus.DEFERRED and after.k < params.steps:
            dec = tree.decisions[tree.table[tree.stop_node].decision]
            assert after.carried is not None
            _, nxt = kernel.step(b, after)
            root = nxt.decisions[nxt.table[0].decision]
            assert (root.cut, root.seed, root.accept_u) == (dec.cut, dec.seed, dec.accept_u)
            fresh = node_inputs(params.seed, 0, after.round, 0)
            assert (root.seed, root.accept_u) != (fresh.seed, fresh.accept_u)
            checked += 1
        chain = after
    assert checked > 0
