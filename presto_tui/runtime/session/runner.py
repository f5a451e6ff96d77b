"""Run one prompt's chain and emit its events (alg. 1 and 2's outer loop).

`run_session` is a generator: the consumer (CLI progress, trace writer, app
worker) iterates it and may stop at any event; `cancel` is polled after each
round so a cancel takes effect within one round.  The kernel plans and
finishes each step; the runner times the model call and the sampler's own
work around it, so kernels stay free of clocks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence

from presto_tui import __version__
from presto_tui.errors import InputError, describe
from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import extension_seed
from presto_tui.runtime.core.types import Request, SeqState, cut_at_eos
from presto_tui.runtime.prefetch.kernel import ChainState, build_kernel
from presto_tui.runtime.session.events import (
    BlockStart,
    Event,
    ModelCall,
    RoundDone,
    SessionEnd,
    SessionError,
    SessionStart,
)


def display_text(engine: Engine, tokens: Sequence[int]) -> str:
    return engine.decode(cut_at_eos(tokens, engine.eos_id))


def check_context(engine: Engine, prompt_len: int, params: SamplerParams) -> None:
    if engine.max_len and prompt_len + params.max_new_tokens > engine.max_len:
        raise InputError(f"prompt ({prompt_len} tokens) plus horizon ({params.max_new_tokens}) exceeds "
                         f"the model's context of {engine.max_len} tokens")


def run_session(engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], *,
                prompt: str = "", classifier: CertaintyClassifier | None = None,
                cancel: Callable[[], bool] | None = None) -> Iterator[Event]:
    params.validate()
    kernel = build_kernel(params, classifier)
    yield SessionStart(uuid.uuid4().hex[:12], __version__, engine.name, engine.model,
                       params.to_dict(), prompt, tuple(prompt_ids), time.time(), dict(engine.info))
    state = SeqState(tuple(prompt_ids))
    try:
        check_context(engine, len(prompt_ids), params)
        for block in range(params.n_blocks):
            if cancel and cancel():
                yield SessionEnd("cancelled", state.tokens, display_text(engine, state.tokens))
                return
            req = Request(state.prefix(state.T), params.block, extension_seed(params.seed, block),
                          params.proposal_tau, kernel.family.score_taus)
            t0 = time.perf_counter()
            (prop,) = engine.generate([req])
            yield ModelCall(block, -1, "extend", 1, len(prop.tokens), time.perf_counter() - t0)
            L = state.T
            state = state.extended(prop)
            yield BlockStart(block, L, state.T, prop.tokens)
            chain = ChainState(state, block)
            while chain.k < params.steps:
                t0 = time.perf_counter()
                pending = kernel.plan(chain)
                t1 = time.perf_counter()
                proposals = engine.generate(pending.requests)
                t2 = time.perf_counter()
                k0 = chain.k
                chain, tree = kernel.finish(pending, proposals)
                t3 = time.perf_counter()
                yield ModelCall(block, chain.round - 1, "propose", len(pending.requests),
                                sum(len(p.tokens) for p in proposals), t2 - t1)
                yield RoundDone(block, chain.round - 1, k0, chain.k, params.steps, tree, t2 - t1,
                                {"plan": t1 - t0, "finish": t3 - t2})
                if cancel and cancel() and chain.k < params.steps:
                    yield SessionEnd("cancelled", chain.state.tokens, display_text(engine, chain.state.tokens))
                    return
            state = chain.state
    except Exception as e:  # the stream must say how it ended; the caller decides what to show
        kind, message = describe(e)
        yield SessionError(message, kind)
        raise
    yield SessionEnd("done", state.tokens, display_text(engine, state.tokens))
