"""Parameters: the values that fix a sampler's law and schedule, and the specification they come from.

`Params` holds a session's sampler parameters; `SPEC` declares every parameter once (name,
type, range, default, help, which samplers and engines read it); `params_from` reads values
as they arrive (text, JSON) on the one validation path every front-end uses.
"""

from __future__ import annotations

from pathlib import Path

from presto_tui.files import readable_file
from presto_tui.runtime.core.classifier import FEATURES, CertaintyClassifier
from presto_tui.runtime.core.methods import GRAMMAR, Method, describe, parse_method, parse_methods, sequential_of
from presto_tui.runtime.core.names import (
    BackendName,
    InputMode,
    PrefetchRule,
    SamplerKind,
    SamplerName,
    unknown_choice,
    unknown_name,
)
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
    applying,
    budget_text,
    flag,
    json_schema,
    label,
    number_text,
    of_group,
    raw_text,
    read_budget,
    request_field,
    whole_number,
)

Params = SamplerParams  # the public name


def load_classifier(path: Path | None) -> CertaintyClassifier | None:
    """The epsilon-class model for `--prefetch predictive` (from `presto-tui fit-classifier`), or None."""
    if path is None:
        return None
    return CertaintyClassifier.load(readable_file(Path(path), "classifier file", pipes=True))

__all__ = [
    "AUTO_BUDGET", "BENCH_SIZES", "BUDGET_LIMIT", "BackendName", "CertaintyClassifier", "ENGINE_PARAMS", "FEATURES",
    "GRAMMAR", "Group", "InputMode", "LIMITS", "Limit", "MULTITRY_TAUS", "Method", "Name", "Naming", "PAPER_SETTINGS",
    "PARAMS", "Param", "ParamError", "Params", "PrefetchRule", "SAMPLER_PARAMS", "SPEC", "SamplerKind", "SamplerName",
    "SamplerParams", "applying", "budget_text", "describe", "flag", "json_schema", "label", "load_classifier",
    "number_text", "of_group", "params_from", "parse_method", "parse_methods", "raw_text", "read_budget",
    "request_field", "rule_defaults", "sequential_of", "unknown_choice", "unknown_name", "whole_number",
]
