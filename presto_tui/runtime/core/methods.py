"""The method language of `eval --methods`, `lm-eval --methods` and `stats --compare PATH@METHOD`: a
method is a SamplerParams.

    METHOD := lowtemp | bon[:N] | smc[:P] | sps[:M] | SAMPLER | SAMPLER+RULE[/INPUTS][:N]

- `lowtemp`: one sample at temperature 1/alpha;
- `bon:N` (or `bestofn:N`): best-of-N, N samples; `smc:P` (or `powersmc:P`): PowerSMC
  with P particles; `sps:M`: Scalable Power Sampling with M rollouts per candidate (without
  `:N`, `--samples`, `--particles` and `--sps-rollouts` or their defaults);
- `SAMPLER` alone (`powermh`, `entropycut`, `multitry`): the sequential sampler;
- `SAMPLER+RULE`: with a PreSTO rule (`bfs`, `predictive`, `spine`, `stream`); `:N` sets
  its budget (else `-N`), `/node` or `/decision` its random inputs (else `--inputs`
  where the rule takes node inputs, decision inputs otherwise: the sequential sampler,
  spine and stream always run on decision inputs, as in `bench`).

Every other parameter (alpha, n, K, seed, ...) comes from the flags given to the command,
so the methods of one evaluation differ only in what their specs say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from presto_tui.errors import InputError
from presto_tui.runtime.core.names import InputMode, PrefetchRule, SamplerName, unknown_choice
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.spec import ParamError, budget_text

ALIASES = {"bon": SamplerName.BESTOFN.value, "smc": SamplerName.POWERSMC.value}
# what `:N` sets for each baseline that takes a count
COUNT_OF = {SamplerName.BESTOFN.value: "samples", SamplerName.POWERSMC.value: "particles",
            SamplerName.SPS.value: "sps_rollouts"}
GRAMMAR = "lowtemp, bon:N, smc:P, sps:M, SAMPLER or SAMPLER+RULE[/INPUTS][:N]"
_SPEC = re.compile(r"^(?P<sampler>[a-z]+)(?:\+(?P<rule>[a-z]+)(?:/(?P<inputs>[a-z]+))?)?(?::(?P<n>[0-9]+))?$")


@dataclass(frozen=True)
class Method:
    label: str  # the spec as written (lower case, no spaces)
    params: SamplerParams
    given: tuple[str, ...]  # the parameters the spec itself names (matching a recorded session checks these)

    @property
    def sampler(self) -> SamplerName:
        return SamplerName.of(self.params.sampler)

    @property
    def presto(self) -> bool:
        return PrefetchRule.of(self.params.prefetch).presto

    def matches(self, params: dict) -> bool:
        """Whether a recorded session's parameters are this method's (on what the spec names)."""
        return all(params.get(k) == getattr(self.params, k) for k in self.given)


def parse_method(spec: str, base: SamplerParams, flag: str = "--methods") -> Method:
    """The method `spec` names, on top of `base` (the command's own sampler flags)."""
    label = spec.strip().lower()
    m = _SPEC.match(label)
    if m is None:
        raise InputError(f"{flag}: cannot read {spec.strip()!r}; a method is {GRAMMAR}")
    name = ALIASES.get(m["sampler"], m["sampler"])
    if name not in SamplerName.names():
        raise InputError(f"{flag}: " + unknown_choice("method", m["sampler"], ("lowtemp", "bon", "smc", "sps",
                                                                                *SamplerName.names())))
    sampler = SamplerName.of(name)
    n = int(m["n"]) if m["n"] is not None else None
    changes: dict = {"sampler": name}
    given = ["sampler", "prefetch"]
    if not sampler.chain:
        if m["rule"] is not None:
            raise InputError(f"{flag}: {label}: {sampler.display} is a baseline, not an MH chain; it takes no "
                             "PreSTO rule")
        changes["prefetch"] = PrefetchRule.NONE.value
        if n is not None:
            if name not in COUNT_OF:
                raise InputError(f"{flag}: {label}: {sampler.display} takes no :N (it draws one sample)")
            changes[COUNT_OF[name]] = n
        given += [COUNT_OF[name]] if name in COUNT_OF else []
    elif m["rule"] is None:
        if n is not None:
            raise InputError(f"{flag}: {label}: a number after an MH sampler is its PreSTO rule's budget; write "
                             f"{name}+RULE:{n} ({name} alone is the sequential sampler)")
        changes.update(prefetch=PrefetchRule.NONE.value, inputs=InputMode.DECISION.value)
    else:
        if m["rule"] not in PrefetchRule.presto_names():
            raise InputError(f"{flag}: {label}: " + unknown_choice("PreSTO rule", m["rule"],
                                                                   PrefetchRule.presto_names()))
        rule = PrefetchRule.of(m["rule"])
        changes["prefetch"] = rule.value
        if m["inputs"] is not None:
            if m["inputs"] not in InputMode.names():
                raise InputError(f"{flag}: {label}: " + unknown_choice("inputs", m["inputs"], InputMode.names()))
            changes["inputs"] = m["inputs"]
            given.append("inputs")
        else:
            changes["inputs"] = base.inputs if rule.node_inputs else InputMode.DECISION.value
        if n is not None:
            changes["budget"] = n
            given.append("budget")
    try:
        params = base.with_(**changes).validate()
    except ParamError as e:
        raise InputError(f"{flag}: {label}: {e.line}") from None
    return Method(label, params, tuple(given))


def parse_methods(text: str, base: SamplerParams, flag: str = "--methods") -> list[Method]:
    """The comma-separated methods of `text`, each once."""
    methods: list[Method] = []
    for spec in (s for s in text.split(",") if s.strip()):
        method = parse_method(spec, base, flag)
        same = next((m for m in methods if m.label == method.label or m.params == method.params), None)
        if same is not None:  # bon:4 and bestofn:4 are one method under two names
            raise InputError(f"{flag}: {method.label} is listed twice" + (
                "" if same.label == method.label else f" (as {same.label}: the same settings)"))
        methods.append(method)
    if not methods:
        raise InputError(f"{flag} needs at least one method: {GRAMMAR}")
    return methods


def describe(params: SamplerParams | dict) -> str:
    """A method's settings in words: 'PowerMH, PreSTO stream N=8', 'best-of-4', 'PowerSMC P=4'."""
    p = params.to_dict() if isinstance(params, SamplerParams) else params
    name = str(p.get("sampler"))
    if name not in SamplerName.names():
        return name
    sampler = SamplerName.of(name)
    if name == SamplerName.BESTOFN:
        return f"best-of-{p.get('samples')}"
    if name == SamplerName.POWERSMC:
        return f"{sampler.display} P={p.get('particles')}"
    if name == SamplerName.SPS:
        return f"{sampler.display} K={p.get('sps_top_k')} M={p.get('sps_rollouts')}"
    if not sampler.chain:
        return sampler.display
    if p.get("prefetch") == PrefetchRule.NONE:
        return f"{sampler.display}, sequential"
    inputs = ", node inputs" if p.get("inputs") == InputMode.NODE else ""
    return f"{sampler.display}, PreSTO {p.get('prefetch')} N={budget_text(p)}{inputs}"


def sequential_of(method: Method, methods: list[Method]) -> Method | None:
    """The listed sequential sampler a PreSTO method runs the law of (same sampler and parameters)."""
    if not method.presto:
        return None
    want = method.params.with_(prefetch=PrefetchRule.NONE.value, inputs=InputMode.DECISION.value,
                               budget=SamplerParams().budget)
    for m in methods:
        if not m.presto and m.params.with_(budget=SamplerParams().budget) == want:
            return m
    return None
