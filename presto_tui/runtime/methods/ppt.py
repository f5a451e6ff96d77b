"""Parallel power tempering (arXiv 2609.38104; replica exchange for power targets): R replicas of an MH
power sampler at a ladder of exponents alpha_1 < ... < alpha_R = alpha, the answer the alpha replica's.

Replica r is an MH chain of the chosen family (`--pt-family`: PowerMH, EntropyCut, MultiTryMH, or any
chain method of one chain) targeting p0^alpha_r, its proposals at its own temperature tau_r =
tau alpha / alpha_r (1/alpha_r by default), under the session's prefetch rule: every replica of every
session shares the one engine loop (`runtime/session/population.py`).  The ladder is geometric from
`--pt-alpha-min` to alpha, or `--pt-ladder`'s list.  After every S-th transition (`--pt-swap-every`,
counted over the whole response: block ends included, before the next block's extension) the replicas
meet and neighbours propose to exchange states, levels i and i + 1 accepted with

    min(1, (p0(x_{i+1}) / p0(x_i))^(alpha_i - alpha_{i+1}))

(p0 of the whole response so far), which leaves the product of the replicas' targets invariant, so the
alpha replica's chain stays an exact MCMC chain for pi_alpha.  Which pairs propose (`--pt-scheme`):
`deo`, the deterministic even/odd alternation (counting barriers and pairs from 1: the odd pairs 1-2,
3-4, ... at odd barriers, the even pairs 2-3, 4-5, ... at even ones, so that the first barrier proposes
the pair 1-2 and two replicas swap from the first barrier on: the non-reversible scheme of Syed,
Bouchard-Côté, Deligiannidis and Doucet 2019), or `random`, one pair drawn uniformly per barrier.  The uniforms are keyed (`randomness.swap_uniform`: by the session seed,
the barrier and the pair), the replicas' seeds too (`member_seed`: the alpha replica keeps the session
seed, so R = 1 is the family's chain itself), so PreSTO reproduces the sequential tempered chain token
for token, swaps included.

A state swapped into replica i is scored at tau_i: every request of a replica reports log q at every
temperature of the ladder (`Request.score_taus`, from the same logits), and the swap takes the state's
log q at tau_i from them (`retempered`).  A family that scores by temperatures of its own (MultiTryMH's
candidate mixture) keeps them, and its states need no re-tempering.

EOS: as every MH chain, each replica runs to n tokens (a fixed horizon: EOS does not end a proposal),
which is also how the paper removes the bias towards short answers that EOS-ended proposals give.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, cast

from presto_tui.runtime.core import registry
from presto_tui.runtime.core.fields import (
    check,
    get,
    read_bool,
    read_finite,
    read_float,
    read_int,
    read_list,
    read_tokens,
    write_num,
)
from presto_tui.runtime.core.method import EventType, MethodInfo
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import member_seed, swap_uniform
from presto_tui.runtime.core.spec import (
    Group,
    Limit,
    Naming,
    Param,
    ParamError,
    number_text,
    param_table,
    rule_words,
)
from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.methods.chain import PopulationMethod
from presto_tui.runtime.methods.powermh import METHOD as POWERMH
from presto_tui.runtime.methods.samples import OneShotInfo
from presto_tui.runtime.samplers.families import SamplerFamily
from presto_tui.runtime.session.driver import Driver
from presto_tui.runtime.session.events import Choice, Event, MethodEvent, Transition
from presto_tui.runtime.session.metrics import response_scores
from presto_tui.runtime.session.population import Barrier, Population

SCHEMES = ("deo", "random")
REFUSED_NOTE = 5  # a pair that refused this many swaps and accepted none gets a note (fewer say little)


# -- the ladder -----------------------------------------------------------------------------------

def ladder(params: SamplerParams | Mapping[str, Any]) -> tuple[float, ...]:
    """The exponents, ascending, the last alpha: `pt_ladder`'s list, or R geometric from `pt_alpha_min`."""
    get_: Callable[[str], Any] = params.get if isinstance(params, Mapping) else lambda k: getattr(params, k)
    alpha, given = float(get_("alpha")), get_("pt_ladder")
    if given:
        out = [float(x) for x in str(given).split(",")]
        return (*out[:-1], alpha)  # (the check made the last one alpha)
    R, lo = int(get_("pt_replicas")), float(get_("pt_alpha_min"))
    if R == 1:
        return (alpha,)
    return (*(lo * (alpha / lo) ** (r / (R - 1)) for r in range(R - 1)), alpha)


