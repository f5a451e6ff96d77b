"""presto-tui: run, watch and replay exact PreSTO power sampling of LLMs.

The public Python API is `presto_tui.api`; its names are also here (`presto_tui.Engine`,
`presto_tui.sample`, `presto_tui.read_trace`, ...), loaded on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    import importlib

    api = importlib.import_module("presto_tui.api")

    if name == "API_VERSION" or name in api.EXPORTS:
        return getattr(api, name)
    raise AttributeError(f"module 'presto_tui' has no attribute {name!r}")


def __dir__() -> list[str]:
    import importlib

    api = importlib.import_module("presto_tui.api")

    return sorted(["__version__", "api", *api.__all__])
