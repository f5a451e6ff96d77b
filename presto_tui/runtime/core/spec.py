"""Every parameter a person can set, declared once: the one owner of its name, type, range,
default, help and what it applies to.

Everything else is derived from `SPEC`:

- `SamplerParams` and `EngineOptions` take their defaults from it (`default`);
- each command's options (`cli/params.py`: a command names the groups it takes);
- the server's request fields, their validation and its OpenAPI schema (`serve/protocol.py`);
- `chat --connect`'s request body, the settings dialog's fields, the compare view's and `stats`'
  notion of which parameters a session's sampler reads, lm-eval's model arguments;
- the docs' parameter table.

One validation path: a value typed anywhere (a flag, a request field, a settings field, a
model argument) is read by `Param.read` and checked by `Param.check`; every message names
the parameter the way the person wrote it (`Naming`), so `--max-new-tokens` on the command
line is `max_tokens` in a request and "new tokens n" in the settings dialog, with the same
words after it.

Adding a parameter is one entry here (and its field in `SamplerParams` or `EngineOptions`);
`tests/test_spec.py` walks every entry into every front-end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from enum import Enum
from typing import Any

from presto_tui.errors import InputError
from presto_tui.runtime.core.names import BackendName, Choice, InputMode, PrefetchRule, SamplerName, unknown_choice

# -- ranges ----------------------------------------------------------------------------------


SHOWN_CHARS = 40  # a message repeats at most this much of a bad value (a request body may hold megabytes)


def number_text(value: float) -> str:
    """A value as a person wrote it: -1 rather than -1.0, 1e+308 as Python writes it; a whole number
    of more than 20 digits by its length alone, so that a message never echoes 31 digits back."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"a {len(str(abs(value)))}-digit number"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def raw_text(raw: object, limit: int = SHOWN_CHARS) -> str:
    """Text a person typed, as a message repeats it: quoted, cut to `limit` characters."""
    text = repr(str(raw))
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Limit:
    """A documented range of a number: [lo, hi], or (lo, hi] with `lo_open`, or no upper bound
    with hi = inf; whole numbers only with `integer`.  Its text and its messages are the same
    wherever a range is checked."""

    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{self._bound(self.lo)}, {self._bound(self.hi)}]"

    def _bound(self, x: float) -> str:
        if not self.integer:
            return f"{x:g}"
        n = int(x)
        if n == 2**63 - 1:
            return "2^63-1"
        if n >= 10**6 and str(n).rstrip("0") == "1":
            return f"10^{len(str(n)) - 1}"
        return str(n)

    @property
    def where(self) -> str:
        """'in [1, 256]', or '>= 1' without an upper bound."""
        if math.isinf(self.hi):
            return f"{'>' if self.lo_open else '>='} {self._bound(self.lo)}"
        return f"in {self}"

    @property
    def kind(self) -> str:
        return "a whole number" if self.integer else "a number"

    def contains(self, value: float) -> bool:
        return (self.lo < value if self.lo_open else self.lo <= value) and value <= self.hi

    def message(self, flag: str, value: float, typed: object = None) -> str | None:
        """What is wrong with `value` (None: nothing).  `typed`: the text the person wrote, named
        in the message instead of the number it became (1e309, not inf)."""
        shown = number_text(value) if typed is None else repr(str(typed))
        if isinstance(value, float) and not math.isfinite(value):
            return f"{flag} must be a finite number {self.where}, got {shown}"
        if not self.contains(value):
            verb = "must be" if math.isinf(self.hi) else "must lie"
            return f"{flag} {verb} {self.where}, got {shown}"
        return None

    def check(self, flag: str, value: float, typed: object = None) -> None:
        """Raise ParamError unless `value` is finite and within the range."""
        message = self.message(flag, value, typed)
        if message is not None:
            raise ParamError(message)

    def unparsable(self, flag: str, raw: str) -> str:
        """The message for text that is not a number of this kind at all."""
        return f"{flag} must be {self.kind} {self.where}, got {raw_text(raw)}"


# -- errors ----------------------------------------------------------------------------------

Naming = Callable[[str], str]  # a parameter's name -> how the person wrote it


