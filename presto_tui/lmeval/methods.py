"""The methods `presto-tui lm-eval --methods` runs: a method is a SamplerParams.

    METHOD := lowtemp | bon[:N] | smc[:P] | SAMPLER | SAMPLER+RULE[:N]

`lowtemp`: one sample at temperature 1/alpha; `bon:N` (or `bestofn:N`): best-of-N;
`smc:P` (or `powersmc:P`): PowerSMC with P particles; `SAMPLER` alone (`powermh`,
`entropycut`, `multitry`): the sequential MH sampler; `SAMPLER+RULE`: with a PreSTO
rule (`bfs`, `predictive`, `spine`, `stream`), `:N` its budget.  Every other
parameter comes from the command's flags, so the methods differ only in what
their specs say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from presto_tui.errors import InputError
from presto_tui.runtime.core.names import InputMode, PrefetchRule, SamplerName, unknown_choice
from presto_tui.runtime.core.params import ParamError, SamplerParams

ALIASES = {"bon": SamplerName.BESTOFN.value, "smc": SamplerName.POWERSMC.value}
COUNT_OF = {SamplerName.BESTOFN.value: "samples", SamplerName.POWERSMC.value: "particles"}  # what `:N` sets
GRAMMAR = "lowtemp, bon:N, smc:P, SAMPLER or SAMPLER+RULE[:N]"
_SPEC = re.compile(r"^(?P<sampler>[a-z]+)(?:\+(?P<rule>[a-z]+))?(?::(?P<n>[0-9]+))?$")


@dataclass(frozen=True)
class Method:
    label: str  # the spec as written (lower case, no spaces)
    params: SamplerParams


def parse_method(spec: str, base: SamplerParams, flag: str = "--methods") -> Method:
    """The method `spec` names, over `base` (the command's own sampler flags)."""
    label = spec.strip().lower()
    m = _SPEC.match(label)
    if m is None:
        raise InputError(f"{flag}: cannot read {spec.strip()!r}; a method is {GRAMMAR}")
    name = ALIASES.get(m["sampler"], m["sampler"])
    if name not in SamplerName.names():
        raise InputError(f"{flag}: " + unknown_choice("method", m["sampler"], ("lowtemp", "bon", "smc",
                                                                                *SamplerName.names())))
    sampler = SamplerName.of(name)
    n = int(m["n"]) if m["n"] is not None else None
    changes: dict = {"sampler": name, "prefetch": PrefetchRule.NONE.value}
    if not sampler.chain:
        if m["rule"] is not None:
            raise InputError(f"{flag}: {label}: {sampler.display} is a baseline, not an MH chain; it takes no "
                             "PreSTO rule")
        if n is not None:
            if name not in COUNT_OF:
                raise InputError(f"{flag}: {label}: {sampler.display} takes no :N (it draws one sample)")
            changes[COUNT_OF[name]] = n
    elif m["rule"] is None:
        if n is not None:
            raise InputError(f"{flag}: {label}: a number after an MH sampler is its PreSTO rule's budget; write "
                             f"{name}+RULE:{n} ({name} alone is the sequential sampler)")
        changes["inputs"] = InputMode.DECISION.value
    else:
        if m["rule"] not in PrefetchRule.presto_names():
            raise InputError(f"{flag}: {label}: " + unknown_choice("PreSTO rule", m["rule"],
                                                                   PrefetchRule.presto_names()))
        rule = PrefetchRule.of(m["rule"])
        changes["prefetch"] = rule.value
        changes["inputs"] = base.inputs if rule.node_inputs else InputMode.DECISION.value
        if n is not None:
            changes["budget"] = n
    try:
        params = base.with_(**changes).validate()
    except ParamError as e:
        raise InputError(f"{flag}: {label}: {e.line}") from None
    return Method(label, params)


def parse_methods(text: str, base: SamplerParams, flag: str = "--methods") -> list[Method]:
    """The comma-separated methods of `text`, each once."""
    methods: list[Method] = []
    for spec in (s for s in text.split(",") if s.strip()):
        method = parse_method(spec, base, flag)
        if any(m.label == method.label for m in methods):
            raise InputError(f"{flag}: {method.label} is listed twice")
        methods.append(method)
    if not methods:
        raise InputError(f"{flag} needs at least one method: {GRAMMAR}")
    return methods
