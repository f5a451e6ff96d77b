"""A sampling method as one object: everything the rest of presto-tui asks of a sampler, declared once.

A method (PowerMH, best-of-N, PowerSMC, Scalable Power Sampling, ...) is a `Method` in a module of
its own (`runtime/methods/<name>.py` for the built-in ones, any installed package for a plugin,
found through the entry-point group `presto_tui.methods`: `core/registry.py`).  It declares:

- who it is: `name` (what `--sampler` takes), `display` (as its paper writes it), `help`, `kind`
  (`MethodKind`: MH chains, which take a prefetch rule and the chain parameters, or a one-shot
  sampler, which does not), `aliases` in the method language (`bon` for best-of-N);
- its own parameters (`params`: `Param`s of `Group.OWN`, added to the parameter table from here, so
  every flag, request field, settings field and lm-eval argument of it exists once it is
  registered), and others' it reads too (`reads`);
- its budget `axis` (the parameter eval, the frontier and the method language's `:N` vary, and
  its symbol: K, N, P, M);
- its settings in words (`describe`: one function for `run`, the app, `stats` and the frontier);
- the checks that tie its parameters together (`check`);
- its session on the engine loop (`driver`); its width (`width`: live requests per session, for the
  engine loop's concurrency) and its size (`cost`: the most requests and tokens a session may issue,
  what a server caps);
- its own events with their trace encoding (`events`), how they fold into its own summary (`info`:
  a small record of its own numbers, as BlackJAX's `info` objects), and its view in the app
  (`view_state`, pure, and `view`, the widget drawing it, each named by its import path so that
  nothing below the views imports Textual).

Nothing else in presto-tui compares a sampler's name: it looks the method up and asks it
(`tests/test_architecture.py` greps for name comparisons).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from presto_tui.runtime.core.paramkit import Naming, Param, number_text

# a `core.params.SamplerParams` (which imports this module through the registry, so it is not named here)
SamplerParams = Any


class MethodKind(Enum):
    """What a method is.  CHAIN: Metropolis-Hastings chains targeting pi_alpha (one, or several that
    exchange states or particles that move by MH); they run sequentially (`--prefetch none`) or with
    PreSTO under every prefetch rule, and read the chain parameters (K, B, epsilon, ...).
    ONE_SHOT: draws its answer without MH decisions (samples, particles, chunks): no prefetch rule;
    its samples stop at EOS."""

    CHAIN = "chain"
    ONE_SHOT = "one-shot"

    @property
    def plural(self) -> str:
        return "MH chains" if self is MethodKind.CHAIN else "one-shot samplers"


@dataclass(frozen=True)
class Axis:
    """A method's budget: the parameter that buys it quality for time, and how tables write it."""

    param: str  # a parameter name: steps, samples, particles, sps_rollouts
    symbol: str  # K, N, P, M


@dataclass(frozen=True)
class Cost:
    """The most a session of a method may ask of the engine: requests and tokens decoded (bounds, not
    estimates: what a server may multiply and cap before anything runs)."""

    requests: int
    tokens: int

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.requests + other.requests, self.tokens + other.tokens)

    def __mul__(self, k: int) -> Cost:
        return Cost(self.requests * k, self.tokens * k)


@dataclass(frozen=True)
class EventType:
    """One of a method's own events as the trace holds it: its line's `type`, the event class, how it
    is written (`encode`: event -> JSON object without `type`) and read back (`decode`: JSON object
    -> event, raising `SchemaError` on anything it cannot take: a trace is untrusted), and the token
    ids it carries (their text goes into the trace's `vocab` lines)."""

    type: str
    cls: builtins.type
    encode: Callable[[Any], dict]
    decode: Callable[[dict], Any]
    tokens: Callable[[Any], list[int]] = lambda ev: []


