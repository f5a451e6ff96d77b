"""Sessions on an engine loop, for building front-ends (a command, a server, an app's worker).

Most users want `presto_tui.sample` and `presto_tui.stream` (`presto_tui.api.sampling`), which are
built on these.  `make_driver` builds one session exactly as `presto-tui run` does, `chain_drivers`
a prompt's M chains; `run_chains` runs drivers through one engine loop, C at a time, yielding
(session index, event); an `EngineLoop` takes sessions as they arrive (a server's requests);
`ChatSession` is the app's worker (a chat on a local engine); `Cluster` runs prompts on Ray
workers, one engine each.
"""

from __future__ import annotations

from presto_tui.runtime.session.budget_cost import SessionCost, session_cost
from presto_tui.runtime.session.chains import CHAINS, chain_drivers, chain_params, new_group
from presto_tui.runtime.session.chat import (
    ChainEvent,
    ChatSession,
    EngineReady,
    Notice,
    ParamsChanged,
    VocabUpdate,
    deliver,
)
from presto_tui.runtime.session.cluster import Cluster, EngineWorker, WorkerLost, check_address, split_cores
from presto_tui.runtime.session.cluster import _ray as require_ray
from presto_tui.runtime.session.loop import (
    EngineLoop,
    InternalError,
    StartFailed,
    check_context,
    default_concurrency,
    display_text,
    live_per_chain,
    make_driver,
    run_chains,
)

__all__ = [
    "CHAINS", "ChainEvent", "ChatSession", "Cluster", "EngineLoop", "EngineReady", "EngineWorker", "InternalError",
    "Notice", "ParamsChanged", "SessionCost", "StartFailed", "VocabUpdate", "WorkerLost", "chain_drivers",
    "chain_params", "check_address", "check_context", "default_concurrency", "deliver", "display_text",
    "live_per_chain", "make_driver", "new_group", "require_ray", "run_chains", "session_cost", "split_cores",
]
