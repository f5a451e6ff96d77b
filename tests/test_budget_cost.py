"""What a session may cost before it runs (`Method.cost`): each method's arithmetic, as its module states it.

The server refuses a request over its caps with these numbers (tests/test_serve_shared.py); here, that
each sampler's bound is the count its module's text gives, grows with every size it multiplies, and
that SPS's closed form is the step-by-step sum it stands for.
"""

from __future__ import annotations

import pytest

from presto_tui.runtime.core import registry
from presto_tui.runtime.core.method import Cost as SessionCost
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.methods.sps import draws_of


def session_cost(p: SamplerParams) -> SessionCost:
    return p.method.cost(p)


def params(**kw) -> SamplerParams:
    return SamplerParams(**kw).validate()


@pytest.mark.parametrize(("kw", "cost"), [
    (dict(sampler="lowtemp", prefetch="none", max_new_tokens=96), (1, 96)),
    (dict(sampler="bestofn", prefetch="none", samples=8, max_new_tokens=96), (8, 8 * 96)),
    (dict(sampler="powersmc", prefetch="none", particles=4, smc_block=32, max_new_tokens=96), (4 * 3, 4 * 96)),
    # one block of n: an extension, then K proposals of at most n tokens
    (dict(sampler="powermh", prefetch="none", steps=10, max_new_tokens=96), (1 + 10, 96 + 10 * 96)),
    # two blocks of 4: block b's proposals reach b * 4 tokens
    (dict(sampler="powermh", prefetch="none", steps=2, max_new_tokens=8, block_size=4), (2 * 3, 8 + 2 * 4 * 3)),
    (dict(sampler="multitry", prefetch="none", tries=3, steps=10, max_new_tokens=96), (1 + 30, 96 + 30 * 96)),
    (dict(sampler="powermh", prefetch="bfs", budget=8, steps=10, max_new_tokens=96), (1 + 80, 96 + 80 * 96)),
    (dict(sampler="powermh", prefetch="stream", budget=64, steps=1024, max_new_tokens=4096),
     (1 + 1024 * 64, 4096 + 1024 * 64 * 4096)),
])
def test_each_samplers_bound_is_its_arithmetic(kw, cost):
    assert session_cost(params(**kw)) == SessionCost(*cost)


def sps_by_steps(p: SamplerParams) -> SessionCost:
    """SPS's cost summed step by step, as the driver issues it (draws, then each candidate's rollouts)."""
    n, chunk, H = p.max_new_tokens, p.sps_chunk, p.sps_horizon
    requests = tokens = 0
    t = 0
    while t < n:
        left = n - t
        requests += draws_of(p) + p.sps_top_k * p.sps_rollouts
        tokens += draws_of(p) * (left if H == 0 else min(left, chunk + H))
        tokens += p.sps_top_k * p.sps_rollouts * (max(0, left - chunk) if H == 0 else min(H, max(0, left - chunk)))
        t += chunk
    return SessionCost(requests, tokens)


@pytest.mark.parametrize(("n", "chunk", "horizon"), [(96, 16, 0), (100, 16, 0), (7, 3, 0), (5, 1, 0), (4096, 16, 0),
                                                     (96, 16, 8), (100, 7, 40)])
def test_sps_bound_covers_every_step(n, chunk, horizon):
    p = params(sampler="sps", prefetch="none", max_new_tokens=n, sps_chunk=chunk, sps_horizon=horizon,
               sps_top_k=3, sps_draws=5, sps_rollouts=4)
    got, summed = session_cost(p), sps_by_steps(p)
    assert got.requests == summed.requests
    assert got.tokens == summed.tokens if horizon == 0 else got.tokens >= summed.tokens


def test_the_issues_sps_request_costs_what_the_server_names():
    p = params(sampler="sps", prefetch="none", sps_top_k=256, sps_draws=4096, sps_rollouts=4096, max_new_tokens=4096)
    assert session_cost(p) == SessionCost(269_484_032, 549_764_202_496)


def test_every_sampler_has_a_cost_that_grows_with_its_sizes():
    base = dict(max_new_tokens=32, steps=4)
    for name in registry.names():
        chain = registry.find(name).chain
        p = params(sampler=name, prefetch="stream" if chain else "none", **base)
        bigger = p.with_(max_new_tokens=64, steps=8, samples=2 * p.samples, particles=2 * p.particles,
                         sps_rollouts=2 * p.sps_rollouts, budget=2 * p.budget)
        small, large = session_cost(p), session_cost(bigger)
        assert 0 < small.requests <= large.requests and 0 < small.tokens < large.tokens, name
