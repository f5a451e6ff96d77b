"""Sessions built and run by hand: for tests, benchmarks of the engine loop itself and method authors.

Front-ends never build drivers (an import-linter contract): they hand prompts and parameters to
`presto_tui.api.sampling` (`stream`, `stream_jobs`, `sample`, `Session`) or, when sessions arrive
while others run (the server), to `presto_tui.api.sessions.Sessions`, which build every session
exactly as `presto-tui run` does.  Here are the parts those are made of: `make_driver` builds one
session (its method's driver), `chain_drivers` a prompt's M chains, `run_chains` runs drivers
through one engine loop, C at a time, yielding (session index, event), and `EngineLoop` is that
loop.
"""

from __future__ import annotations

from presto_tui.runtime.session.chains import chain_drivers
from presto_tui.runtime.session.loop import EngineLoop, StartFailed, make_driver, run_chains

__all__ = ["EngineLoop", "StartFailed", "chain_drivers", "make_driver", "run_chains"]
