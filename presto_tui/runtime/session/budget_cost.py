"""What one session may cost before it runs: the engine requests it may issue and the tokens they
may decode, from its parameters alone.

A front-end that runs sessions for others (the server) multiplies this by the chains a request
asks for and refuses a request over its caps before anything runs; it knows no sampler by name.
Each sampler's arithmetic is here, in one function, so that a sampler added later states its
cost in one place (`session_cost` refuses one it does not know).  The numbers are upper bounds
of what the sampler plans, not predictions: a chain that accepts early, an answer that ends at
EOS, a speculation that is never issued cost less.

With n new tokens (`max_new_tokens`), K transitions per block (`steps`), blocks of B tokens
(`block_size`, one block of n by default), nb = n / B blocks:

- **An MH chain** (PowerMH, EntropyCut, MultiTryMH; paper sec 2): each block starts with one
  request of B tokens (its first state, the extension), then K transitions; a transition's
  proposal resamples the block's state from its cut to its end, at most b B tokens in block
  b (1-based).  The prefetch rule sets how many requests one round issues, `width`:
  - sequential (`prefetch none`): one a transition, MultiTryMH's `tries` candidates;
  - a PreSTO rule (`bfs`, `predictive`, `spine`, `stream`; paper sec 3): at most its budget
    N of distinct requests a round (never fewer than one decision's, MultiTryMH's `tries`),
    and a round settles at least one transition, so at most K rounds a block.  The streaming
    rule keeps at most N requests live and its cost policy fewer; K N is what its budget
    allows over a block's K decisions (a speculative request it aborts and issues again in
    another place counts once more there, so for it the bound is its budget's, not a proof).

  requests <= nb (1 + K width), tokens <= n + K width B nb (nb + 1) / 2.
- **Low temperature**: one request of n tokens.
- **Best-of-N**: `samples` requests of n tokens.
- **PowerSMC**: `particles` particles grown `smc_block` tokens a step over ceil(n / smc_block)
  steps, a request each a step: P ceil(n / smc_block) requests, P n tokens (a resampled copy
  continues its ancestor's prefix: only new tokens are decoded).
- **SPS** (Ji et al. 2026, algorithm 2): ceil(n / `sps_chunk`) steps; at step s, with r = n - s
  chunk tokens left, L = `sps_draws` draws (each decodes r tokens, or chunk + H with a horizon H
  = `sps_horizon`) and M = `sps_rollouts` rollouts of each of the K = `sps_top_k` candidates
  (each r - chunk tokens, or H): requests <= steps (L + K M), tokens <= sum over steps of
  L d_s + K M h_s.  (The issue's example, K = 256, L = M = 4096, n = 4096: 2.7e8 requests,
  5.5e11 tokens a chain.)
"""

from __future__ import annotations

from typing import NamedTuple

from presto_tui.runtime.core.names import PrefetchRule, SamplerName
from presto_tui.runtime.core.params import SamplerParams


class SessionCost(NamedTuple):
    requests: int  # engine requests the session may issue
    tokens: int  # tokens those requests may decode

    def times(self, k: int) -> SessionCost:
        return SessionCost(self.requests * k, self.tokens * k)


def session_cost(params: SamplerParams) -> SessionCost:
    """The most engine requests and tokens one session of `params` may issue (see the module's text)."""
    p = params
    n = p.max_new_tokens
    sampler = SamplerName.of(p.sampler)
    if sampler.chain:
        return _chain_cost(p)
    if sampler == SamplerName.LOWTEMP:
        return SessionCost(1, n)
    if sampler == SamplerName.BESTOFN:
        return SessionCost(p.samples, p.samples * n)
    if sampler == SamplerName.POWERSMC:
        return SessionCost(p.particles * _ceil_div(n, p.smc_block), p.particles * n)
    if sampler == SamplerName.SPS:
        return _sps_cost(p)
    raise ValueError(f"no cost is known for the sampler {p.sampler!r} (presto_tui/runtime/session/budget_cost.py)")


def _chain_cost(p: SamplerParams) -> SessionCost:
    n, K, B, nb = p.max_new_tokens, p.steps, p.block, p.n_blocks
    per_decision = p.tries if SamplerName.of(p.sampler) == SamplerName.MULTITRY else 1
    width = max(p.budget, per_decision) if PrefetchRule.of(p.prefetch).presto else per_decision
    return SessionCost(nb * (1 + K * width), n + K * width * B * nb * (nb + 1) // 2)


def _sps_cost(p: SamplerParams) -> SessionCost:
    n, chunk, H = p.max_new_tokens, p.sps_chunk, p.sps_horizon
    L, rollouts = p.draws, p.sps_top_k * p.sps_rollouts
    steps = _ceil_div(n, chunk)
    if H == 0:  # to the end: step s's draws decode n - s chunk tokens, its rollouts chunk fewer (summed here)
        full = n // chunk  # steps after which tokens are left to roll out
        drawn = steps * n - chunk * steps * (steps - 1) // 2
        tokens = L * drawn + rollouts * (full * n - chunk * full * (full + 1) // 2)
    else:
        tokens = steps * (L * min(n, chunk + H) + rollouts * min(n, H))
    return SessionCost(steps * (L + rollouts), tokens)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // max(1, b))
