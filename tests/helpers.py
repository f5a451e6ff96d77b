"""Shared test helpers: small synthetic models and trajectory collection."""

from __future__ import annotations

from presto_tui.runtime.events import BlockStart, RoundDone
from presto_tui.runtime.params import SamplerParams
from presto_tui.runtime.session import run_session
from presto_tui.runtime.synthetic import SyntheticBackend, SyntheticLM


def small_backend(vocab: int = 5, order: int = 2, seed: int = 1, sharpness: float = 1.5):
    return SyntheticBackend(SyntheticLM(vocab_size=vocab, order=order, seed=seed, sharpness=sharpness))


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
