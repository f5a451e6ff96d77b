"""Run one prompt's chain and emit its events (alg. 1 and 2's outer loop).

`run_session` is a generator: the consumer (CLI progress, trace writer, TUI
worker) iterates it and may stop at any event; `cancel` is polled before each
round so a cancel takes effect within one round.
"""

from __future__ import annotations

import time
import uuid
from typing import Callable, Iterator, Sequence

from presto_tui import __version__
from presto_tui.runtime.backend import Backend, Request, SeqState
from presto_tui.runtime.classifier import CertaintyClassifier
from presto_tui.runtime.events import (
    BlockStart, Event, ModelCall, RoundDone, SessionEnd, SessionError, SessionStart,
)
from presto_tui.runtime.params import SamplerParams
from presto_tui.runtime.presto import ChainState, make_kernel, run_block, score_taus, timed_generate
from presto_tui.runtime.randomness import extension_seed


class ContextTooLong(ValueError):
    pass


def display_text(backend: Backend, tokens: Sequence[int]) -> str:
    """Text for people: cut at the first EOS (the chain itself always runs to T)."""
    toks = list(tokens)
    if backend.eos_id is not None and backend.eos_id in toks:
        toks = toks[: toks.index(backend.eos_id)]
    return backend.decode(toks)


def run_session(backend: Backend, params: SamplerParams, prompt_ids: Sequence[int], *,
                prompt: str = "", classifier: CertaintyClassifier | None = None,
                cancel: Callable[[], bool] | None = None) -> Iterator[Event]:
    params.validate()
    kernel = make_kernel(params, classifier)
    yield SessionStart(uuid.uuid4().hex[:12], __version__, backend.name, backend.model,
                       params.to_dict(), prompt, tuple(prompt_ids), time.time(),
                       dict(getattr(backend, "info", {}) or {}))
    state = SeqState(tuple(prompt_ids))
    max_len = getattr(backend, "max_len", None)
    if max_len and len(prompt_ids) + params.max_new_tokens > max_len:
        msg = (f"prompt ({len(prompt_ids)} tokens) plus horizon ({params.max_new_tokens}) exceeds "
               f"the model's context of {max_len} tokens")
        yield SessionError(msg, "input")
        raise ContextTooLong(msg)
    try:
        for block in range(params.n_blocks):
            if cancel and cancel():
                yield SessionEnd("cancelled", state.tokens, display_text(backend, state.tokens))
                return
            req = Request(state.prefix(state.T), params.block, extension_seed(params.seed, block),
                          params.proposal_tau, score_taus(params))
            (prop,), call = timed_generate(backend, [req])
            yield ModelCall(block, -1, "extend", call.requests, call.tokens, call.wall_s)
            L = state.T
            state = state.extended(prop)
            yield BlockStart(block, L, state.T, prop.tokens)
            chain = ChainState(state, block)
            for chain, tree, call in run_block(backend, params, chain, kernel):
                yield ModelCall(block, chain.round - 1, "propose", call.requests, call.tokens,
                                call.wall_s)
                yield RoundDone(block, chain.round - 1, tree.k0, chain.k, params.steps, tree,
                                call.wall_s)
                if cancel and cancel() and chain.k < params.steps:
                    yield SessionEnd("cancelled", chain.state.tokens,
                                     display_text(backend, chain.state.tokens))
                    return
            state = chain.state
    except Exception as e:  # the stream must say how it ended; the caller decides what to show
        yield SessionError(f"{type(e).__name__}: {e}", "engine")
        raise
    yield SessionEnd("done", state.tokens, display_text(backend, state.tokens))
