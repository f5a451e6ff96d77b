"""Several chains of one prompt (`--chains M`): M drivers that share one engine's batch.

Chain m runs with its own session seed, `randomness.chain_seed(seed, m)` (chain 0
keeps the seed), and with nothing else of its own: chain m of M is, token for
token, the single chain a run with that seed makes, sequential or PreSTO.  The
chains of a prompt share a group id, which their `session_start` events carry
with their index, so a trace groups them and diagnostics read them together
(`diagnostics.py`).  Run the drivers with `run_chains` at a concurrency that
covers them: they then share every engine step (and, where the engine caches
prefixes, the prompt's cache).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Sequence

from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.params import Limit, SamplerParams
from presto_tui.runtime.core.randomness import chain_seed
from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.session.loop import SessionDriver, make_driver

CHAINS = Limit(1, 256, integer=True)  # chains per prompt (as many as one engine runs at once)


def chain_params(params: SamplerParams, chain: int) -> SamplerParams:
    """Chain `chain`'s parameters: the same but for its seed."""
    return params.with_(seed=chain_seed(params.seed, chain))


def new_group() -> str:
    """A fresh id shared by the sessions of one prompt's chains (their `session_start` carries it)."""
    return uuid.uuid4().hex[:12]


def chain_drivers(engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], chains: int, *,
                  prompt: str = "", classifier: CertaintyClassifier | None = None, group: str | None = None,
                  states: Sequence[SeqState] | None = None,
                  only: Collection[int] | None = None) -> Iterator[SessionDriver]:
    """The `chains` chains of one prompt, in chain order, each made as the loop takes it (a session's
    clock starts when its driver is made).  One chain is the plain single-chain run (chain 0 of 1, no
    group).  `states`: start chain m's first block from states[m] (tests).  `only`: just these chains
    (a resumed run's missing ones), each with the seed it has among all `chains`."""
    if chains == 1:
        if only is None or 0 in only:
            yield make_driver(engine, params, prompt_ids, prompt=prompt, classifier=classifier,
                              state=states[0] if states else None)
        return
    group = group or new_group()
    for m in range(chains):
        if only is not None and m not in only:
            continue
        yield make_driver(engine, chain_params(params, m), prompt_ids, prompt=prompt, classifier=classifier,
                          state=states[m] if states else None, chain=m, chains=chains, group=group)
