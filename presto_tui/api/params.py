"""Parameters: the values that fix a sampler's law and schedule, and the specification they come from.

`Params` holds a session's sampler parameters; `SPEC` declares every parameter once (name,
type, range, default, help, which samplers and engines read it); `params_from` reads values
as they arrive (text, JSON) on the one validation path every front-end uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from presto_tui.files import readable_file
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.classifier import FEATURES, CertaintyClassifier
from presto_tui.runtime.core.language import (
    MethodSpec,
    describe,
    frontier_axes,
    grammar,
    methods_help,
    parse_method,
    parse_methods,
    sequential_of,
)
from presto_tui.runtime.core.method import Axis, Cost, EventType, Method, MethodInfo, MethodKind
from presto_tui.runtime.core.names import BackendName, InputMode, PrefetchRule, unknown_choice, unknown_name
from presto_tui.runtime.core.names import Choice as Name
from presto_tui.runtime.core.params import (
    BENCH_SIZES,
    MULTITRY_TAUS,
    PAPER_SETTINGS,
    SamplerParams,
    params_from,
    rule_defaults,
)
from presto_tui.runtime.core.spec import (
    AUTO_BUDGET,
    BUDGET_LIMIT,
    ENGINE_PARAMS,
    LIMITS,
    PARAMS,
    SAMPLER_PARAMS,
    SPEC,
    Group,
    Limit,
    Naming,
    Param,
    ParamError,
    applies,
    applying,
    budget_text,
    flag,
    json_schema,
    label,
    number_text,
    of_group,
    param_table,
    raw_text,
    read_budget,
    request_field,
    sampler_table,
    whole_number,
)


def python_name(name: str) -> str:
    """How a Python caller names a parameter: by its field name (`max_new_tokens`, not `-n`)."""
    return name


class Params(SamplerParams):
    """The parameters of a session (set below by the parameter table, with every method's own)."""

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        self.validate()

    def validate(self, naming: Naming = python_name) -> Params:
        """Return self, or raise ParamError naming the first bad value by its field name."""
        super().validate(naming)
        return self


def params_doc() -> str:
    """Params' docstring: every field with its help, range and default (what `help(Params)` shows)."""
    lines = ["The parameters of a session, checked when built (a bad value: ParamError naming the field).",
             "", "    presto_tui.Params(steps=8, alpha=4.0)", "    presto_tui.Params(sampler=\"bestofn\", samples=4)",
             "    params.with_(seed=1)          # a copy with a change, checked again", "",
             "Fields (each method reads those of its kind and its own; `presto-tui run --help` shows the same",
             "help under the command-line flags):", ""]
    for p in sampler_table():
        if p.flag == "":  # set through another one (the budget's policy)
            continue
        lines.append(f"{p.name}: {p.help_text()}")
    return "\n".join(lines)


Params.__doc__ = params_doc()


def methods() -> tuple[Method, ...]:
    """Every sampling method presto-tui knows: the built-in ones, then every installed plugin's (the
    entry-point group `presto_tui.methods`), each a `Method`."""
    return registry.methods()


def find_method(name: object) -> Method | None:
    """The method called `name` (or one of its aliases, as `bon`); None if there is none."""
    return registry.find(name)


def method_names(kind: MethodKind | None = None) -> tuple[str, ...]:
    """The names `--sampler` takes (of one kind, or all)."""
    return registry.names(kind)


def load_classifier(path: Path | None) -> CertaintyClassifier | None:
    """The epsilon-class model for `--prefetch predictive` (from `presto-tui fit-classifier`), or None."""
    if path is None:
        return None
    return CertaintyClassifier.load(readable_file(Path(path), "classifier file", pipes=True))

__all__ = [
    "AUTO_BUDGET", "Axis", "BENCH_SIZES", "BUDGET_LIMIT", "BackendName", "CertaintyClassifier", "Cost",
    "ENGINE_PARAMS", "EventType", "FEATURES", "Group", "InputMode", "LIMITS", "Limit", "MULTITRY_TAUS", "Method",
    "MethodInfo", "MethodKind", "MethodSpec", "Name", "Naming", "PAPER_SETTINGS", "PARAMS", "Param", "ParamError",
    "Params", "PrefetchRule", "SAMPLER_PARAMS", "SPEC", "SamplerParams", "applies", "applying", "budget_text",
    "describe", "find_method", "flag", "frontier_axes", "grammar", "json_schema", "label", "load_classifier",
    "method_names", "methods", "methods_help", "number_text", "of_group", "param_table", "params_from", "parse_method",
    "parse_methods",
    "python_name", "raw_text", "read_budget", "request_field", "rule_defaults", "sampler_table", "sequential_of",
    "unknown_choice", "unknown_name", "whole_number",
]
