"""Sessions on an engine for front-ends that keep an engine busy (a server, an app's worker, Ray workers).

Most users want `presto_tui.sample` and `presto_tui.stream` (`presto_tui.api.sampling`).  Here:
`Sessions` takes sessions as they arrive (a server's requests) on one engine loop, each built as
`presto-tui run` builds it; `ChatSession` is the app's worker (a chat on a local engine);
`Cluster` runs prompts on Ray workers, one engine each; and what they check before anything runs
(`check_context`, `check_address`, `require_ray`, `CHAINS`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.chains import CHAINS, chain_params, new_group
from presto_tui.runtime.session.chat import (
    ChainEvent,
    ChatSession,
    EngineReady,
    Notice,
    ParamsChanged,
    VocabUpdate,
    deliver,
)
from presto_tui.runtime.session.cluster import (
    Cluster,
    EngineWorker,
    WorkerLost,
    check_address,
    require_ray,
    split_cores,
)
from presto_tui.runtime.session.cost import StepCost
from presto_tui.runtime.session.events import Event
from presto_tui.runtime.session.loop import (
    EngineLoop,
    InternalError,
    StartFailed,
    check_context,
    default_concurrency,
    display_text,
    make_driver,
)

__all__ = [
    "CHAINS", "ChainEvent", "ChatSession", "Cluster", "EngineReady", "EngineWorker", "InternalError", "Notice",
    "ParamsChanged", "Sessions", "StartFailed", "StepCost", "VocabUpdate", "WorkerLost", "chain_params",
    "check_address", "check_context", "default_concurrency", "deliver", "display_text", "new_group", "require_ray",
    "split_cores",
]

Key = Hashable


class Sessions:
    """Sessions that come and go on one engine: `start` one (its method's session, built as `presto-tui
    run` builds it) under a key of the caller's, `step` the engine once for all of them, `cancel` one.
    One thread calls these (the engine loop's rule)."""

    def __init__(self, engine: Any, classifier: CertaintyClassifier | None = None) -> None:
        self.loop = EngineLoop(engine)
        self.classifier = classifier

    @property
    def engine(self) -> Any:
        return self.loop.engine

    @property
    def cost(self) -> StepCost:
        return self.loop.cost

    @property
    def active(self) -> dict[Key, Any]:
        """The sessions running, by key."""
        return self.loop.active

    def start(self, key: Key, params: SamplerParams, prompt_ids: Sequence[int], *, prompt: str = "",
              chain: int = 0, chains: int = 1, group: str = "") -> list[tuple[Key, Event]]:
        """Start chain `chain` of `chains` of a prompt (its seed `chain_params` gives it); its requests join
        the next step.  A session that cannot start raises `StartFailed` with the events that end it."""
        params = chain_params(params, chain) if chains > 1 else params
        driver = make_driver(self.engine, params, prompt_ids, prompt=prompt, classifier=self.classifier,
                             chain=chain, chains=chains, group=group)
        return [(key, ev) for ev in self.loop.add(key, driver)]

    def step(self, transient: bool | Callable[[Key], bool] = False) -> list[tuple[Key, Event]]:
        """One engine step for every running session; their events (sessions that ended leave).
        `transient`: also the progress events for a person watching, of every session or of those
        the function picks."""
        return self.loop.step(transient)

    def cancel(self, key: Key) -> list[tuple[Key, Event]]:
        """End a session `cancelled` (a client gone) and abort its requests."""
        return [(key, ev) for ev in self.loop.cancel(key)]

    def fail_all(self, exc: BaseException) -> list[tuple[Key, Event]]:
        """End every running session with an error event (an engine failure)."""
        return self.loop.fail_all(exc)
