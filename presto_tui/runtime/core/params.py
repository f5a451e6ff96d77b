"""Sampler parameters: the values that fix a chain's law and its prefetch schedule.

Names, types, ranges, defaults and help are declared once in `runtime/core/spec.py`;
`SamplerParams` holds the values and checks how they go together.  Validation happens
before any work so that a bad value costs the person nothing but a one-line message
(`ParamError`, which names the parameter the way the person wrote it).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from presto_tui.runtime.core import registry
from presto_tui.runtime.core.method import MethodKind
from presto_tui.runtime.core.names import InputMode, PrefetchRule, unknown_name
from presto_tui.runtime.core.spec import (
    AUTO_BUDGET,
    BUDGET_POLICIES,
    SPECULATE,
    Limit,
    Naming,
    ParamError,
    budget_text,
    default,
    flag,
    number_text,
    param_table,
    sampler_table,
)

__all__ = ["AUTO_BUDGET", "BENCH_SIZES", "BUDGET_POLICIES", "MULTITRY_TAUS", "PAPER_SETTINGS", "SPECULATE", "Limit",
           "ParamError", "SamplerParams", "budget_text", "flag", "number_text", "params_from", "rule_defaults"]

MULTITRY_TAUS = (0.25, 0.5, 1.0)  # candidate temperatures of MultiTryMH (paper D.4)
ROUND_BUDGET = 8  # -N for the round rules when none is given (stream's is auto)

# The paper's sizes (appendix D.4, table 6): one block of n = 1024, K = 100,
# N_pf = 20 (alpha = 4, tau = 1/alpha are the defaults).  `--paper-settings` selects them.
PAPER_SETTINGS = dict(max_new_tokens=1024, block_size=1024, steps=100, budget=20)
# `bench` and `eval` compare many configurations on every prompt; their default sizes keep a run to minutes.
BENCH_SIZES = dict(max_new_tokens=64, steps=16)


_RULE_DEFAULT: Any = None  # SamplerParams' prefetch and budget: set from the sampler and the rule


def rule_defaults(sampler: str | None, prefetch: str | None, budget: int | None) -> dict[str, Any]:
    """What an unset rule and budget are: a one-shot method has no prefetch rule, an MH chain the
    default one; the streaming rule's budget is auto (the cost policy up to AUTO_BUDGET), a round
    rule's ROUND_BUDGET.  (An unknown sampler is taken for a chain: validation names it.)"""
    chain = registry.kind_of(sampler) in (MethodKind.CHAIN, None)
    rule = prefetch if prefetch is not None else (default("prefetch") if chain else PrefetchRule.NONE.value)
    if budget is None:
        budget = AUTO_BUDGET if rule == PrefetchRule.STREAM else ROUND_BUDGET
    return {"prefetch": rule, "budget": budget}