class ParamError(InputError):
    """A parameter value that cannot be sampled with; the message is one line.

    `param` is the parameter at fault (None when the message is about no single one).  A
    message written with `{name}` fields (`ParamError.about`) is said again with another
    naming by `named`: the server names its request fields, the settings dialog its labels."""

    def __init__(self, message: str, param: str | None = None, template: str | None = None,
                 values: tuple = ()) -> None:
        super().__init__(message)
        self.param = param
        self.template = template
        self.values = values

    @classmethod
    def about(cls, param: str, template: str, *values: object, naming: Naming | None = None) -> ParamError:
        """An error about `param`: `template` names parameters as {name} fields ({alpha}, {tau}) and
        values as positional fields, rendered with `naming` (the command line's flags by default)."""
        err = cls("", param, template, values)
        err.args = (err.render(naming or flag),)
        return err

    def render(self, naming: Naming) -> str:
        if self.template is None:
            return str(self)
        return self.template.format(*self.values, **{p: naming(p) for p in PARAMS})

    def named(self, naming: Naming) -> ParamError:
        """The same error, its parameters named by `naming`."""
        if self.template is None:
            return self
        return ParamError.about(self.param or "", self.template, *self.values, naming=naming)


# -- the parameters --------------------------------------------------------------------------


class Group(Enum):
    """What a parameter is about; a command takes whole groups (cli/params.py)."""

    METHOD = "method"  # which sampler and prefetch rule, and the rule's budget
    LAW = "law"  # what every sampler reads: the target, the response, the seed
    CHAIN = "chain"  # an MH chain's: blocks, steps, epsilon, inputs, speculation
    OWN = "own"  # one sampler's own (EntropyCut's beta, best-of-N's samples...)
    ENGINE = "engine"

    @property
    def panel(self) -> str:
        """The --help panel its flags show under."""
        return "Engine" if self is Group.ENGINE else "Sampler"


class Target(Enum):
    """Which object a value goes to."""

    SAMPLER = "sampler"  # a SamplerParams field
    ENGINE = "engine"  # an EngineOptions field (or the backend itself)


