"""The method language of `eval --methods`, `lm-eval --methods`, `eval --frontier` and `stats --compare
PATH@METHOD`: a method with its settings, as a SamplerParams.

    METHOD := NAME[:N][:SET...] | CHAIN[:SET...] | CHAIN+RULE[/INPUTS][:N][:SET...]
    SET    := SYMBOL=VALUE

- `NAME[:N]`: a one-shot method (low temperature, best-of-N, PowerSMC, Scalable Power Sampling, a
  plugin's), by its name or an alias (`bon`, `smc`); `:N` sets its budget axis (best-of-N's
  samples, PowerSMC's particles, SPS's rollouts; without it, the command's flag or its default);
  a method without an axis (low temperature) takes no `:N`;
- `CHAIN` alone (`powermh`, `entropycut`, `multitry`, ...): the sequential sampler;
- `CHAIN+RULE`: with a PreSTO rule (`bfs`, `predictive`, `spine`, `stream`); `:N` sets its
  budget (else `-N`), `/node` or `/decision` its random inputs (else `--inputs` where the rule
  takes node inputs, decision inputs otherwise: the sequential sampler, spine and stream always
  run on decision inputs, as in `bench`).
- `:SYMBOL=VALUE`, any number of them: one of the method's own parameters (or one it reads), by
  its symbol as `stats` shows it or by its name, in any case (`ppt+stream:r=8`: parallel
  tempering with 8 replicas; `rm:p=16`: resample-move with 16 particles; `ppt:pt_family=multitry`),
  or for an MH chain method a chain parameter, by its name (`rm:block_size=2`): what names a
  method's second budget axis in the frontier, whose `@` list gives the first.

The names and their axes come from the method registry (`registry.py`): a plugin's method is
written the same way.  Every other parameter (alpha, n, K, seed, ...) comes from the flags given
to the command, so the methods of one evaluation differ only in what their specs say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from presto_tui.errors import InputError
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.method import Method
from presto_tui.runtime.core.names import InputMode, PrefetchRule, unknown_choice
from presto_tui.runtime.core.params import SamplerParams, rule_defaults
from presto_tui.runtime.core.spec import Group, Param, ParamError

_SPEC = re.compile(r"^(?P<sampler>[a-z][a-z0-9-]*)(?:\+(?P<rule>[a-z]+)(?:/(?P<inputs>[a-z]+))?)?"
                   r"(?::(?P<n>[0-9]+))?(?P<sets>(?::[^:=\s]+=[^:\s]*)*)$")


def grammar() -> str:
    """The language in one line, with the one-shot methods registered now."""
    one_shot = []
    for m in registry.methods():
        if not m.chain:
            word = min((m.name, *m.aliases), key=len)
            one_shot.append(f"{word}:{m.axis.symbol}" if m.axis is not None else word)
    return f"{', '.join(one_shot)}, CHAIN or CHAIN+RULE[/INPUTS][:N], each with :SYMBOL=VALUE of its own parameters"


@dataclass(frozen=True)
class MethodSpec:
    """A method as the language names it."""

    label: str  # the spec as written (lower case, no spaces)
    params: SamplerParams
    given: tuple[str, ...]  # the parameters the spec itself names (matching a recorded session checks these)

    @property
    def method(self) -> Method:
        return registry.method(self.params.sampler)

    @property
    def sampler(self) -> Method:  # the name eval's code reads it by
        return self.method

    @property
    def presto(self) -> bool:
        return PrefetchRule.of(self.params.prefetch).presto

    def matches(self, params: Mapping[str, Any]) -> bool:
        """Whether a recorded session's parameters are this method's (on what the spec names)."""
        return all(params.get(k) == getattr(self.params, k) for k in self.given)


def unknown_method(flag: str, name: str) -> str:
    """The message for a name no method has: each choice once, and one near miss (a name or an alias)
    where there is one."""
    why = registry.missing(name)  # a plugin of that name that failed to load: named, with its error
    if why is not None:
        return f"{flag}: {why}"
    aliases = sorted({a for m in registry.methods() for a in m.aliases})
    return f"{flag}: " + unknown_choice("method", name, registry.names(), also=aliases)


def _reordered(label: str) -> str:
    """A hint where the spec only puts its settings too early (`tailmh:l=2+bfs:4`): they come last."""
    sets = re.findall(r":[^:=+\s]+=[^:+\s]*", label)
    rest = re.sub(r":[^:=+\s]+=[^:+\s]*", "", label)
    fixed = rest + "".join(sets)
    return f"its :SYMBOL=VALUE settings come last ({fixed}); " if sets and _SPEC.match(fixed) else ""


def parse_method(spec: str, base: SamplerParams, flag: str = "--methods", *, budget_given: bool = True) -> MethodSpec:
    """The method `spec` names, on top of `base` (the command's own sampler flags).  `budget_given`:
    whether `base.budget` is the command's -N; where it is not, a PreSTO rule without `:N` runs its own
    default budget (`rule_defaults`: auto for stream, 8 for the round rules), as `run` does and as
    `-N`'s help says."""
    label = spec.strip().lower()
    m = _SPEC.match(label)
    if m is None:
        raise InputError(f"{flag}: cannot read {spec.strip()!r}; {_reordered(label)}a method is {grammar()}")
    method = registry.installed(m["sampler"])
    if method is None:
        raise InputError(unknown_method(flag, m["sampler"]))
    n = int(m["n"]) if m["n"] is not None else None
    changes: dict[str, Any] = {"sampler": method.name}
    given = ["sampler", "prefetch"]
    if not method.chain:
        if m["rule"] is not None:
            raise InputError(f"{flag}: {label}: {method.display} is a one-shot sampler, not an MH chain; it takes "
                             "no PreSTO rule")
        changes["prefetch"] = PrefetchRule.NONE.value
        if method.axis is not None:
            given.append(method.axis.param)
            if n is not None:
                changes[method.axis.param] = n
        elif n is not None:
            raise InputError(f"{flag}: {label}: {method.display} takes no :N (it has no budget to set)")
    elif m["rule"] is None:
        if n is not None:
            own = _own_count(method, n)
            word = m["sampler"]  # as written (an alias stays one)
            if own is not None and own.symbol:  # `ppt:4` read like `smc:4`: its own count, by its symbol
                raise InputError(f"{flag}: {label}: {method.display}'s own parameters go by symbol: write "
                                 f"{word}:{own.symbol.lower()}={n} for {own.name} {n}; a number after an MH sampler "
                                 f"is its PreSTO rule's budget ({word}+RULE:{n})")
            raise InputError(f"{flag}: {label}: a number after an MH sampler is its PreSTO rule's budget; write "
                             f"{word}+RULE:{n} ({word} alone is the sequential sampler)")
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
        elif not budget_given:
            changes["budget"] = rule_defaults(method.name, rule.value, None)["budget"]
    for name, value in _settings(method, m["sets"], flag, label).items():
        if name in changes:  # (`:N` set it, or the spec's own words did)
            raise InputError(f"{flag}: {label}: {name} is set twice")
        changes[name] = value
        if name not in given:
            given.append(name)
    try:
        params = base.with_(**changes).validate()
    except ParamError as e:
        raise InputError(f"{flag}: {label}: {e.line}") from None
    return MethodSpec(label, params, tuple(given))


def _own_count(method: Method, n: int) -> Param | None:
    """The symbol (lower case) of the first whole-number parameter of its own that `n` is a value of
    (parallel tempering's replicas `r`, resample-move's particles `p`): what `ppt:4` most likely meant,
    read like `smc:4`; None where it has none."""
    for p in method.own_table or method.params:
        if p.kind is int and p.symbol and (p.limit is None or p.limit.contains(n)):
            return p
    return None


def _settings(method: Method, text: str, flag: str, label: str) -> dict[str, Any]:
    """The method's own parameters a spec's `:SYMBOL=VALUE` parts set, read as a flag's value is."""
    from presto_tui.runtime.core.spec import sampler_table

    out: dict[str, Any] = {}
    own = method.own_table or method.params
    for part in (p for p in text.split(":") if p):
        key, _, raw = part.partition("=")
        param = next((p for p in own if key in (p.name, (p.symbol or "").lower())), None)
        if param is None and method.chain:  # an MH chain's parameter (its blocks, ...), by its name
            param = next((p for p in sampler_table() if p.name == key and p.group is Group.CHAIN), None)
        if param is None:
            names = [f"{(p.symbol or p.name).lower()}" for p in own]
            raise InputError(f"{flag}: {label}: {method.display} has no parameter {key!r}"
                             + (f" (its own: {', '.join(names)})" if names else ""))
        try:
            values = param.read(raw)
        except ParamError as e:
            raise InputError(f"{flag}: {label}: {e.line}") from None
        for name in values:
            if name in out:
                raise InputError(f"{flag}: {label}: {name} is set twice")
        out.update(values)
    return out


def split_methods(text: str) -> list[str]:
    """`text`'s comma-separated methods, a value that holds commas kept whole: a part after a `:SYMBOL=VALUE`
    that is no method's name and holds no `:` or `+` goes on that value (`ppt:pt_ladder=1,2,4,powermh` is two
    methods, the ladder 1,2,4)."""
    out: list[str] = []
    for part in text.split(","):
        word = part.strip().lower()
        continues = (out and "=" in out[-1].rsplit(":", 1)[-1] and word and not any(c in word for c in ":+")
                     and registry.installed(word) is None and registry.missing(word) is None)
        if continues:
            out[-1] += "," + part
        else:
            out.append(part)
    return [s for s in out if s.strip()]


def methods_help(what: str = "Comma-separated methods") -> str:
    """The method language as `--methods`' help says it, from the methods registered now."""
    one_shot, chains = [], []
    for m in registry.methods():
        word = min((m.name, *m.aliases), key=len)
        if m.chain:
            chains.append(m.name)
        elif m.axis is not None:
            one_shot.append(f"{word}:{m.axis.symbol} ({m.display}, {m.axis.symbol} its {m.axis.param})")
        else:
            one_shot.append(f"{word} ({m.display})")
    rules = ", ".join(PrefetchRule.presto_names())
    return (f"{what}, each a one-shot sampler, {', '.join(one_shot)}; an MH chain alone, the sequential sampler: "
            f"{', '.join(chains)}; or CHAIN+RULE[/INPUTS][:N], with a PreSTO rule ({rules}), N its budget, INPUTS "
            "node or decision. Any of them takes :SYMBOL=VALUE settings of its own parameters, by symbol or name "
            "(ppt+stream:r=8, rm:p=16, ppt:pt_ladder=1,2,4: a value may hold commas)")


def frontier_axes() -> str:
    """Each method's budget axis, as `--frontier`'s help says it: 'K (powermh, ...), N (bestofn, mbr), ...'."""
    axes: dict[str, list[str]] = {}
    bare = []
    for m in registry.methods():
        if m.axis is None:
            bare.append(m.name)
        else:
            axes.setdefault(f"{m.axis.symbol} ({m.axis.param})", []).append(min((m.name, *m.aliases), key=len))
    return "; ".join(f"{axis} of {', '.join(names)}" for axis, names in axes.items()) + (
        f"; {', '.join(bare)} alone" if bare else "")


def parse_methods(text: str, base: SamplerParams, flag: str = "--methods", *,
                  budget_given: bool = True) -> list[MethodSpec]:
    """The comma-separated methods of `text`, each once (a value holding commas kept whole: `split_methods`;
    `budget_given`: as `parse_method` reads it)."""
    methods: list[MethodSpec] = []
    for spec in split_methods(text):
        method = parse_method(spec, base, flag, budget_given=budget_given)
        same = next((m for m in methods if m.label == method.label or m.params == method.params), None)
        if same is not None:  # bon:4 and bestofn:4 are one method under two names
            raise InputError(f"{flag}: {method.label} is listed twice" + (
                "" if same.label == method.label else f" (as {same.label}: the same settings)"))
        methods.append(method)
    if not methods:
        raise InputError(f"{flag} needs at least one method: {grammar()}")
    return methods


def describe(params: SamplerParams | Mapping[str, Any]) -> str:
    """A method's settings in words (its method's `describe`): 'PowerMH, PreSTO stream N=8', 'best-of-4'."""
    p = params.to_dict() if isinstance(params, SamplerParams) else params
    m = registry.find(p.get("sampler"))
    return str(p.get("sampler")) if m is None else m.describe(p)


def sequential_of(method: MethodSpec, methods: list[MethodSpec]) -> MethodSpec | None:
    """The listed sequential sampler a PreSTO method runs the law of (same sampler and parameters)."""
    if not method.presto:
        return None
    want = method.params.with_(prefetch=PrefetchRule.NONE.value, inputs=InputMode.DECISION.value,
                               budget=SamplerParams().budget)
    for m in methods:
        if not m.presto and m.params.with_(budget=SamplerParams().budget) == want:
            return m
    return None