@dataclass(frozen=True, init=False, eq=False)
class SamplerParams:
    """Everything that fixes a session's law and its prefetch schedule: the core's parameters as
    fields, and every registered method's own (best-of-N's `samples`, PowerSMC's `particles`, a
    plugin's) in `own`, read as attributes all the same (`params.particles`).

    Defaults are sized to give a first answer within about a minute on a 2-core CPU with a small
    model; `PAPER_SETTINGS` are one flag away.  Build it with keyword arguments (the parameters'
    names, as `--help` shows them with dashes); `validate()` checks how they go together.
    """

    sampler: str = default("sampler")
    # None: the rule's default (rule_defaults): the fastest exact rule measured for a chain, none for a one-shot
    prefetch: str = _RULE_DEFAULT
    inputs: str = default("inputs")
    alpha: float = default("alpha")
    tau: float | None = default("tau")  # None: 1/alpha, as in the paper (sec 2, D.4)
    max_new_tokens: int = default("max_new_tokens")  # n
    block_size: int | None = default("block_size")  # B; None: one block, B = n
    steps: int = default("steps")  # K, MH transitions per block
    # N_pf, counted in distinct requests sent to the engine (stream: the most kept live); None: the rule's default
    budget: int = _RULE_DEFAULT
    budget_policy: str = default("budget_policy")  # stream: see BUDGET_POLICIES
    speculate: str = default("speculate")  # stream: see SPECULATE (in-proposal speculation measured slower on 2 cores)
    epsilon: float = default("epsilon")
    seed: int = default("seed")
    # every registered method's own parameters, (name, value) sorted by name, defaults filled in
    own: tuple[tuple[str, Any], ...] = ()

    def __init__(self, **values: Any) -> None:
        table, whole, own_defaults = _layout()
        own = dict(own_defaults)
        for name, value in values.items():
            if name in whole and type(value) is not int:
                value = _whole(value)
            if name in _CORE_NAMES:
                object.__setattr__(self, name, value)
            elif name in own or (name in table and table[name].target.value == "sampler"):
                own[name] = value
            else:
                known = [*_CORE_NAMES, *own]
                raise ParamError(unknown_name("parameter", name, known, "; presto_tui.api.params.SPEC lists them"),
                                 param=str(name))
        for name in _CORE_NAMES:
            if name not in values:
                object.__setattr__(self, name, getattr(SamplerParams, name))
        object.__setattr__(self, "own", tuple(sorted(own.items())))
        if self.prefetch is None or self.budget is None:
            for k, v in rule_defaults(self.sampler, self.prefetch, self.budget).items():
                object.__setattr__(self, k, v)

    def _key(self, seed: bool = True) -> tuple:
        """Every value, in the fields' order (`seed=False`: the seed as None, `validate`'s memory)."""
        return tuple(None if name == "seed" and not seed else getattr(self, name) for name in _FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SamplerParams) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        """The core's values and its method's own (a method's parameters of no use to it are left out)."""
        core = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name != "own")
        m = registry.find(self.sampler)
        mine = ", ".join(f"{k}={v!r}" for k, v in self.own if m is not None and k in m.own)
        return f"{type(self).__name__}({core}{', ' + mine if mine else ''})"

    def __getattr__(self, name: str) -> Any:
        # a method's own parameter (only called for names that are not fields)
        if name.startswith("__"):
            raise AttributeError(name)
        for k, v in object.__getattribute__(self, "own"):
            if k == name:
                return v
        param = param_table().get(name)
        if param is not None and param.target.value == "sampler":  # registered after these were made
            return param.default
        raise AttributeError(f"'SamplerParams' has no parameter {name!r}")

    @property
    def method(self):  # -> Method (typed loosely: core/method.py's class, looked up in the registry)
        """The method these parameters run (`runtime/core/registry.py`); ParamError if none is called so."""
        return registry.method(self.sampler)

    @property
    def proposal_tau(self) -> float:
        return self.tau if self.tau is not None else 1.0 / self.alpha

    @property
    def block(self) -> int:
        return self.block_size if self.block_size is not None else self.max_new_tokens

    @property
    def n_blocks(self) -> int:
        return self.max_new_tokens // self.block

    def validate(self, naming: Naming = flag) -> SamplerParams:
        """Return self, or raise ParamError naming the first bad value, each parameter named by
        `naming` (the command line's flags; the server names its fields).  Parameters found valid are
        remembered (`_VALID`, until a method is registered), but for their seed: every driver validates its
        own, and a population's members are its method's check and its members' drivers again, R + 1 times
        a session, each member with a seed of its own (28% of a tempering session's time on the enumerable
        model).  The checks read the seed only for its range, which is checked every time."""
        try:
            key: tuple | None = (registry.generation, naming, self._key(seed=False))
            if key in _VALID:
                param_table()["seed"].check(self.seed, naming)
                return self
        except TypeError:  # (a value that cannot be hashed: checked every time, and refused below if bad)
            key = None
        self._check(naming)
        if key is not None:
            if len(_VALID) >= VALID_KEPT:
                _VALID.clear()
            _VALID[key] = None
        return self

    def _check(self, naming: Naming) -> None:
        for p in sampler_table():
            value = getattr(self, p.name)
            p.check(value, naming)
            if p.reader is not None and isinstance(value, str):
                p.read(value, naming)  # a list such as --speculate: each item checked
        about = ParamError.about
        method = registry.method(self.sampler)
        rule = PrefetchRule.of(self.prefetch)
        if not method.chain and rule.presto:
            raise about("prefetch", "{sampler} {0} is a one-shot sampler, not an MH chain: it takes no {prefetch} "
                        "rule (use {prefetch} none)", self.sampler, naming=naming)
        if rule.presto and not rule.node_inputs and self.inputs != InputMode.DECISION:
            raise about("inputs", "{prefetch} {0} needs {inputs} decision (its requests are keyed by decision, "
                        "which is what keeps it exact)", self.prefetch, naming=naming)
        tau_limit = param_table()["tau"].limit
        if self.tau is None and tau_limit is not None and not tau_limit.contains(self.proposal_tau):
            raise about("alpha", "{alpha} {0} makes the proposal temperature 1/alpha = {1}, outside {tau}'s range "
                        "{2}; give {tau} too", number_text(self.alpha), f"{self.proposal_tau:.4g}", tau_limit,
                        naming=naming)
        if self.max_new_tokens % self.block:
            raise about("block_size", "{block_size} {0} does not divide {max_new_tokens} {1}", self.block,
                        self.max_new_tokens, naming=naming)
        method.check(self, naming)
        method.check_exact(self, naming)

    def to_dict(self) -> dict:
        """Every parameter by name (as a trace's header and session_start hold them): tau and the block
        size resolved, and what its method resolves of its own (`Method.resolved`: SPS's draws)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "own"}
        d.update(self.own)
        d["tau"] = self.proposal_tau
        d["block_size"] = self.block
        d.update(self.method.resolved(self))
        return d

    def with_(self, **changes: Any) -> SamplerParams:
        """The same parameters but `changes` (of the same class: a public `Params` checks them again)."""
        values = {name: getattr(self, name) for name in _CORE_NAMES}
        values.update(self.own)
        values.update(changes)
        return type(self)(**values)


_FIELDS = tuple(f.name for f in fields(SamplerParams))  # (every value, `_key`'s order)
_CORE_NAMES = tuple(name for name in _FIELDS if name != "own")  # the core's parameters, each a field
_LAYOUT: dict[str, Any] = {}


def _layout() -> tuple[dict[str, Any], frozenset[str], dict[str, Any]]:
    """The parameter table, its whole-number parameters' names and the methods' own parameters' defaults,
    made once per table (a new one whenever a method is registered): every SamplerParams, and every
    `with_` (a population's members, each adaptive barrier), reads them."""
    table = param_table()
    if _LAYOUT.get("table") is not table:
        _LAYOUT.update(table=table, whole=frozenset(name for name, p in table.items() if p.kind is int),
                       own={p.name: p.default for p in sampler_table() if p.name not in _CORE_NAMES})
    return _LAYOUT["table"], _LAYOUT["whole"], _LAYOUT["own"]


VALID_KEPT = 4096  # parameters remembered as valid (then forgotten all at once): a server's or an eval's variety
_VALID: dict[tuple, None] = {}  # (the registry's generation, naming, the parameters but the seed) `validate` passed


def _whole(value: Any) -> Any:
    """A whole-number parameter's value as an int where it is one (3.0 from a JSON body, numpy's int64);
    anything else as it came, for `validate` to refuse by the parameter's name."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    return value


def check_given(params: SamplerParams, given: frozenset[str], naming: Naming = flag) -> None:
    """The parameters a person gave for one session (`given`, by name) all do something: a method's own
    parameter that neither the session's method nor its members' methods read (`--pt-replicas` with
    `--sampler powermh`, `--particles` with `ppt`) is refused, one rule for every method's, and so are
    given values that contradict each other (the method's `check_given`).  ParamError names the first."""
    method = params.method
    readers = {params.sampler}
    if method.population:
        readers |= method.member_samplers(params)
    for p in sampler_table():
        if p.name in given and p.samplers is not None and not p.samplers & readers:
            raise ParamError.about(p.name, "{" + p.name + "} applies to {sampler} {0}, not {1}: drop it, or choose "
                                   "that sampler", " or ".join(sorted(p.samplers)), params.sampler, naming=naming)
    method.check_given(params, given, naming)


def params_from(values: Mapping[str, Any], preset: Mapping[str, Any] | None = None, *, paper: bool = False,
                naming: Naming = flag, strict: bool = False) -> SamplerParams:
    """SamplerParams from values as they arrived (text from a flag or a field, JSON values, or typed;
    None: not given) over `preset` (a command's own sizes) and the spec's defaults, read and checked
    on the one path every front-end uses; ParamError names a parameter as `naming` does.  `strict`: the
    values are one session's, as a person gave them (not a trace's header, nor flags a command shares
    among several samplers): each must apply (`check_given`)."""
    merged = dict(preset or {})
    if paper:
        merged.update(PAPER_SETTINGS)
        if values.get("max_new_tokens") is not None and values.get("block_size") is None:
            merged["block_size"] = None  # one block of the n the person chose
    table = param_table()
    given = {p.name: values[p.name] for p in sampler_table() if values.get(p.name) is not None}
    for name, raw in given.items():
        merged.update(table[name].read(raw, naming))
    params = SamplerParams(**merged).validate(naming)
    if strict:
        check_given(params, frozenset(given), naming)
    return params