@dataclass(frozen=True)
class Param:
    """One parameter.  `help` is a sentence without its range or default: those are added
    from `limit`/`choices` and `default`/`default_text` wherever help is shown."""

    name: str
    kind: type  # int, float, str or bool
    default: Any
    help: str
    group: Group
    label: str  # short, for the settings dialog and tables
    limit: Limit | None = None
    choices: type[Choice] | tuple[str, ...] | None = None
    samplers: frozenset[str] | None = None  # None: every sampler
    rules: frozenset[str] | None = None  # None: every prefetch rule (incl. none)
    optional: bool = False  # None is a value (tau: 1/alpha; block size: n)
    default_text: str | None = None  # how the default reads when it is not a plain value
    flag: str | None = None  # the long flag, if not --name-with-dashes; "" for none (set through another)
    short: str | None = None
    metavar: str | None = None
    field: str | None = None  # the request field, if not the name; "" for none
    aliases: tuple[str, ...] = ()  # other request fields accepted for it
    negative: str | None = None  # a bool's --no- flag
    reader: Callable[[str, str], dict[str, Any]] | None = None  # text -> values (budget: N|auto|fill:N)
    settings: bool = True  # a field of the settings dialog (sampler parameters)
    envvar: str | None = None  # the command line also reads it from this environment variable
    symbol: str | None = None  # how `stats` names a sampler's own parameter beside its name (β=4); "" value only
    extra: dict[str, Any] = dataclass_field(default_factory=dict)

    @property
    def target(self) -> Target:
        return Target.ENGINE if self.group is Group.ENGINE else Target.SAMPLER

    @property
    def cli_flag(self) -> str:
        return self.flag if self.flag is not None else "--" + self.name.replace("_", "-")

    @property
    def request_field(self) -> str:
        return self.field if self.field is not None else self.name

    @property
    def choice_names(self) -> tuple[str, ...] | None:
        if self.choices is None:
            return None
        if isinstance(self.choices, tuple):
            return self.choices
        return self.choices.names()

    def applies(self, params: Mapping[str, Any]) -> bool:
        """Whether a session with these parameters (a SamplerParams dict) reads this one."""
        sampler, rule = params.get("sampler"), params.get("prefetch")
        if self.samplers is not None and sampler not in self.samplers:
            return False
        return self.rules is None or rule in self.rules

    # -- one validation path -----------------------------------------------------------------
    def _error(self, message: str, naming: Naming | None) -> ParamError:
        """A ParamError whose message was written with this parameter as `{name}` (values escaped)."""
        return ParamError.about(self.name, message, naming=naming)

    def read(self, raw: Any, naming: Naming | None = None) -> dict[str, Any]:
        """A value as it arrived (text from a flag or a field, or a JSON value) -> {name: value}
        (a reader may set more than one: the budget sets its policy).  ParamError names it."""
        me = "{" + self.name + "}"
        if raw is None:
            return {self.name: None}
        if isinstance(raw, Choice):
            raw = raw.value
        if self.reader is not None:
            if isinstance(raw, bool) or not isinstance(raw, (int, str)):
                raise self._error(f"{me} {self.reader_hint()}, got {_esc(raw_text(raw))}", naming)
            try:
                return self.reader("\\0", str(raw))
            except ParamError as e:
                raise self._error(_esc(str(e)).replace("\\0", me), naming) from None
        if self.kind is bool:
            if isinstance(raw, bool):
                return {self.name: raw}
            text = str(raw).strip().lower()
            if text in ("true", "1", "yes", "on"):
                return {self.name: True}
            if text in ("false", "0", "no", "off"):
                return {self.name: False}
            raise self._error(f"{me} should be true or false, got {_esc(raw_text(raw))}", naming)
        if self.kind is str:
            if not isinstance(raw, str):
                raise self._error(f"{me} should be a name, got {_esc(raw_text(raw))}", naming)
            value = raw.strip()
            if self.optional and value == "":
                return {self.name: None}
            self.check(value, naming)
            return {self.name: value}
        # a number
        limit = self.limit or Limit(-math.inf, math.inf, integer=self.kind is int)
        if isinstance(raw, str) and self.optional and raw.strip() == "":
            return {self.name: None}
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise self._error(_esc(limit.unparsable("\0", str(raw))).replace("\0", me), naming)
        try:
            number = whole_number(raw) if limit.integer else float(raw)
        except (ValueError, OverflowError):
            raise self._error(_esc(limit.unparsable("\0", str(raw))).replace("\0", me), naming) from None
        # what the person typed where the number it became says less (1e309, not inf)
        typed = raw.strip()[:SHOWN_CHARS] if isinstance(raw, str) and isinstance(number, float) \
            and not math.isfinite(number) else None
        message = limit.message("\0", number, typed=typed)
        if message is not None:
            raise self._error(_esc(message).replace("\0", me), naming)
        return {self.name: number}

    def reader_hint(self) -> str:
        return str(self.extra.get("hint", "has a form of its own"))

    def check(self, value: Any, naming: Naming | None = None) -> None:
        """Raise ParamError unless `value` (already typed) is allowed."""
        me = "{" + self.name + "}"
        if value is None:
            if not self.optional and self.default is not None:
                raise self._error(f"{me} needs a value", naming)
            return
        choices = self.choice_names
        if choices is not None and value not in choices:
            raise self._error(_esc(unknown_choice("\0", value, choices)).replace("\0", me), naming)
        if self.limit is not None and not isinstance(value, str):
            message = self.limit.message("\0", value)
            if message is not None:
                raise self._error(_esc(message).replace("\0", me), naming)

    def help_text(self, default: Any = None) -> str:
        """The help with its choices or range and its default, as --help and the docs show it."""
        text = self.help.rstrip(".")
        if self.choices is not None and isinstance(self.choices, type):
            items = [f"{c.value} ({c.help})" for c in self.choices]
            text += ": " + (", ".join(items[:-1]) + f" or {items[-1]}" if len(items) > 1 else items[0])
        elif self.choices is not None:
            text += f": {', '.join(self.choices[:-1])} or {self.choices[-1]}"
        if self.limit is not None and self.reader is None:
            text += f", {self.limit.where}"
        shown = default if default is not None else self.default_shown
        return f"{text} [default: {shown}]." if shown != "" else text + "."

    @property
    def default_shown(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if self.default is None:
            return ""
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        return number_text(self.default) if isinstance(self.default, (int, float)) else str(self.default)


def _esc(text: str) -> str:
    """Text from outside, safe inside a message template (its braces are not fields)."""
    return text.replace("{", "{{").replace("}", "}}")


def whole_number(value: int | float | str) -> int:
    """A whole number as a person or a JSON body gives it: 3, 3.0, "3" (not "3.0", not 3.5: ValueError)."""
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise ValueError(value)
        return int(value)
    return int(value.strip())  # as the command line reads a whole number: "4.0" is not one


def flag(name: str) -> str:
    """The command-line flag of a parameter (the CLI's naming)."""
    p = PARAMS.get(name)
    return p.cli_flag if p is not None and p.cli_flag else "--" + name.replace("_", "-")


def request_field(name: str) -> str:
    """The request field of a parameter (the server's naming)."""
    p = PARAMS.get(name)
    return p.request_field if p is not None and p.request_field else name


def label(name: str) -> str:
    """The settings dialog's label of a parameter (its naming)."""
    p = PARAMS.get(name)
    return p.label if p is not None else name


# -- the budget: N, auto, cost:N or fill:N -------------------------------------------------------

# The streaming rule's budget: `shared` (the default) keeps the requests whose chance of being used
# pays for what they add to every engine step, the engine's slots shared by every chain on it (N is a
# cap); `cost` keeps as many as make the chain's own critical path shortest (N is a cap); `fill` keeps
# N requests live whatever they cost.
BUDGET_POLICIES = ("shared", "cost", "fill")
AUTO_BUDGET = 64  # `-N auto`: the default policy with this cap
BUDGET_LIMIT = Limit(1, 4096, integer=True)


def read_budget(name: str, text: str) -> dict[str, Any]:
    """`-N`: N (the shared policy, N at most), auto (the shared policy up to AUTO_BUDGET), cost:N or cost:auto
    (the cost policy, one chain's own width), or fill:N."""
    raw = text.strip()
    policy = BUDGET_POLICIES[0]
    for other in BUDGET_POLICIES[1:]:
        if raw.startswith(other + ":"):
            raw, policy = raw[len(other) + 1:], other
            break
    if raw == "auto" and policy != "fill":
        return {"budget": AUTO_BUDGET, "budget_policy": policy}
    if not raw.isascii() or not raw.isdigit():
        raise ParamError(f"{name} must be a whole number {BUDGET_LIMIT.where}, auto, cost:N or fill:N, got "
                         f"{raw_text(text)}", "budget")
    n = int(raw)
    try:
        BUDGET_LIMIT.check(name, n)
    except ParamError as e:
        raise ParamError(str(e), "budget") from None
    return {"budget": n, "budget_policy": policy}


def budget_text(p: Mapping[str, Any]) -> str:
    """The budget as `-N` writes it, from a params dict: auto or a cap (the streaming rule's shared policy),
    cost:auto or cost:N (its cost policy), fill:N (it keeps N live); N for the round rules."""
    b = p.get("budget")
    if p.get("prefetch") == PrefetchRule.STREAM:
        policy = p.get("budget_policy", BUDGET_POLICIES[0])
        size = "auto" if b == AUTO_BUDGET and policy != "fill" else str(b)
        return size if policy == BUDGET_POLICIES[0] else f"{policy}:{size}"
    return str(b)


# What the streaming rule may speculate beyond the walker's state: `proposal` (requests cut inside
# a proposal still decoding), `block` (the next block's extension) and `extension` (a block's first
# proposals while its own extension decodes); `none` for none of them.
SPECULATE = ("proposal", "block", "extension")


def read_speculate(name: str, text: str) -> dict[str, Any]:
    value = text.strip()
    if value != "none" and any(s not in SPECULATE for s in value.split(",")):
        raise ParamError(f"{name} takes none or a comma list of {', '.join(SPECULATE)}, got {raw_text(text)}",
                         "speculate")
    return {"speculate": value}


BON_RANKS = ("logq", "logp")  # best-of-N keeps the highest sum of log q_tau (the paper's) or of log p0
DTYPES = ("auto", "float32", "bfloat16", "float16")
EXECUTORS = ("uni", "mp", "ray")

_CHAINS = frozenset(SamplerName.chain_names())
_PRESTO = frozenset(PrefetchRule.presto_names())
_STREAM = frozenset({PrefetchRule.STREAM.value})


def _only(*samplers: SamplerName) -> frozenset[str]:
    return frozenset(s.value for s in samplers)


# The order is the order of --help, the settings dialog and the docs' table.
SPEC: tuple[Param, ...] = (
    # -- which method ------------------------------------------------------------------------
    Param("sampler", str, SamplerName.POWERMH.value, "The method that draws the response", Group.METHOD,
          "sampler", choices=SamplerName, metavar="NAME"),
    Param("prefetch", str, PrefetchRule.STREAM.value,
          "The prefetch rule (PreSTO's; none is the sequential sampler). With decision inputs bfs and predictive plan "
          "the same requests as each other; their allocations differ only with --inputs node", Group.METHOD,
          "rule", choices=PrefetchRule, samplers=_CHAINS, metavar="NAME"),
    Param("budget", int, AUTO_BUDGET,
          "Prefetch budget N: distinct requests per model call for the round rules. For stream, the most requests "
          "kept live, each only while its chance of being used pays for what it adds to every engine step, the "
          "engine's slots shared by every chain on it (the step cost is learned as it runs); auto is that with up "
          f"to {AUTO_BUDGET}; cost:N (or cost:auto) as many as make the chain's own path shortest, as if alone; "
          f"fill:N keeps N live whatever they cost; N {BUDGET_LIMIT.where}", Group.METHOD,
          "budget N (N, auto, cost:N or fill:N)",
          limit=BUDGET_LIMIT, samplers=_CHAINS, rules=_PRESTO, short="-N", metavar="N|auto|cost:N|fill:N",
          reader=read_budget,
          default_text="auto for stream, 8 for the round rules",
          extra={"hint": "must be a whole number, auto, cost:N or fill:N", "round_default": 8}),
    Param("budget_policy", str, "shared", "How the streaming rule spends its budget (set through --budget)",
          Group.METHOD, "budget policy", choices=BUDGET_POLICIES, samplers=_CHAINS, rules=_STREAM, flag="", field="",
          settings=False),
    # -- every sampler -----------------------------------------------------------------------
    Param("alpha", float, 4.0, "Power exponent: the target is p0^alpha", Group.LAW, "alpha",
          limit=Limit(0, 1000, lo_open=True)),
    Param("tau", float, None, "Proposal temperature (the baselines sample at it too)", Group.LAW,
          "tau (empty: 1/alpha)", limit=Limit(1e-4, 100), optional=True, default_text="1/alpha"),
    Param("max_new_tokens", int, 96, "Response length n (fixed for the MH chains: EOS does not stop them)",
          Group.LAW, "new tokens n", limit=Limit(1, 65536, integer=True), short="-n", field="max_tokens",
          aliases=("max_completion_tokens",)),
    Param("seed", int, 0, "Session seed; the same seed gives the same response", Group.LAW, "seed",
          limit=Limit(0, 2**63 - 1, integer=True)),
    # -- the MH chains -----------------------------------------------------------------------
    Param("inputs", str, InputMode.DECISION.value, "The decisions' random inputs", Group.CHAIN, "inputs",
          choices=InputMode, samplers=_CHAINS, metavar="NAME"),
    Param("block_size", int, None, "Block size B, must divide n", Group.CHAIN, "block size B (empty: n)",
          limit=Limit(1, 65536, integer=True), samplers=_CHAINS, optional=True, short="-B",
          default_text="n, one block"),
    Param("steps", int, 24, "MH transitions per block K", Group.CHAIN, "steps K per block",
          limit=Limit(1, 1_000_000, integer=True), samplers=_CHAINS, short="-K"),
    Param("epsilon", float, 0.01, "Epsilon of epsilon-certainty: certain accept if A >= 1-eps, certain reject "
          "if A <= eps", Group.CHAIN, "epsilon", limit=Limit(0, 0.5), samplers=_CHAINS),
    Param("speculate", str, "proposal,block,extension", "Stream: what to speculate beyond the chain's state, a "
          "comma list of proposal (requests cut inside a proposal still decoding), block (the next block's "
          "extension) and extension (a block's first proposals while its own extension decodes), or none; what "
          "a sampler cannot use is left out (EntropyCut: proposal and extension; MultiTryMH: proposal)",
          Group.CHAIN, "speculate (proposal,block,extension / none)", samplers=_CHAINS, rules=_STREAM,
          metavar="LIST", reader=read_speculate,
          extra={"hint": "takes none or a comma list of proposal, block, extension"}),
    # -- one sampler's own -------------------------------------------------------------------
    Param("beta", float, 4.0, "EntropyCut: exponent of the entropy-jump cut law", Group.OWN, "beta (EntropyCut)",
          limit=Limit(0, 64), samplers=_only(SamplerName.ENTROPYCUT), symbol="β"),
    Param("cut_mix", float, 0.1, "EntropyCut: share of cuts drawn uniformly over every position; > 0 lets the "
          "chain resample the first token (the published law, 0, never does)", Group.OWN, "cut_mix (EntropyCut)",
          limit=Limit(0, 1), samplers=_only(SamplerName.ENTROPYCUT), symbol="mix"),
    Param("tries", int, 4, "MultiTryMH: candidates per transition", Group.OWN, "tries (MultiTryMH)",
          limit=Limit(1, 64, integer=True), samplers=_only(SamplerName.MULTITRY), symbol="M"),
    Param("samples", int, 8, "Best-of-N: samples N, each at temperature tau", Group.OWN, "samples N (best-of-N)",
          limit=Limit(1, 4096, integer=True), samplers=_only(SamplerName.BESTOFN), symbol="N"),
    Param("bon_rank", str, "logq", "Best-of-N keeps the sample with the highest sum of log q_tau (its own "
          "sampling distribution, the paper's choice) or of log p0", Group.OWN, "rank by (logq/logp) (best-of-N)",
          choices=BON_RANKS, samplers=_only(SamplerName.BESTOFN), symbol="", flag="--rank", field="rank",
          metavar="logq|logp"),
    Param("particles", int, 8, "PowerSMC: particles P", Group.OWN, "particles P (PowerSMC)",
          limit=Limit(1, 4096, integer=True), samplers=_only(SamplerName.POWERSMC), symbol="P"),
    Param("smc_block", int, 128, "PowerSMC: tokens a particle grows between resampling steps", Group.OWN,
          "tokens per block (PowerSMC)", limit=Limit(1, 65536, integer=True), samplers=_only(SamplerName.POWERSMC),
          symbol="B"),
    Param("smc_ramp", int, 400, "PowerSMC: the exponent rises from 1 to alpha over this many tokens (at most n)",
          Group.OWN, "ramp: tokens to reach alpha (PowerSMC)", limit=Limit(0, 65536, integer=True),
          samplers=_only(SamplerName.POWERSMC), symbol="R"),
    # Scalable Power Sampling (Ji et al. 2026; runtime/samplers/sps.py): the paper ran K = M = 8 with chunks of
    # B = 192 of 3072 tokens (its table 4); these defaults are sized for a CPU and n = 96
    Param("sps_top_k", int, 4, "SPS: candidate chunks per step K, the most likely distinct ones among the draws",
          Group.OWN, "candidates K (SPS)", limit=Limit(1, 256, integer=True), samplers=_only(SamplerName.SPS),
          symbol="K"),
    Param("sps_draws", int, None, "SPS: chunks drawn from q_tau per step L, the candidates' pool", Group.OWN,
          "draws L (SPS; empty: K)", limit=Limit(1, 4096, integer=True), samplers=_only(SamplerName.SPS),
          optional=True, default_text="--sps-top-k", symbol="L"),
    Param("sps_rollouts", int, 4, "SPS: rollouts per candidate M, its future's weight estimated from them",
          Group.OWN, "rollouts M (SPS)", limit=Limit(1, 4096, integer=True), samplers=_only(SamplerName.SPS),
          symbol="M"),
    Param("sps_horizon", int, 0, "SPS: tokens per rollout H; 0 rolls out to the end of the response", Group.OWN,
          "rollout tokens H (SPS; 0: to the end)", limit=Limit(0, 65536, integer=True),
          samplers=_only(SamplerName.SPS), symbol="H", extra={"shown": {0: "end"}}),
    Param("sps_chunk", int, 16, "SPS: tokens per step B (1: token by token)", Group.OWN, "chunk B (SPS)",
          limit=Limit(1, 65536, integer=True), samplers=_only(SamplerName.SPS), symbol="B"),
    Param("sps_jackknife", bool, True, "SPS: estimate each step's conditional with the jackknife (bias O(1/M^2)), "
          "or plug the rollouts' mean in (bias O(1/M))", Group.OWN, "jackknife (SPS: true/false)",
          samplers=_only(SamplerName.SPS), negative="--no-sps-jackknife", symbol="jackknife"),
    # -- the engine --------------------------------------------------------------------------
    Param("backend", str, None, "Engine", Group.ENGINE, "backend", choices=BackendName, metavar="NAME",
          default_text="vllm where installed, else transformers", settings=False, envvar="PRESTO_TUI_BACKEND"),
    Param("model", str, None, "smollm2-135m (the embedded default), a local Hugging Face folder, a .gguf file, or "
          "a Hugging Face hub id (org/name, from the local Hugging Face cache; downloaded where a network allows)",
          Group.ENGINE, "model", default_text="smollm2-135m", metavar="MODEL", settings=False),
    Param("chat_template", bool, True, "Wrap prompts in the model's chat template", Group.ENGINE, "chat template",
          negative="--no-chat-template", settings=False),
    Param("dtype", str, None, "Weights' data type", Group.ENGINE, "dtype", choices=DTYPES,
          default_text="float32 on CPU, the model's on GPU", settings=False),
    Param("max_model_len", int, None, "vLLM: context length to reserve", Group.ENGINE, "max model length",
          limit=Limit(1, 10**7, integer=True), default_text="the model's", settings=False),
    Param("gpu_memory_utilization", float, None, "vLLM on GPU: memory fraction", Group.ENGINE, "GPU memory share",
          limit=Limit(0, 1, lo_open=True), default_text="vLLM's", settings=False),
    Param("tensor_parallel_size", int, 1, "vLLM: GPUs to shard the model over", Group.ENGINE, "tensor parallel",
          limit=Limit(1, 1024, integer=True), settings=False),
    Param("pipeline_parallel_size", int, 1, "vLLM: pipeline stages (GPUs or nodes) to split the model over",
          Group.ENGINE, "pipeline parallel", limit=Limit(1, 1024, integer=True), settings=False),
    Param("distributed_executor_backend", str, None, "vLLM: uni (one process), mp (worker processes) or ray (a Ray "
          "cluster, several nodes)", Group.ENGINE, "executor", choices=EXECUTORS,
          default_text="uni, mp with tensor or pipeline parallelism", settings=False),
    Param("enforce_eager", bool, None, "vLLM: skip graph capture", Group.ENGINE, "eager",
          negative="--no-enforce-eager", default_text="eager on CPU", settings=False),
    Param("threads", int, None, "CPU threads for the engine", Group.ENGINE, "threads",
          limit=Limit(1, 4096, integer=True), default_text="all cores; 1 is faster on a busy machine", settings=False),
    Param("kv_cache_gib", float, None, "vLLM on CPU: KV-cache size in GiB", Group.ENGINE, "KV cache GiB",
          limit=Limit(0, 1e6, lo_open=True), default_text="1", settings=False),
    Param("synthetic_cost", float, None, "Synthetic engine: a step with n live requests costs 1 + this x (n - 1) "
          "one-request steps; 0.05 is what a 2-core CPU measured, about 0.004 a GPU", Group.ENGINE, "step cost slope",
          limit=Limit(0, 100), default_text="0.05", settings=False),
    Param("synthetic_prefill", float, None, "Synthetic engine: a request's first step costs what this many more live "
          "requests would (its prefill: a real engine first computes its prefix past the last cached block, about 16 "
          "tokens with vLLM's blocks of 32)", Group.ENGINE, "prefill cost", limit=Limit(0, 10000),
          default_text="0", settings=False),
    Param("synthetic_vocab", int, None, "Synthetic engine: a model of this many tokens (t0, t1, ...) and no EOS "
          "instead of the demo words, small enough that every response of n tokens can be enumerated (eval "
          "--frontier then measures each method's exact distance to pi_alpha)", Group.ENGINE, "vocabulary",
          limit=Limit(2, 1000, integer=True), default_text="26 demo words with EOS", metavar="V", settings=False),
    Param("synthetic_sharpness", float, None, "Synthetic engine: its logits are this times standard normal draws "
          "(lower: a flatter p0)", Group.ENGINE, "sharpness", limit=Limit(0, 100, lo_open=True), default_text="2",
          settings=False),
)
PARAMS: dict[str, Param] = {p.name: p for p in SPEC}


def of_group(*groups: Group) -> tuple[Param, ...]:
    """The parameters of `groups`, in the spec's order."""
    return tuple(p for p in SPEC if p.group in groups)


SAMPLER_PARAMS = tuple(p for p in SPEC if p.target is Target.SAMPLER)
ENGINE_PARAMS = tuple(p for p in SPEC if p.target is Target.ENGINE and p.name != "backend")
LIMITS: dict[str, Limit] = {p.name: p.limit for p in SPEC if p.limit is not None}


def default(name: str) -> Any:
    """A parameter's default, for the dataclasses that hold the values."""
    return PARAMS[name].default


def applying(params: Mapping[str, Any], names: Iterable[str] | None = None) -> list[str]:
    """The sampler parameters (of `names`, default all) that a session with `params` reads."""
    chosen = SAMPLER_PARAMS if names is None else [PARAMS[n] for n in names if n in PARAMS]
    return [p.name for p in chosen if p.applies(params)]


def read_values(raw: Mapping[str, Any], naming: Naming | None = None) -> dict[str, Any]:
    """Every given value of `raw` ({name: value as it arrived}, None: not given) read and checked."""
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if value is not None and name in PARAMS:
            out.update(PARAMS[name].read(value, naming))
    return out


def json_schema(param: Param) -> dict[str, Any]:
    """A parameter as a JSON-schema property (the server's OpenAPI schema)."""
    kind = {int: "integer", float: "number", str: "string", bool: "boolean"}[param.kind]
    schema: dict[str, Any] = {"description": param.help_text()}
    if param.reader is not None:  # N, auto, cost:N or fill:N
        schema["anyOf"] = [{"type": "integer", "minimum": 1}, {"type": "string"}]
    elif param.choice_names is not None:
        schema["type"], schema["enum"] = "string", list(param.choice_names)
    else:
        schema["type"] = kind
        if param.limit is not None:
            lim = param.limit
            bound = int if lim.integer else float
            schema["exclusiveMinimum" if lim.lo_open else "minimum"] = bound(lim.lo)
            if not math.isinf(lim.hi):
                schema["maximum"] = bound(lim.hi)
    if param.optional or param.default is None:
        schema["nullable"] = True
    if param.default is not None:
        schema["default"] = param.default
    return schema


def own_text(params: Mapping[str, Any]) -> str:
    """A sampler's own parameters as `stats` shows them beside its name: 'β=4 mix=0.1', 'N=8 logq'."""
    items = []
    for p in SPEC:
        if p.group is Group.OWN and p.applies(params) and params.get(p.name) is not None:
            value = params[p.name]
            if isinstance(value, bool):  # a switch reads as its name, or no- its name
                items.append((p.symbol or p.name) if value else f"no-{p.symbol or p.name}")
                continue
            shown = p.extra.get("shown", {}).get(value)
            if shown is None:
                shown = number_text(value) if isinstance(value, (int, float)) else value
            items.append(f"{p.symbol}={shown}" if p.symbol else str(shown))
    return " ".join(items)


def comparable_names(params: Mapping[str, Any]) -> list[str]:
    """The sampler parameters that must agree for two sessions to be pooled: every one the session's
    sampler and rule read, but the seed (and the prompt, which is no parameter)."""
    return [name for name in applying(params) if name != "seed"]