def read_ladder(name: str, text: str) -> dict[str, Any]:
    """`--pt-ladder` as typed: numbers above 0 separated by commas (empty: the geometric ladder); the method's
    check says whether they rise to alpha."""
    value = text.strip()
    if not value:
        return {"pt_ladder": None}
    try:
        exps = [float(x) for x in value.split(",")]
    except ValueError:
        exps = []
    if not exps or not all(math.isfinite(a) and a > 0 for a in exps):
        raise ParamError(f"{name} takes exponents above 0 separated by commas, got {value[:60]!r}", "pt_ladder")
    return {"pt_ladder": ",".join(number_text(a) for a in exps)}


def deo_pairs(step: int, R: int) -> list[int]:
    """The lower levels (from 0) of the pairs the even/odd scheme proposes at barrier `step` (from 1): pair
    1-2 (level 0) at the first barrier, so that no session with a barrier proposes nothing."""
    return [i for i in range(R - 1) if i % 2 == (step - 1) % 2]


def temperatures(params: SamplerParams, exponents: Sequence[float]) -> tuple[float, ...]:
    """Each replica's proposal temperature: tau alpha / alpha_r (1 / alpha_r where tau is 1/alpha)."""
    c = params.proposal_tau * params.alpha
    return tuple(c / a for a in exponents)


def member_params(params: SamplerParams, r: int) -> SamplerParams:
    """Replica r's parameters: its family's chain at exponent alpha_r, temperature tau_r, its own seed."""
    exps = ladder(params)
    R = len(exps)
    return params.with_(sampler=params.pt_family, alpha=exps[r], tau=temperatures(params, exps)[r],
                        seed=member_seed(params.seed, R - 1 - r))


class Tempered:
    """A replica's decision rule: its family's, every request also reporting log q at each temperature of
    the ladder, so that a state swapped in from another replica can be scored at this one's own."""

    def __init__(self, base: SamplerFamily, taus: tuple[float, ...]):
        self.base, self.score_taus = base, taus

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


def family_of(params: SamplerParams, r: int) -> SamplerFamily:
    """Replica r's decision rule (its family's; with the ladder's score temperatures where it has none)."""
    base = member_params(params, r).method.family(member_params(params, r))
    exps = ladder(params)
    if len(exps) == 1 or base.score_taus:
        return cast(SamplerFamily, base)
    return cast(SamplerFamily, Tempered(base, temperatures(params, exps)))


def retempered(state: SeqState, family: SamplerFamily, tau: float) -> SeqState:
    """`state` as a replica proposing at `tau` scores it: its log q at tau, from the ladder's (a family
    with temperatures of its own scores by them: unchanged)."""
    if not isinstance(family, Tempered) or not state.logq_at:
        return state
    return replace(state, logq=state.logq_at[family.score_taus.index(tau)])


# -- its event ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PtStep(MethodEvent):
    """The replicas at a barrier (and once at the end: `final`, no swap proposed): the swaps proposed between
    neighbouring levels and their outcomes, then each level's state.  Levels count from 0, the lowest
    exponent first; the answer is the last level's."""

    step: int  # barriers so far, from 1 (the end: one more)
    block: int
    k: int  # transitions of the block done
    exponents: tuple[float, ...]
    pairs: tuple[int, ...]  # the lower level of each pair that proposed to swap
    accept_probs: tuple[float, ...]  # per pair: min(1, (p0(x_j) / p0(x_i))^(alpha_i - alpha_j))
    swapped: tuple[bool, ...]  # per pair
    holders: tuple[int, ...]  # per level, after the swaps: which state (its start level) it holds
    log_p0: tuple[float, ...]  # per level, after the swaps: log p0 of its state
    tokens: tuple[tuple[int, ...], ...]  # per level, after the swaps: its state's generated tokens
    transitions: tuple[int, ...]  # per level, MH transitions since the last record
    accepted: tuple[int, ...]  # ... and how many of them accepted
    final: bool
    clock: float  # engine time since the session started


