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
Bouchard-Côté, Deligiannidis and Doucet 2019), or `random`, one pair drawn uniformly per barrier.
The uniforms are keyed (`randomness.swap_uniform`: by the session seed, the barrier and the pair), the
replicas' seeds too (`member_seed`: the alpha replica keeps the session seed, so R = 1 is the family's
chain itself), so PreSTO reproduces the sequential tempered chain token for token, swaps included.

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

import numpy as np

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
from presto_tui.runtime.methods.population_numbers import LadderNumbers, swap_length
from presto_tui.runtime.methods.powermh import METHOD as POWERMH
from presto_tui.runtime.methods.samples import OneShotInfo
from presto_tui.runtime.samplers.families import SamplerFamily
from presto_tui.runtime.session.driver import Driver
from presto_tui.runtime.session.events import Choice, Event, MethodEvent, SessionStart, Transition
from presto_tui.runtime.session.metrics import response_scores
from presto_tui.runtime.session.population import Barrier, Population

SCHEMES = ("deo", "random")
REPLICAS = Limit(1, 64, integer=True)  # pt_replicas' range: a ladder holds as many exponents at most
LADDER_CHARS = 32  # an exponent's text, at most (what a float prints as, and room)
AUTO = "auto"  # --pt-ladder auto: the exponents tuned in a warm-up (`adapted`), then frozen
REFUSED_NOTE = 5  # a pair that refused this many swaps and accepted none gets a note (fewer say little)


# -- the ladder -----------------------------------------------------------------------------------

def ladder(params: SamplerParams | Mapping[str, Any]) -> tuple[float, ...]:
    """The exponents, ascending, the last alpha: `pt_ladder`'s list, or R geometric from `pt_alpha_min` (also
    where an adaptive ladder, `auto`, starts)."""
    get_: Callable[[str], Any] = params.get if isinstance(params, Mapping) else lambda k: getattr(params, k)
    alpha, given = float(get_("alpha")), get_("pt_ladder")
    if given and given != AUTO:
        out = [float(x) for x in str(given).split(",")]
        return (*out[:-1], alpha)  # (the check made the last one alpha)
    R, lo = int(get_("pt_replicas")), float(get_("pt_alpha_min"))
    if R == 1:
        return (alpha,)
    return (*(lo * (alpha / lo) ** (r / (R - 1)) for r in range(R - 1)), alpha)


def read_ladder(name: str, text: str) -> dict[str, Any]:
    """`--pt-ladder` as typed: numbers above 0 separated by commas (empty: the geometric ladder; `auto`: tuned
    in a warm-up); the method's check says whether they rise to alpha."""
    value = text.strip()
    if not value:
        return {"pt_ladder": None}
    if value.lower() == AUTO:
        return {"pt_ladder": AUTO}
    most = int(REPLICAS.hi)
    if value.count(",") >= most or len(value) > most * LADDER_CHARS:  # (counted before anything is parsed)
        raise ParamError(f"{name} takes at most {most} exponents (the most replicas a ladder has) of at most "
                         f"{LADDER_CHARS} characters each; got {value.count(',') + 1} in {len(value)} characters",
                         "pt_ladder")
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


def adaptive(params: SamplerParams | Mapping[str, Any]) -> bool:
    get_: Callable[[str], Any] = params.get if isinstance(params, Mapping) else lambda k: getattr(params, k)
    return get_("pt_ladder") == AUTO


def warmup(params: SamplerParams) -> int:
    """An adaptive ladder's warm-up W, in transitions over the whole response (`--pt-warmup`; by default
    half of them)."""
    return params.pt_warmup if params.pt_warmup is not None else params.n_blocks * params.steps // 2


