"""presto-tui: run, watch and replay exact PreSTO power sampling of LLMs.

The public Python API is `__all__` below (and the modules it names: `events`, the event types;
`testing`, the law-test kit; `plugin`, what a method author builds with), versioned by
`API_VERSION`: a minor version adds, a major version changes or removes.  Everything else in the
package is internal.  Names load on first use, so `import presto_tui` stays cheap.

    import presto_tui

    engine = presto_tui.Engine(backend="synthetic")           # or Engine() for the embedded model
    [result] = presto_tui.sample(engine, "the cat", presto_tui.Params(steps=8), chains=4,
                                 trace="sessions/nb.jsonl")
    result.text, result.answer, result.diagnostics.warnings
    data = presto_tui.read_trace("sessions/nb.jsonl")
    data.transitions                                          # a pandas DataFrame
    data.chains(1)                                            # an ArviZ DataTree
    [m.name for m in presto_tui.methods()]                    # the samplers, plugins' included
    presto_tui.method_catalog().problems                      # plugin methods that failed to load, and why
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
# 2.0: the API is the names below (1.x promised every name of presto_tui.api's modules); a method is an
# object (Method, methods, register), with the law-test kit (testing) and the author's names (plugin);
# 2.1 adds method_catalog, and to plugin a one-shot method's select (Selection, best_by), a session's
# emit/end/submit_request and the helpers (eps_class, cut_at_eos, samples_cost, at_temperature, problems)
API_VERSION = "2.1"

# public name -> the module that defines it
_WHERE = {
    "Engine": "presto_tui.api.engine",
    "Params": "presto_tui.api.params",
    "ParamError": "presto_tui.api.params",
    "sample": "presto_tui.api.sampling",
    "stream": "presto_tui.api.sampling",
    "Session": "presto_tui.api.sampling",
    "Result": "presto_tui.api.sampling",
    "ChainResult": "presto_tui.api.sampling",
    "SessionEvent": "presto_tui.api.sampling",
    "SessionSummary": "presto_tui.api.events",
    "read_trace": "presto_tui.api.traces",
    "TraceData": "presto_tui.api.traces",
    "Method": "presto_tui.api.params",
    "MethodKind": "presto_tui.api.params",
    "methods": "presto_tui.api.params",
    "find_method": "presto_tui.api.params",
    "method_catalog": "presto_tui.api.methods",
    "register": "presto_tui.plugin",
    "PrestoError": "presto_tui.errors",
    "InputError": "presto_tui.errors",
    "TraceError": "presto_tui.errors",
    "EngineError": "presto_tui.errors",
    "OutputError": "presto_tui.errors",
}
_MODULES = ("events", "testing", "plugin")

__all__ = ["API_VERSION", "ChainResult", "Engine", "EngineError", "InputError", "Method", "MethodKind",
           "OutputError", "ParamError", "Params", "PrestoError", "Result", "Session", "SessionEvent",
           "SessionSummary", "TraceData", "TraceError", "events", "find_method", "method_catalog", "methods", "plugin",
           "read_trace", "register", "sample", "stream", "testing"]

def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    if name in _MODULES:
        return importlib.import_module(f"presto_tui.{name}")
    if name == "api":
        return importlib.import_module("presto_tui.api")
    raise AttributeError(f"module 'presto_tui' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(["__version__", *__all__])
