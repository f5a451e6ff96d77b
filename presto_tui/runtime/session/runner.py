"""Run one prompt's chain and emit its events: one chain through the engine loop.

`run_session` is a generator: the consumer (CLI progress, trace writer, app
worker) iterates it and may stop at any event; `cancel` is polled before
every engine step, so a cancel takes effect within one step.  Many prompts on
one engine: `session.loop.run_chains`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.events import Event
from presto_tui.runtime.session.loop import check_context, display_text, make_driver, run_chains

__all__ = ["check_context", "display_text", "run_session"]


def run_session(engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], *,
                prompt: str = "", classifier: CertaintyClassifier | None = None,
                cancel: Callable[[], bool] | None = None, transient: bool = False) -> Iterator[Event]:
    driver = make_driver(engine, params, prompt_ids, prompt=prompt, classifier=classifier)
    for _, ev in run_chains(engine, [driver], cancel=cancel, transient=transient):
        yield ev
