"""Which methods are installed here, and which failed to load: what `presto-tui methods` prints.

`catalog()` reads the registry (`runtime/core/registry.py`): every method with its kind, budget axis,
own parameters and where it comes from (built-in, or the package and version that registers it), and
each plugin method that was left out, with the exception and the file and line it points at.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from presto_tui.runtime.core import registry
from presto_tui.runtime.core.registry import Problem

__all__ = ["Catalog", "MethodEntry", "Problem", "method_catalog"]


@dataclass(frozen=True)
class MethodEntry:
    """One installed method, as `presto-tui methods` lists it."""

    name: str
    display: str
    kind: str  # "chain" or "one-shot"
    axis: str | None  # its budget: "K (steps)"; None where it has none
    params: tuple[str, ...]  # its own parameters (and those it reads of another method's)
    origin: str  # "built-in", or "package version"
    aliases: tuple[str, ...]
    help: str


@dataclass(frozen=True)
class Catalog:
    """The methods installed here and the plugin methods that failed to load (`method_catalog`)."""

    methods: tuple[MethodEntry, ...]
    problems: tuple[Problem, ...]  # plugin methods left out, and why

    def to_dict(self) -> dict[str, Any]:
        return {"methods": [asdict(m) for m in self.methods],
                "problems": [{**{k: v for k, v in asdict(p).items() if k != "traceback"}, "line": str(p)}
                             for p in self.problems]}


def method_catalog() -> Catalog:
    """Every method presto-tui knows here (`Catalog.methods`: name, kind, budget axis, own parameters,
    origin) and every plugin method that failed to load (`Catalog.problems`: package, entry point,
    exception, file:line), as `presto-tui methods` prints them."""
    entries = tuple(
        MethodEntry(m.name, m.display, m.kind.value,
                    f"{m.axis.symbol} ({m.axis.param})" if m.axis is not None else None,
                    m.own, registry.origin(m), tuple(m.aliases), m.help)
        for m in registry.methods())
    return Catalog(entries, registry.load_problems())
