"""Shared test helpers: small synthetic models and trajectory collection."""

from __future__ import annotations

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.session.events import BlockStart, RoundDone
from presto_tui.runtime.session.runner import run_session


def small_backend(vocab: int = 5, order: int = 2, seed: int = 1, sharpness: float = 1.5):
    return SyntheticEngine(SyntheticLM(vocab_size=vocab, order=order, seed=seed, sharpness=sharpness))


def run_chain(engine, params: SamplerParams, chain):
    """Advance `chain` to the end of its block with the kernel `params` select."""
    from presto_tui.runtime.prefetch.kernel import build_kernel

    kernel = build_kernel(params)
    while chain.k < params.steps:
        chain, _ = kernel.step(engine, chain)
    return chain


def trajectory(backend, params: SamplerParams, prompt=(1, 2)):
    """The chain's generated tokens after every block extension and every transition."""
    states, trees = [], []
    for ev in run_session(backend, params, list(prompt)):
        if isinstance(ev, BlockStart):
            states.append(("extend", ev.block, ev.tokens))
        elif isinstance(ev, RoundDone):
            trees.append(ev.tree)
            states.extend(s.tokens for s in ev.tree.states_after_steps())
    return states, trees


class RecordNoiseBackend(SyntheticEngine):
    """A synthetic model whose per-token records carry noise that depends on the request.

    On a real engine the same token in the same context gets slightly different
    log-probabilities and entropies from different calls (batch shapes change
    the float arithmetic).  Here the noise is a deterministic function of the
    request (its seed and prefix length), large enough to change MH decisions,
    so that a sampler which takes a token's records from another request than
    the sequential chain would is caught.  Tokens are untouched.
    """

    def __init__(self, *args, noise: float = 0.3, **kwargs):
        super().__init__(*args, **kwargs)
        self.noise = noise

    def _one(self, req):
        import numpy as np

        from presto_tui.runtime.core.types import Proposal

        p = super()._one(req)
        rng = np.random.default_rng([req.seed, len(req.prefix), 0x4E])
        n = len(p.tokens)
        jitter = lambda: tuple(float(v) for v in self.noise * rng.uniform(-1, 1, n))
        lq, lp, h = jitter(), jitter(), jitter()
        return Proposal(p.tokens, tuple(a + b for a, b in zip(p.logq, lq)),
                        tuple(a + b for a, b in zip(p.logp, lp)),
                        tuple(max(0.0, a + b) for a, b in zip(p.entropy, h)),
                        tuple(tuple(a + b for a, b in zip(row, lq)) for row in p.logq_at))


def noisy_backend(vocab: int = 4, seed: int = 1, sharpness: float = 2.5, noise: float = 0.3):
    return RecordNoiseBackend(SyntheticLM(vocab_size=vocab, order=2, seed=seed, sharpness=sharpness), noise=noise)