def _encode(ev: PtStep) -> dict:
    return {"step": ev.step, "block": ev.block, "k": ev.k, "exponents": list(ev.exponents), "pairs": list(ev.pairs),
            "accept_probs": list(ev.accept_probs), "swapped": list(ev.swapped), "holders": list(ev.holders),
            "log_p0": [write_num(x) for x in ev.log_p0], "tokens": [list(t) for t in ev.tokens],
            "transitions": list(ev.transitions), "accepted": list(ev.accepted), "final": ev.final,
            "clock": ev.clock}


def _decode(d: dict) -> PtStep:
    g = lambda key: get(d, key)
    exps = tuple(read_finite(a, "exponents", 0.0) for a in read_list(g("exponents"), "exponents"))
    R = len(exps)
    check(R >= 1, "exponents", "should hold one exponent per replica")
    pairs = tuple(read_int(i, "pairs", 0, max(0, R - 2)) for i in read_list(g("pairs"), "pairs"))
    probs = tuple(read_finite(a, "accept_probs", 0.0, 1.0) for a in read_list(g("accept_probs"), "accept_probs"))
    swapped = tuple(read_bool(s, "swapped") for s in read_list(g("swapped"), "swapped"))
    check(len(probs) == len(swapped) == len(pairs), "pairs", "should hold one entry per pair, as accept_probs and "
          "swapped do")
    holders = tuple(read_int(h, "holders", 0, R - 1) for h in read_list(g("holders"), "holders"))
    check(sorted(holders) == list(range(R)), "holders", "should name each replica's state once")
    per_level = {k: read_list(g(k), k) for k in ("log_p0", "tokens", "transitions", "accepted")}
    for k, v in per_level.items():
        check(len(v) == R, k, "should hold one entry per replica")
    return PtStep(read_int(g("step"), "step"), read_int(g("block"), "block"), read_int(g("k"), "k"), exps, pairs,
                  probs, swapped, holders, tuple(read_float(x, "log_p0") for x in per_level["log_p0"]),
                  tuple(read_tokens(t, "tokens") for t in per_level["tokens"]),
                  tuple(read_int(n, "transitions") for n in per_level["transitions"]),
                  tuple(read_int(n, "accepted") for n in per_level["accepted"]), read_bool(g("final"), "final"),
                  read_finite(g("clock"), "clock", 0.0))


PT_STEP = EventType("pt_step", PtStep, _encode, _decode, lambda ev: [t for toks in ev.tokens for t in toks])


# -- the session ----------------------------------------------------------------------------------