class MethodInfo:
    """A method's own numbers of one session, folded from its events (the summary's `info`)."""

    def __repr__(self) -> str:
        """What it holds, as `run --json` writes it: `PptInfo(swaps=[...], round_trips=2)`."""
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"

    def update(self, ev: object) -> None:
        pass

    def to_dict(self) -> dict[str, Any]:
        """What `run --json` and `stats --json` add for it (nothing by default)."""
        return {}

    def rows(self) -> list[tuple[str, str]]:
        """What `run` prints for it beside the common rows, as (label, value) pairs."""
        return []

    def drawn(self) -> str:
        """What the session drew, short (a `stats` cell): '8' samples, '8x4' particles x blocks."""
        return "-"

    def notes(self) -> list[str]:
        """What a person should be told of the session (a run that never resampled, ...)."""
        return []

    def member_moves(self) -> list[tuple[int, int]]:
        """A population's MH transitions per member, and how many of them accepted (tempering's per level,
        resample-move's per particle); [] for a session of one chain or of none."""
        return []

    def session_moves(self) -> tuple[int, int] | None:
        """The MH transitions (and accepted) a population counts as the session's own where none of its
        chains' transitions are its draws (resample-move: every particle's); None: the session's own
        transitions are its draws' (a chain's rounds, tempering's alpha replica's `Transition`s)."""
        return None


def _reads_params(describe: Callable[..., str]) -> Callable[..., str]:
    """`describe` taking a `Params` as well as its dict (what a subclass's own `describe` reads: `p.get`)."""
    @functools.wraps(describe)
    def wrapper(self: Method, p: Any) -> str:
        return describe(self, p if isinstance(p, Mapping) or not hasattr(p, "to_dict") else p.to_dict())

    wrapper.reads_params = True  # type: ignore[attr-defined]
    return wrapper