def updates(params: SamplerParams) -> tuple[int, ...]:
    """The barriers (from 1) after which an adaptive ladder is updated: rounds doubling in length (2, 4, 8, ...
    barriers, as Syed et al. 2022's rounds double), the last at the warm-up's last barrier, where it freezes.
    Each round spans two barriers at least, so the even/odd scheme proposes every pair in it."""
    last = warmup(params) // params.pt_swap_every
    out, s = [], 2
    while s < last - 1:
        out.append(s)
        s *= 2
    return (*out, last)


def round_rejection(R: int, swaps: Sequence[tuple[int, float]]) -> tuple[float | None, ...]:
    """Each pair's rejection rate over a warm-up round: the mean of 1 - A (the swap probability, not its
    outcome: Rao-Blackwellised) over the swaps the round proposed for it (`swaps`: (the pair's lower level,
    A)); None where it proposed none.  Only proposed swaps: between two of a pair's proposals the even/odd
    scheme leaves the pair as its last swap left it, and a few MH transitions barely move a state, so the
    pair's states at a barrier that does not propose it are not a draw of its swap (on the embedded model
    they rejected about twice as often as its proposals)."""
    total, count = [0.0] * (R - 1), [0] * (R - 1)
    for i, A in swaps:
        total[i] += 1.0 - A
        count[i] += 1
    return tuple(t / n if n else None for t, n in zip(total, count))


PRIOR_BARRIERS = 4.0  # the geometric ladder's weight in an update, in barriers: about two proposals per pair