class PptDriver(Population):
    """The replicas on the loop, barriers every S transitions (see the module docstring)."""

    def make_members(self) -> list[Driver]:
        p = self.params
        self.exponents = ladder(p)
        R = len(self.exponents)
        self.taus = temperatures(p, self.exponents)
        self.families = [family_of(p, r) for r in range(R)]
        self.lead = R - 1
        self.holders = list(range(R))  # the state each level holds, by the level it started at
        self._since = [[0, 0] for _ in range(R)]  # per level: transitions, accepted since the last record
        members = []
        for r in range(R):
            given = self.start_state(r)
            state = retempered(given, self.families[r], self.taus[r]) if given is not None else None
            members.append(self.member(member_params(p, r), state=state, family=self.families[r]))
        return members

    def barriers(self) -> list[Barrier]:
        p = self.params
        if len(ladder(p)) == 1:
            return []
        K, S = p.steps, p.pt_swap_every
        return [((t - 1) // K, t - (t - 1) // K * K) for t in range(S, p.n_blocks * K + 1, S)]

    def member_event(self, i: int, ev: Event) -> None:
        if isinstance(ev, Transition):
            self._since[i][0] += 1
            self._since[i][1] += ev.accepted
            if i == self.lead:  # the alpha replica's chain: the session's draws (diagnostics, the answer's numbers)
                self._out.append(ev)

    def cross(self, barrier: Barrier, states: list[SeqState]) -> list[SeqState]:
        p, s = self.params, self.crossed + 1
        R = len(states)
        if p.pt_scheme == SCHEMES[0]:  # deterministic even/odd: the pairs (from 1) of the barrier's (from 1) parity
            pairs = deo_pairs(s, R)
        else:
            pairs = [min(R - 2, int(swap_uniform(p.seed, s, 0) * (R - 1)))]
        out = list(states)
        probs, swapped = [], []
        for i in pairs:
            a, b = self.exponents[i], self.exponents[i + 1]
            log_a = (a - b) * (math.fsum(out[i + 1].logp) - math.fsum(out[i].logp))
            A = math.exp(min(0.0, log_a)) if log_a == log_a else 0.0
            ok = swap_uniform(p.seed, s, i + 1) < A
            if ok:
                out[i], out[i + 1] = (retempered(out[i + 1], self.families[i], self.taus[i]),
                                      retempered(out[i], self.families[i + 1], self.taus[i + 1]))
                self.holders[i], self.holders[i + 1] = self.holders[i + 1], self.holders[i]
            probs.append(A)
            swapped.append(ok)
        self._record(barrier, s, tuple(pairs), tuple(probs), tuple(swapped), out, final=False)
        return out

    def _record(self, barrier: Barrier, step: int, pairs: tuple[int, ...], probs: tuple[float, ...],
                swapped: tuple[bool, ...], states: list[SeqState], final: bool) -> None:
        self._out.append(PtStep(step, barrier[0], barrier[1], self.exponents, pairs, probs, swapped,
                                tuple(self.holders), tuple(math.fsum(x.logp) for x in states),
                                tuple(x.tokens for x in states), tuple(n for n, _ in self._since),
                                tuple(a for _, a in self._since), final, self.clock()))
        self._since = [[0, 0] for _ in states]

    def finish(self, states: list[SeqState]) -> None:
        p = self.params
        # the end's record (each replica's final state, and its transitions since the last barrier)
        self._record((p.n_blocks - 1, p.steps), self.crossed + 1, (), (), (), states, final=True)
        answer = states[self.lead]
        loglik, confidence = response_scores(answer.tokens, answer.logp, answer.entropy, self.engine.eos_id)
        R = len(states)
        self._out.append(Choice(self.lead, f"the alpha replica's state (replica {R} of {R})",
                                tuple(math.fsum(x.logp) for x in states), loglik, confidence))
        self.state = answer


# -- its numbers ----------------------------------------------------------------------------------

class PptInfo(OneShotInfo):
    """Swaps proposed and accepted per pair of neighbouring replicas, round trips, MH acceptance per replica."""

    def __init__(self) -> None:
        super().__init__()
        self.exponents: tuple[float, ...] = ()
        self.proposed: list[int] = []
        self.swaps: list[int] = []
        self.transitions: list[int] = []
        self.accepted: list[int] = []
        self.round_trips = 0
        self.barriers = 0
        # per state (by its start level): 1 once at the hottest level, 2 once at the coldest after that
        self._phase: list[int] = []

    def update(self, ev: object) -> None:
        super().update(ev)
        if not isinstance(ev, PtStep):
            return
        R = len(ev.exponents)
        if len(self.exponents) != R:
            self.exponents = ev.exponents
            self.proposed, self.swaps = [0] * max(0, R - 1), [0] * max(0, R - 1)
            self.transitions, self.accepted = [0] * R, [0] * R
            self._phase = [1 if h == 0 else 0 for h in range(R)]
        self.barriers += not ev.final
        for i, ok in zip(ev.pairs, ev.swapped):
            if 0 <= i < R - 1:
                self.proposed[i] += 1
                self.swaps[i] += ok
        for r in range(min(R, len(ev.transitions), len(ev.accepted))):
            self.transitions[r] += ev.transitions[r]
            self.accepted[r] += ev.accepted[r]
        if R > 1:  # a round trip (Syed et al.): a state goes from the hottest level to the coldest and back
            hot, cold = ev.holders[0], ev.holders[R - 1]
            if 0 <= cold < R and self._phase[cold] == 1:
                self._phase[cold] = 2
            if 0 <= hot < R:
                self.round_trips += self._phase[hot] == 2
                self._phase[hot] = 1

    def rates(self) -> list[float | None]:
        return [s / n if n else None for s, n in zip(self.swaps, self.proposed)]

    def to_dict(self) -> dict[str, Any]:
        if not self.exponents:
            return super().to_dict()
        return {**super().to_dict(), "replicas": len(self.exponents), "exponents": list(self.exponents),
                "swap_barriers": self.barriers,
                "swaps": [{"pair": [i + 1, i + 2], "proposed": n, "accepted": a, "rate": r}
                          for i, (n, a, r) in enumerate(zip(self.proposed, self.swaps, self.rates()))],
                "round_trips": self.round_trips,
                "replica_acceptance": [a / n if n else None for n, a in zip(self.transitions, self.accepted)]}

    def rows(self) -> list[tuple[str, str]]:
        if not self.exponents:
            return super().rows()
        pairs = ", ".join(f"{i + 1}-{i + 2} {a}/{n}" for i, (n, a) in enumerate(zip(self.proposed, self.swaps)))
        acc = " ".join("-" if not n else f"{a / n:.2f}" for n, a in zip(self.transitions, self.accepted))
        return [("replicas (exponents)", f"{len(self.exponents)} ({', '.join(f'{a:.3g}' for a in self.exponents)})"),
                *([("swaps accepted per pair", pairs), ("round trips", str(self.round_trips))] if self.proposed
                  else []),
                ("MH acceptance per replica", acc), *super().rows()]

    def drawn(self) -> str:
        """'R=4 swaps 41/62/55% 3 trips': replicas, each pair's swap acceptance (from the lowest), round trips."""
        R = len(self.exponents)
        if R < 2:
            return f"R={R}"
        rates = "/".join("-" if r is None else f"{100 * r:.0f}" for r in self.rates())
        return f"R={R} swaps {rates}% {self.round_trips} trips"

    def notes(self) -> list[str]:
        out = []
        if len(self.exponents) > 1 and not self.barriers:
            out.append("no swap was proposed: --pt-swap-every is more than the transitions of the whole response")
        for i, (n, a) in enumerate(zip(self.proposed, self.swaps)):
            if n >= REFUSED_NOTE and not a:
                out.append(f"no swap between replicas {i + 1} and {i + 2} (alpha {self.exponents[i]:.3g} and "
                           f"{self.exponents[i + 1]:.3g}) was accepted in {n} tries: states cannot travel the "
                           "ladder there (more replicas, or a higher --pt-alpha-min, narrow the gap)")
        return out


# -- the method -----------------------------------------------------------------------------------

def _families() -> tuple[tuple[str, str], ...]:
    """The MH chain methods of one chain a replica can run (every registered one, plugins' too)."""
    return tuple((m.name, m.help) for m in registry.methods() if m.rounds)


class ParallelPowerTempering(PopulationMethod):
    name = "ppt"
    order = 40  # after the single-chain MH methods whose families its replicas run
    display = "PPT"
    help = "parallel power tempering: replicas at a ladder of exponents swap states, the answer the alpha one's"
    paper = "arXiv 2609.38104; swaps as Syed et al. 2019 (non-reversible parallel tempering)"
    session = PptDriver
    events = (PT_STEP,)
    view_state: ClassVar[str | None] = "presto_tui.views.state.ppt:PptRun"
    view: ClassVar[str | None] = "presto_tui.views.widgets.ppt:ReplicaGrid"
    params = (
        Param("pt_replicas", int, 4, "PPT: replicas R (the ladder's exponents, geometric from --pt-alpha-min to "
              "alpha; --pt-ladder gives them instead)", Group.OWN, "replicas R (PPT)",
              limit=Limit(1, 64, integer=True), symbol="R"),
        Param("pt_alpha_min", float, 1.0, "PPT: the lowest exponent of the geometric ladder (1: p0 itself)",
              Group.OWN, "lowest exponent (PPT)", limit=Limit(0, 1000, lo_open=True), symbol="amin"),
        Param("pt_ladder", str, None, "PPT: the exponents as a comma list, ascending, the last alpha (instead of "
              "--pt-replicas and --pt-alpha-min)", Group.OWN, "ladder (PPT; empty: geometric)", optional=True,
              default_text="geometric", metavar="A1,...,AR", symbol="ladder", reader=read_ladder,
              extra={"hint": "takes exponents above 0 separated by commas"}),
        Param("pt_swap_every", int, 2, "PPT: neighbours propose to swap after every S transitions (counted over the "
              "whole response)", Group.OWN, "swap every S transitions (PPT)", limit=Limit(1, 1_000_000, integer=True),
              symbol="S"),
        Param("pt_scheme", str, SCHEMES[0], "PPT: which neighbours propose to swap at a barrier", Group.OWN,
              "swap scheme (PPT)", choices=lambda: (
                  ("deo", "pairs 1-2, 3-4, ... at odd barriers, 2-3, 4-5, ... at even ones: non-reversible, Syed et al. "
                          "2019"),
                  ("random", "one pair drawn uniformly")), symbol=""),
        Param("pt_family", str, POWERMH.name, "PPT: the MH chain each replica runs", Group.OWN, "replica chain (PPT)",
              choices=_families, metavar="NAME", symbol=""),
    )

    def describe(self, p: Mapping[str, Any]) -> str:
        """'PPT R=4 alpha 1..4 S=2 deo PowerMH, PreSTO stream N=auto' (a ladder given: its exponents)."""
        m = registry.find(p.get("pt_family"))
        family = m.display if m is not None else p.get("pt_family")
        if p.get("pt_ladder"):
            ladder_text = f"R={len(str(p.get('pt_ladder')).split(','))} ladder {p.get('pt_ladder')}"
        else:
            ladder_text = f"R={p.get('pt_replicas')} alpha {number_text(p['pt_alpha_min'])}..{number_text(p['alpha'])}"
        return f"{self.display} {ladder_text} S={p.get('pt_swap_every')} {p.get('pt_scheme')} {family}, {rule_words(p)}"

    def check(self, params: SamplerParams, naming: Naming) -> None:
        if params.pt_ladder:
            try:
                given = [float(x) for x in str(params.pt_ladder).split(",")]
            except ValueError:
                raise ParamError.about("pt_ladder", "{pt_ladder} takes exponents separated by commas, got {0}",
                                       params.pt_ladder, naming=naming) from None
            if not all(math.isfinite(a) and a > 0 for a in given) or any(b <= a for a, b in zip(given, given[1:])):
                raise ParamError.about("pt_ladder", "{pt_ladder} takes exponents above 0 in ascending order, got {0}",
                                       params.pt_ladder, naming=naming)
            if not math.isclose(given[-1], params.alpha, rel_tol=1e-9):
                raise ParamError.about("pt_ladder", "{pt_ladder}'s last exponent is the target's, {alpha} {0}; got "
                                       "{1}", number_text(params.alpha), params.pt_ladder, naming=naming)
        elif params.pt_replicas > 1 and params.pt_alpha_min >= params.alpha:
            raise ParamError.about("pt_alpha_min", "{pt_alpha_min} {0} must lie below {alpha} {1} (the ladder rises "
                                   "to alpha)", number_text(params.pt_alpha_min), number_text(params.alpha),
                                   naming=naming)
        exps = ladder(params)
        if len(exps) > 1 and params.pt_swap_every > params.n_blocks * params.steps:
            raise ParamError.about("pt_swap_every", "{pt_swap_every} {0} is more than the {1} transitions of the whole "
                                   "response ({steps} per block): no swap would ever be proposed", params.pt_swap_every,
                                   params.n_blocks * params.steps, naming=naming)
        limit = param_table()["tau"].limit
        for a, tau in zip(exps, temperatures(params, exps)):
            if limit is not None and not limit.contains(tau):
                raise ParamError.about("pt_alpha_min", "the replica at exponent {0} would propose at temperature {1}, "
                                       "outside {tau}'s range {2}; raise {pt_alpha_min} or give {pt_ladder}",
                                       f"{a:.4g}", f"{tau:.4g}", limit, naming=naming)
        for r in range(len(exps)):
            member_params(params, r).validate(naming)

    def family(self, params: SamplerParams) -> SamplerFamily:
        """The alpha replica's decision rule."""
        return family_of(params, len(ladder(params)) - 1)

    def chain_exponents(self, params: SamplerParams) -> tuple[float, ...]:
        return ladder(params)

    def members(self, params: SamplerParams) -> list[SamplerParams]:
        return [member_params(params, r) for r in range(len(ladder(params)))]

    def info(self) -> MethodInfo:
        return PptInfo()


METHOD = ParallelPowerTempering()