class Method:
    """A sampling method (see the module docstring).  Subclass it and export one instance."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("describe")  # a subclass's (a plugin's too) reads a dict: it gets one
        if own is not None and not getattr(own, "reads_params", False):
            cls.describe = _reads_params(own)  # type: ignore[method-assign]

    name: ClassVar[str]
    display: ClassVar[str]
    help: ClassVar[str]
    kind: ClassVar[MethodKind] = MethodKind.CHAIN
    aliases: ClassVar[tuple[str, ...]] = ()  # other names in the method language (eval --methods)
    params: ClassVar[tuple[Param, ...]] = ()  # its own parameters (Group.OWN)
    reads: ClassVar[tuple[str, ...]] = ()  # other methods' own parameters it reads too
    axis: ClassVar[Axis | None] = None  # its budget (None: it has none, as low temperature)
    events: ClassVar[tuple[EventType, ...]] = ()  # its own events, as the trace holds them
    # Its view in the app, by import path ("module:Class"), so that nothing below the views imports
    # them: `view_state` folds a session's events for the view (pure, no Textual; `Class.of(params)`
    # makes one, `.apply(event)` folds), `view` is the widget that draws it in the tree pane's place.
    # None: the MH chain's round tree.
    view_state: ClassVar[str | None] = None
    view: ClassVar[str | None] = None
    # An MH chain method whose session runs several chains and answers with one of their states (parallel
    # tempering's replicas, resample-move's particles: `runtime/session/population.py`).  Its session is one
    # result, as a one-shot method's is (`rounds` is False): its time is its calls, the app draws it with its
    # own view, not one chain's round tree.
    population: ClassVar[bool] = False
    paper: ClassVar[str] = ""  # where it comes from, for --help and the docs
    order: ClassVar[int] = 1000  # where --help and the settings list it among the built-in ones (plugins: by name)
    # why a session's speedup over the sequential sampler cannot be estimated from its own calls
    # (None: it can, for an MH chain whose sequential step is one request)
    speedup_unavailable: ClassVar[str | None] = None

    @property
    def chain(self) -> bool:
        return self.kind is MethodKind.CHAIN

    @property
    def rounds(self) -> bool:
        """Whether its session records one MH chain's rounds (or streaming epochs): the summary's transitions
        and critical path, the app's round tree.  False: its session is one result (a one-shot method's, a
        population's), whose time is its model calls."""
        return self.chain and not self.population

    # its own parameters and those it reads from other methods, as the parameter table holds them
    # (their `samplers` filled in): set by the registry when it registers the method
    own_table: tuple[Param, ...] = ()

    @property
    def own(self) -> tuple[str, ...]:
        """The names of the parameters that are its own or that it reads from another method."""
        return tuple(p.name for p in self.params) + self.reads

    # -- words -----------------------------------------------------------------------------------
    @_reads_params
    def describe(self, p: Mapping[str, Any]) -> str:
        """Its settings in words, from a `Params` or its dict: 'PowerSMC P=8 B=128 R=400', 'best-of-4 logq',
        'PowerMH, PreSTO stream N=auto, K=24'.  Used by `run`, the app, `stats` and the frontier."""
        own = own_words(self.own_table or self.params, p)
        return f"{self.display} {own}" if own else self.display

    # -- what it reads -----------------------------------------------------------------------------
    def check(self, params: SamplerParams, naming: Naming) -> None:
        """Raise ParamError (`ParamError.about`, rendered with `naming`) where its parameters do not
        go together; each value's own range is already checked."""

    def check_exact(self, params: SamplerParams, naming: Naming) -> None:
        """Raise ParamError where these parameters would make a chain that is not exact by construction
        (ChainMethod: a family proposing at a temperature its states are not scored at)."""

    def check_given(self, params: SamplerParams, given: frozenset[str], naming: Naming) -> None:
        """Raise ParamError where parameters the person gave (`given`, by name) contradict each other (one
        that another makes moot: tempering's replica count beside a ladder of another length); a front-end's
        check, so that what the trace records is what the person asked for."""

    def warmup_transitions(self, p: Mapping[str, Any]) -> int:
        """Transitions at a session's start that tune the method itself (tempering's adaptive ladder), read from
        the parameters a trace records: the diagnostics count them as warm-up.  None by default."""
        return 0

    def resolved(self, params: SamplerParams) -> dict[str, Any]:
        """Its own parameters whose value is another's by default, resolved (SPS's draws: its top-k),
        as `SamplerParams.to_dict` writes them."""
        return {}

    def width(self, params: SamplerParams) -> int:
        """Requests a session keeps live at once, about (the engine loop sizes its concurrency by it)."""
        return 1

    def cost(self, params: SamplerParams) -> Cost:
        """The most requests and tokens a session may issue (see `Cost`)."""
        raise NotImplementedError(f"{self.name} does not say what a session may cost")

    # -- what it does ------------------------------------------------------------------------------
    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> Any:
        """Its session on the engine loop: a `runtime.session.driver.SessionDriver`.  `kwargs`: the
        prompt's text, the chain's index, count and group under `--chains`, and for MH chains the
        epsilon classifier and a start state."""
        raise NotImplementedError

    def family(self, params: SamplerParams) -> Any:
        """An MH chain method's decision rule (`runtime.samplers.families.SamplerFamily`); None for
        the others."""
        return None

    def info(self) -> MethodInfo:
        """A fresh record of its own numbers, for one session."""
        return MethodInfo()

    def chain_exponents(self, params: SamplerParams) -> tuple[float, ...]:
        """The exponent each chain of a session targets, p0^a, where they differ (a tempering ladder, the
        answer's last); one entry where every chain targets pi_alpha.  The law-test kit starts an invariance
        check's chains from exact draws of these."""
        return (params.alpha,)

    def __repr__(self) -> str:
        return f"<method {self.name}: {self.display}>"


def own_words(params: tuple[Param, ...], p: Mapping[str, Any]) -> str:
    """Own parameters as they read beside a method's name: 'P=8 B=128', 'β=4 mix=0.1', 'logq'."""
    items = []
    for param in params:
        value = p.get(param.name)
        if value is None:
            continue
        if isinstance(value, bool):  # a switch reads as its name, or no- its name
            items.append((param.symbol or param.name) if value else f"no-{param.symbol or param.name}")
            continue
        shown = param.extra.get("shown", {}).get(value)
        if shown is None:
            shown = number_text(value) if isinstance(value, (int, float)) else value
        items.append(f"{param.symbol}={shown}" if param.symbol else str(shown))
    return " ".join(items)