def adapted(rounds: Sequence[tuple[Sequence[float], Sequence[float | None], float]],
            prior: float = PRIOR_BARRIERS) -> tuple[tuple[float, ...], float]:
    """The schedule update of Syed, Bouchard-Côté, Deligiannidis and Doucet (2022, JRSS-B, "Non-reversible
    parallel tempering", Algorithm 4), on the pairs' lengths where they sum rejection rates: a cumulative
    curve over the exponents, piecewise linear through 0 at a_1 and rising by each pair's length l_i =
    2 erfcinv(1 - r_i) (`population_numbers.swap_length`, r_i the pair's rejection rate, the mean of 1 - A),
    and new exponents where it is equally spaced, a'_k = curve^{-1}(k curve(a_R) / (R - 1)): every pair's
    length then about L / (R - 1), and so its mean A.

    Why lengths: a rejection rate is at most 1, so a pair that barely swaps reads as 1 however wide its gap is
    (on the embedded model the pair at alpha 1 read A 0.01 after the rejection-based update moved its upper
    exponent from 1.22 to 1.12, where the lengths say several replicas fit: log p0 varies there by tens of
    nats); the length keeps growing (6.9 at A 1e-6), equals the rate to first order where the rates are
    small (l ~ sqrt(pi) r), and adds up along the ladder, so curves through different exponents estimate the
    same function.

    `rounds`: every warm-up round so far, (its exponents, its pairs' rejection rates, its weight); a pair a
    round has no rate for (it proposed none) takes the mean of the round's others.  Syed et al.
    keep only the last round's estimate, which their long doubling rounds make precise; a warm-up here spans
    a few barriers, so the curve is the rounds' curves averaged, each weighted by its barriers.  The ends
    stay.  Returns (the new exponents of the last round's R, Lambda: the rounds' rejection rates summed, their
    weighted mean).  A pair that always swapped keeps a sliver of length (so that the curve rises strictly
    and the exponents stay distinct).

    `prior`: the geometric ladder's curve (the length spread evenly over log a, to the rounds' total) joins
    the mean with this weight in barriers.  A pair's swap probability on a language model is nearly 0 or 1
    (the exponents multiply differences of tens of nats), so a round of a few barriers, one or two proposals
    per pair, measures a rate of 0 or 1 where the truth is in between; alone it would squeeze one gap to
    nothing and open another wide.  The prior weighs as much as a warm-up of four barriers and fades as the
    warm-up lengthens."""
    last = np.asarray(rounds[-1][0], dtype=float)
    R = len(last)
    grid = np.unique(np.concatenate([np.asarray(exps, dtype=float) for exps, _, _ in rounds]
                                    + [np.geomspace(last[0], last[-1], 513)]))  # (fine enough for the prior's curve)
    curve, barrier, length, weights = np.zeros_like(grid), 0.0, 0.0, 0.0
    for exps, rejection, weight in rounds:
        a = np.asarray(exps, dtype=float)
        known = [x for x in rejection if x is not None]
        fill = sum(known) / len(known) if known else 0.0
        r = np.clip(np.array([fill if x is None else x for x in rejection], dtype=float), 0.0, 1.0)
        ls = np.array([swap_length(1.0 - x) for x in r])
        barrier += weight * float(r.sum())
        length += weight * float(ls.sum())
        ls = ls + 1e-3 * np.diff(np.log(a)) / math.log(a[-1] / a[0])  # (the sliver: the geometric ladder's shape)
        curve += weight * np.interp(grid, a, np.concatenate([[0.0], np.cumsum(ls)]))
        weights += weight
    barrier /= weights
    length /= weights
    if prior > 0 and grid[-1] > grid[0] > 0:  # (at least the slivers' 1e-3: rounds that always swapped keep it)
        curve += prior * max(length, 1e-3) * np.log(grid / grid[0]) / math.log(grid[-1] / grid[0])
        weights += prior
    curve /= weights
    if R < 3:
        return tuple(float(x) for x in last), barrier
    inner = np.interp(curve[-1] * np.arange(1, R - 1) / (R - 1), curve, grid)  # its inverse: the curve rises strictly
    return (float(last[0]), *(float(x) for x in inner), float(last[-1])), barrier


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
    the ladder, so that a state swapped in from another replica can be scored at this one's own.  An
    adaptive ladder moves a replica's exponent at a warm-up barrier (`retarget`): every part of its chain
    holds this one object, so its next decisions score with the new exponent (its proposals keep their
    temperature, its requests what they report)."""

    def __init__(self, base: SamplerFamily, taus: tuple[float, ...], retempers: bool = True):
        # retempers: a swapped-in state's log q is taken at this replica's temperature (False: the family
        # scores by temperatures of its own, MultiTryMH's, and needs none)
        self.base, self.score_taus, self.retempers = base, taus, retempers

    def retarget(self, base: SamplerFamily) -> None:
        self.base = base

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


def family_of(params: SamplerParams, r: int) -> SamplerFamily:
    """Replica r's decision rule (its family's; with the ladder's score temperatures where it has none, and
    retargetable where the ladder adapts)."""
    base = member_params(params, r).method.family(member_params(params, r))
    exps = ladder(params)
    if base.score_taus:
        return cast(SamplerFamily, Tempered(base, base.score_taus, retempers=False) if adaptive(params) else base)
    if len(exps) == 1:
        return cast(SamplerFamily, base)
    return cast(SamplerFamily, Tempered(base, temperatures(params, exps)))


def retempered(state: SeqState, family: SamplerFamily, tau: float) -> SeqState:
    """`state` as a replica proposing at `tau` scores it: its log q at tau, from the ladder's (a family
    with temperatures of its own scores by them: unchanged)."""
    if not isinstance(family, Tempered) or not family.retempers or not state.logq_at:
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


@dataclass(frozen=True)
class PtLadder(MethodEvent):
    """An adaptive ladder's update after barrier `step` (`--pt-ladder auto`): the pairs' rejection rates this
    warm-up round estimated (`round_rejection`: the mean of 1 - A over the swaps each proposed in it; None:
    none proposed), the communication barrier Lambda of every round so far (`adapted`), and the exponents
    from the next barrier on; `frozen` on the warm-up's last, after which the ladder stays (the exact chain
    for it)."""

    step: int  # the barrier (from 1) after which the exponents change
    block: int
    k: int
    before: tuple[float, ...]  # the exponents of the round
    rejection: tuple[float | None, ...]  # per pair
    barrier: float  # Lambda: the rounds' rejection rates summed (their weighted mean)
    exponents: tuple[float, ...]  # from the next barrier on
    frozen: bool
    clock: float

    def words(self, top_down: bool = False) -> str:
        """The new exponents and the round's rates labelled by pair, top-down as the pairs' rows: '1, 2.1, 3.2, 4
        (rejection 4-3 0.41, 3-2 0.52, 2-1 -; Lambda 1.55)'; `top_down`: the exponents too (the app's rows)."""
        rates = ", ".join(f"{i + 2}-{i + 1} " + ("-" if r is None else f"{r:.2f}")
                          for i, r in reversed(list(enumerate(self.rejection))))
        exps = reversed(self.exponents) if top_down else self.exponents
        return f"{', '.join(f'{a:.3g}' for a in exps)} (rejection {rates}; Lambda {self.barrier:.2f})"


def _encode_ladder(ev: PtLadder) -> dict:
    return {"step": ev.step, "block": ev.block, "k": ev.k, "before": list(ev.before),
            "rejection": [None if r is None else r for r in ev.rejection], "barrier": ev.barrier,
            "exponents": list(ev.exponents), "frozen": ev.frozen, "clock": ev.clock}


def _decode_ladder(d: dict) -> PtLadder:
    g = lambda key: get(d, key)
    before = tuple(read_finite(a, "before", 0.0) for a in read_list(g("before"), "before"))
    exps = tuple(read_finite(a, "exponents", 0.0) for a in read_list(g("exponents"), "exponents"))
    check(len(before) == len(exps) >= 1, "exponents", "should hold one exponent per replica, as before does")
    rejection = tuple(None if r is None else read_finite(r, "rejection", 0.0, 1.0)
                      for r in read_list(g("rejection"), "rejection"))
    check(len(rejection) == len(exps) - 1, "rejection", "should hold one rate per pair of neighbours")
    return PtLadder(read_int(g("step"), "step", 1), read_int(g("block"), "block", 0), read_int(g("k"), "k", 0), before,
                    rejection, read_finite(g("barrier"), "barrier", 0.0), exps, read_bool(g("frozen"), "frozen"),
                    read_finite(g("clock"), "clock", 0.0))


PT_LADDER = EventType("pt_ladder", PtLadder, _encode_ladder, _decode_ladder)


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
        # an adaptive ladder's warm-up: the barriers it updates after, the round's swaps (lower level, A) and
        # barriers, and every round's (exponents, rejection rates, barriers) so far
        self.updates = updates(p) if adaptive(p) and R > 1 else ()
        self._swaps: list[tuple[int, float]] = []
        self._round_barriers = 0
        self._rounds: list[tuple[tuple[float, ...], tuple[float | None, ...], float]] = []
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
                self.emit(ev)

    def pairs(self, s: int) -> list[int]:
        """The pairs (by their lower level) that propose to swap at barrier s (from 1)."""
        p, R = self.params, len(self.members)
        if p.pt_scheme == SCHEMES[0]:  # deterministic even/odd: the pairs (from 1) of the barrier's (from 1) parity
            return deo_pairs(s, R)
        return [min(R - 2, int(swap_uniform(p.seed, s, 0) * (R - 1)))]

    def keeps(self, i: int) -> bool:
        """A replica in no pair of its next barrier keeps its state there for certain; one in a pair, where the
        barriers so far (those that did not pair it included) left its state as it was at least as often as not
        (the usual case on a language model's ladder).  A guess for speculation only: the law does not see it."""
        s = self.crossed + 1
        paired = any(j in (i, i - 1) for j in self.pairs(s)) if len(self.members) > 1 else False
        return not paired or self.kept_mostly(i)

    def cross(self, barrier: Barrier, states: list[SeqState]) -> list[SeqState]:
        p, s = self.params, self.crossed + 1
        pairs = self.pairs(s)
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
        if self.updates and s <= self.updates[-1]:  # (the warm-up round's swaps)
            self._swaps.extend(zip(pairs, probs))
            self._round_barriers += 1
        self._record(barrier, s, tuple(pairs), tuple(probs), tuple(swapped), out, final=False)
        if s in self.updates:
            self._adapt(barrier, s)
        return out

    def _adapt(self, barrier: Barrier, s: int) -> None:
        """A warm-up round ends at barrier s: the ladder moves to equal lengths between neighbours (`adapted`, from
        every round's estimates so far, each `round_rejection` over its swaps), and freezes at the warm-up's last.
        Each replica's decisions score with its new exponent from its next transition on
        (`Tempered.retarget`); its proposals keep their temperature, so every state it holds keeps the log q
        its decisions need."""
        before = self.exponents
        rates = round_rejection(len(before), self._swaps)
        self._rounds.append((before, rates, float(self._round_barriers)))
        self._swaps, self._round_barriers = [], 0
        new, barrier_sum = adapted(self._rounds)
        frozen = s == self.updates[-1]
        self.emit(PtLadder(s, barrier[0], barrier[1], before, rates, barrier_sum, new, frozen, self.clock()))
        self.exponents = new
        p = self.params
        for r, (m, family) in enumerate(zip(self.members, self.families)):
            mp = member_params(p, r).with_(alpha=new[r])  # (its temperature stays the start ladder's)
            if isinstance(family, Tempered):
                family.retarget(cast(SamplerFamily, mp.method.family(mp)))
            m.params = mp

    def _record(self, barrier: Barrier, step: int, pairs: tuple[int, ...], probs: tuple[float, ...],
                swapped: tuple[bool, ...], states: list[SeqState], final: bool) -> None:
        self.emit(PtStep(step, barrier[0], barrier[1], self.exponents, pairs, probs, swapped,
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
        self.emit(Choice(self.lead, f"the alpha replica's state (replica {R} of {R})",
                                tuple(math.fsum(x.logp) for x in states), loglik, confidence))
        self.state = answer


# -- its numbers ----------------------------------------------------------------------------------

class PptInfo(OneShotInfo):
    """Swaps proposed and accepted per pair of neighbouring replicas, round trips, MH acceptance per replica:
    read off the one fold of the ladder's records (`population_numbers.LadderNumbers`)."""

    def __init__(self) -> None:
        super().__init__()
        self.ladder = LadderNumbers()  # per pair mean A, Lambda, the index process, round trips (this ladder's)
        self.ladder_given = False  # the exponents given (--pt-ladder), not geometric from --pt-alpha-min
        self.ladders: list[PtLadder] = []  # an adaptive ladder's updates (the last frozen)

    def update(self, ev: object) -> None:
        super().update(ev)
        if isinstance(ev, SessionStart):
            self.ladder_given = bool(ev.params.get("pt_ladder")) and ev.params.get("pt_ladder") != AUTO
        elif isinstance(ev, PtLadder):
            self.ladders.append(ev)
        elif isinstance(ev, PtStep):  # (a move of the ladder starts its numbers again: the warm-up's kept apart)
            self.ladder.update(ev)

    # (the fold's numbers under the names the app and the JSON read; per pair and per replica from the lowest)
    @property
    def exponents(self) -> tuple[float, ...]:
        return self.ladder.exponents

    @property
    def proposed(self) -> list[int]:
        return self.ladder.proposed

    @property
    def swaps(self) -> list[int]:
        return self.ladder.accepted

    @property
    def transitions(self) -> list[int]:
        return self.ladder.transitions

    @property
    def accepted(self) -> list[int]:
        return self.ladder.moves_accepted

    @property
    def round_trips(self) -> int:
        return self.ladder.round_trips

    @property
    def barriers(self) -> int:
        return self.ladder.barriers

    def rates(self) -> list[float | None]:
        return self.ladder.accepted_share()

    def to_dict(self) -> dict[str, Any]:
        if not self.exponents:
            return super().to_dict()
        return {**super().to_dict(), "replicas": len(self.exponents), "exponents": list(self.exponents),
                "swap_barriers": self.barriers, "round_trips": self.round_trips,  # (each pair's: `ladder.pairs`)
                "replica_acceptance": [a / n if n else None for n, a in zip(self.transitions, self.accepted)],
                **self.ladder.to_dict(),
                **({"ladder_updates": [{"after_barrier": u.step, "rejection": list(u.rejection),
                                        "barrier": u.barrier, "exponents": list(u.exponents), "frozen": u.frozen}
                                       for u in self.ladders],
                    "warmup_swaps": [{"pair": [i + 1, i + 2], "proposed": n, "accepted": a}
                                     for i, (n, a) in enumerate(self.ladder.earlier_swaps)]} if self.ladders else {})}

    def member_moves(self) -> list[tuple[int, int]]:
        return list(zip(self.transitions, self.accepted))

    def rows(self) -> list[tuple[str, str]]:
        if not self.exponents:
            return super().rows()
        # top-down, as the app's grid shows them: the alpha replica first
        moves = "  ".join(f"r{r + 1} {n}" + ("" if not n else f" ({a / n:.2f})")
                          for r, (n, a) in reversed(list(enumerate(zip(self.transitions, self.accepted)))))
        return [("replicas (exponents)", f"{len(self.exponents)} ({', '.join(f'{a:.3g}' for a in self.exponents)})"),
                *self.ladder_rows(),
                *self.ladder.rows(),
                ("MH transitions per replica (acceptance)", f"{moves}; {sum(self.transitions)} in all"),
                *super().rows()]

    def frozen(self) -> PtLadder | None:
        return self.ladders[-1] if self.ladders and self.ladders[-1].frozen else None

    def ladder_rows(self) -> list[tuple[str, str]]:
        """An adaptive ladder's moves: 'ladder moved after barrier 2' '1, 2.1, 3.2, 4 (rejection 4-3 0.41, 3-2
        0.52, 2-1 0.62; Lambda 1.55)': the new exponents, the round's rates labelled top-down as the pairs' rows."""
        return [(f"ladder {'frozen' if u.frozen else 'moved'} after barrier {u.step}", u.words()) for u in self.ladders]

    def drawn(self) -> str:
        """'R=4 A 4-3 .62 3-2 .41 2-1 .05, 3 trips': replicas, each pair's mean swap probability (top-down, as the
        app's grid shows them; '-' where none was proposed), round trips."""
        R = len(self.exponents)
        if R < 2:
            return f"R={R}"
        means = self.ladder.mean_accept()
        pairs = " ".join(f"{i + 2}-{i + 1} " + ("-" if m is None else f"{m:.2f}".lstrip("0"))
                         for i, m in reversed(list(enumerate(means))))
        return f"R={R} A {pairs}, {self.round_trips} trips"

    def notes(self) -> list[str]:
        out = []
        if len(self.exponents) > 1 and not self.barriers:
            out.append("no swap was proposed: --pt-swap-every is more than the transitions of the whole response")
        suggested = self.ladder.suggested_replicas
        more = (f"the ladder's length suggests about {suggested} replicas, {len(self.exponents)} ran"
                if suggested is not None and suggested > len(self.exponents) else "")
        for i, (n, a) in enumerate(zip(self.proposed, self.swaps)):
            if n >= REFUSED_NOTE and not a:
                remedy = ("exponents closer together there in --pt-ladder narrow the gap" if self.ladder_given else
                          "more replicas, or a higher --pt-alpha-min, narrow the gap")
                out.append(f"no swap between replicas {i + 1} and {i + 2} (alpha {self.exponents[i]:.3g} and "
                           f"{self.exponents[i + 1]:.3g}) was accepted in {n} tries: states cannot travel the "
                           f"ladder there ({remedy}{'; ' + more if more else ''})")
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
    events = (PT_STEP, PT_LADDER)
    view_state: ClassVar[str | None] = "presto_tui.views.state.ppt:PptRun"
    view: ClassVar[str | None] = "presto_tui.views.widgets.ppt:ReplicaGrid"
    params = (
        Param("pt_replicas", int, 4, "PPT: replicas R (the ladder's exponents, geometric from --pt-alpha-min to "
              "alpha; --pt-ladder gives them instead)", Group.OWN, "replicas R (PPT)",
              limit=REPLICAS, symbol="R"),
        Param("pt_alpha_min", float, 1.0, "PPT: the lowest exponent of the geometric ladder (1: p0 itself)",
              Group.OWN, "lowest exponent (PPT)", limit=Limit(0, 1000, lo_open=True), symbol="amin"),
        Param("pt_ladder", str, None, "PPT: the exponents as a comma list, ascending, the last alpha (instead of "
              "--pt-replicas and --pt-alpha-min), or auto: R exponents from --pt-alpha-min to alpha tuned in a "
              "warm-up (--pt-warmup) towards equal swap acceptance between neighbours (Syed et al. 2022's update on "
              "the pairs' lengths), then frozen", Group.OWN,
              "ladder (PPT; empty: geometric)", optional=True,
              default_text="geometric", metavar="A1,...,AR|auto", symbol="ladder", reader=read_ladder,
              extra={"hint": "takes exponents above 0 separated by commas, or auto"}),
        Param("pt_warmup", int, None, "PPT: with --pt-ladder auto, the warm-up W: the first W transitions (counted "
              "over the whole response) tune the exponents, which then stay", Group.OWN, "ladder warm-up W (PPT; "
              "empty: half)", limit=Limit(1, 1_000_000, integer=True), optional=True,
              default_text="half the response's transitions", symbol="W"),
        Param("pt_swap_every", int, 2, "PPT: neighbours propose to swap after every S transitions (counted over the "
              "whole response)", Group.OWN, "swap every S transitions (PPT)", limit=Limit(1, 1_000_000, integer=True),
              symbol="S"),
        Param("pt_scheme", str, SCHEMES[0], "PPT: which neighbours propose to swap at a barrier", Group.OWN,
              "swap scheme (PPT)", choices=lambda: (
                  ("deo", "pairs 1-2, 3-4, ... at odd barriers, 2-3, 4-5, ... at even ones: non-reversible, "
                          "Syed et al. 2019"),
                  ("random", "one pair drawn uniformly")), symbol=""),
        Param("pt_family", str, POWERMH.name, "PPT: the MH chain each replica runs", Group.OWN, "replica chain (PPT)",
              choices=_families, metavar="NAME", symbol=""),
    )

    def describe(self, p: Mapping[str, Any]) -> str:
        """'PPT R=4 alpha 1..4 S=2 deo PowerMH, PreSTO stream N=auto' (a ladder given: its exponents; one
        replica: 'R=1 alpha 4', the family's chain)."""
        m = registry.find(p.get("pt_family"))
        family = m.display if m is not None else p.get("pt_family")
        if p.get("pt_ladder") == AUTO:
            warm = f" W={p.get('pt_warmup')}" if p.get("pt_warmup") is not None else ""
            ladder_text = (f"R={p.get('pt_replicas')} ladder auto{warm} from alpha "
                           f"{number_text(p['pt_alpha_min'])}..{number_text(p['alpha'])}")
        elif p.get("pt_ladder"):
            ladder_text = f"R={len(str(p.get('pt_ladder')).split(','))} ladder {p.get('pt_ladder')}"
        elif int(p.get("pt_replicas") or 1) == 1:
            ladder_text = f"R=1 alpha {number_text(p['alpha'])}"
        else:
            ladder_text = f"R={p.get('pt_replicas')} alpha {number_text(p['pt_alpha_min'])}..{number_text(p['alpha'])}"
        return f"{self.display} {ladder_text} S={p.get('pt_swap_every')} {p.get('pt_scheme')} {family}, {rule_words(p)}"

    def check(self, params: SamplerParams, naming: Naming) -> None:
        if adaptive(params):
            total, W, S = params.n_blocks * params.steps, warmup(params), params.pt_swap_every
            if params.pt_replicas < 2:
                raise ParamError.about("pt_ladder", "{pt_ladder} auto tunes a ladder of {pt_replicas} 2 or more, got "
                                       "{0}", params.pt_replicas, naming=naming)
            if not 2 * S <= W < total:
                raise ParamError.about("pt_warmup", "{pt_warmup} {0} should span two swap barriers at least ({1} "
                                       "transitions, {pt_swap_every} {2}) and leave transitions after it (fewer than "
                                       "the response's {3})", W, 2 * S, S, total, naming=naming)
        elif params.pt_warmup is not None:
            raise ParamError.about("pt_warmup", "{pt_warmup} applies to {pt_ladder} auto only", naming=naming)
        if params.pt_ladder and not adaptive(params):
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
        elif params.pt_replicas > 1 and params.pt_alpha_min >= params.alpha:  # (geometric or auto)
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

    def check_given(self, params: SamplerParams, given: frozenset[str], naming: Naming) -> None:
        """A ladder given sets R and the lowest exponent: --pt-replicas or --pt-alpha-min beside it must say the
        same (the trace records the ladder's: `resolved`), or they are refused."""
        if not params.pt_ladder or adaptive(params):
            return
        exps = ladder(params)
        if "pt_replicas" in given and params.pt_replicas != len(exps):
            raise ParamError.about("pt_replicas", "{pt_replicas} {0} contradicts {pt_ladder} {1} ({2} replicas): "
                                   "the ladder sets them, drop {pt_replicas}", params.pt_replicas, params.pt_ladder,
                                   len(exps), naming=naming)
        if "pt_alpha_min" in given and not math.isclose(params.pt_alpha_min, exps[0], rel_tol=1e-9):
            raise ParamError.about("pt_alpha_min", "{pt_alpha_min} {0} contradicts {pt_ladder} {1} (its lowest "
                                   "exponent {2}): the ladder sets it, drop {pt_alpha_min}",
                                   number_text(params.pt_alpha_min), params.pt_ladder, number_text(exps[0]),
                                   naming=naming)

    def warmup_transitions(self, p: Mapping[str, Any]) -> int:
        return int(p.get("pt_warmup") or 0) if adaptive(p) else 0  # (the trace records the W that ran)

    def resolved(self, params: SamplerParams) -> dict[str, Any]:
        """With a ladder given, R and the lowest exponent are the ladder's: what ran, as the trace records it (an
        adaptive ladder's warm-up: its W)."""
        if adaptive(params):
            return {"pt_warmup": warmup(params)}
        if not params.pt_ladder:
            return {}
        exps = ladder(params)
        return {"pt_replicas": len(exps), "pt_alpha_min": exps[0]}

    def family(self, params: SamplerParams) -> SamplerFamily:
        """The alpha replica's decision rule."""
        return family_of(params, len(ladder(params)) - 1)

    def chain_exponents(self, params: SamplerParams) -> tuple[float, ...]:
        return ladder(params)

    def members(self, params: SamplerParams) -> list[SamplerParams]:
        return [member_params(params, r) for r in range(len(ladder(params)))]

    def member_count(self, params: SamplerParams) -> int:
        return len(ladder(params))

    def member_samplers(self, params: SamplerParams) -> set[str]:
        return {member_params(params, 0).sampler}  # (every replica runs the family's chain)

    def info(self) -> MethodInfo:
        return PptInfo()


METHOD = ParallelPowerTempering()
