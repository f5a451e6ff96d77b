"""presto-tui's public Python API, version `API_VERSION`.

What is named here (and in the `__all__` of `presto_tui.api.params`, `.events`, `.engine`,
`.sampling`, `.traces`, `.sessions` and `.diagnostics`) is the API: it changes only with
`API_VERSION` (a minor version adds, a major version changes or removes).  Everything else
in the package is internal and may change in any release.  The command line, the app, the
server, eval and lm-eval are built on this API and the trace reader (`presto_tui.logs`) only;
import-linter contracts hold that.

    import presto_tui

    engine = presto_tui.Engine(backend="synthetic")          # or Engine() for the embedded model
    [result] = presto_tui.sample(engine, "the cat", presto_tui.Params(steps=8), chains=4,
                                 trace="sessions/nb.jsonl")
    result.text, result.answer, result.diagnostics.warnings
    data = presto_tui.read_trace("sessions/nb.jsonl")
    data.transitions                                         # a pandas DataFrame
    data.chains(1)                                           # an ArviZ DataTree

Names load on first use, so `import presto_tui` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

API_VERSION = "1.1"  # 1.1: the exact power law of an enumerable model (api.engine.exact_power_law)

# public name -> the module that defines it
EXPORTS = {
    "Engine": "presto_tui.api.engine",
    "EngineOptions": "presto_tui.api.engine",
    "Params": "presto_tui.api.params",
    "SPEC": "presto_tui.api.params",
    "Param": "presto_tui.api.params",
    "Group": "presto_tui.api.params",
    "ParamError": "presto_tui.api.params",
    "Method": "presto_tui.api.params",
    "MethodKind": "presto_tui.api.params",
    "methods": "presto_tui.api.params",
    "PrefetchRule": "presto_tui.api.params",
    "InputMode": "presto_tui.api.params",
    "BackendName": "presto_tui.api.params",
    "sample": "presto_tui.api.sampling",
    "stream": "presto_tui.api.sampling",
    "Session": "presto_tui.api.sampling",
    "Result": "presto_tui.api.sampling",
    "ChainResult": "presto_tui.api.sampling",
    "SessionEvent": "presto_tui.api.sampling",
    "read_trace": "presto_tui.api.traces",
    "TraceData": "presto_tui.api.traces",
    "PrestoError": "presto_tui.errors",
    "InputError": "presto_tui.errors",
    "TraceError": "presto_tui.errors",
    "EngineError": "presto_tui.errors",
    "OutputError": "presto_tui.errors",
}
SUBMODULES = ("engine", "params", "events", "sampling", "traces", "sessions", "diagnostics")

__all__ = [
    "API_VERSION", "BackendName", "ChainResult", "Engine", "EngineError", "EngineOptions", "Group", "InputError",
    "InputMode", "Method", "MethodKind", "OutputError", "Param", "ParamError", "Params", "PrefetchRule",
    "PrestoError", "Result", "SPEC", "Session", "SessionEvent", "TraceData", "TraceError", "diagnostics", "engine",
    "events", "methods", "params", "read_trace", "sample", "sampling", "sessions", "stream", "traces",
]

if TYPE_CHECKING:
    from presto_tui.api.engine import Engine, EngineOptions
    from presto_tui.api.params import (
        SPEC,
        BackendName,
        Group,
        InputMode,
        Method,
        MethodKind,
        Param,
        ParamError,
        Params,
        PrefetchRule,
    )
    from presto_tui.api.sampling import ChainResult, Result, Session, SessionEvent, sample, stream
    from presto_tui.api.traces import TraceData, read_trace
    from presto_tui.errors import EngineError, InputError, OutputError, PrestoError, TraceError


def __getattr__(name: str) -> Any:
    if name in EXPORTS:
        value = getattr(importlib.import_module(EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in SUBMODULES:
        return importlib.import_module(f"presto_tui.api.{name}")
    raise AttributeError(f"module 'presto_tui.api' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
