"""The law-test kit: check that a sampling method draws what it claims, on a model small enough to enumerate.

presto-tui's own exactness tests use these checks on every built-in method; a method author (a
plugin, `presto_tui.plugin`) runs them on theirs.  Each takes the method's parameters
(`presto_tui.Params(sampler="...", ...)`), runs real sessions of it on the synthetic engine, and
returns what it measured; `assert_=True` (the default) raises AssertionError with the numbers
when a check fails, so each is one line in a pytest test.

- `enumerable(vocab, ...)`: a synthetic model with `vocab` tokens and no EOS, whose every response
  of n tokens can be listed, and `exact_law(engine, prompt, n, alpha)`: pi_alpha over them, exactly.
- `check_law(params)`: the law of the method's answers over `sessions` seeds against pi_alpha:
  total variation with its 95% bootstrap interval against the noise floor of an exact sampler with
  as many draws (the frontier's `distance` and `exact_floor`).  Passes when the interval reaches
  the floor.  For an approximate method (best-of-N, PowerSMC, SPS) read `tv` instead: how far it is.
- `check_invariance(params)`: an MH kernel leaves pi_alpha invariant: chains started from exact
  draws of pi_alpha (one block, no extension) still follow pi_alpha after their K transitions.
  Sharper than `check_law` for an MH chain (it needs no mixing) and fast.  A method whose chains
  target different exponents (`Method.chain_exponents`: a tempering ladder) starts each chain from
  an exact draw of its own p0^a.
- `check_coupling(params)`: every PreSTO rule reproduces the sequential chain token for token
  (decision inputs: the state after every extension and every transition, at several budgets and
  seeds), the property that makes PreSTO exact.  For a population (several chains in one
  session: `Method.population`) what the session records is compared: its method's own events
  (every field but the engine's clock: each chain's state at every barrier, swaps, weights,
  resampling), the draws it reports and its answer.
- `check_pit(params)`: every realized MH transition draws its cut from the method's own cut law,
  accepts with probability A, and draws each proposed token from q_tau (every candidate's, for a
  multiple-try decision: the selection among them is the invariance check's): their randomized
  probability integral transforms must be uniform (what a traversal rule that skews what it
  lets through breaks, long before the K-step law shows it).  It reads one chain's rounds: a
  population's members are its family's chains, checked as that family.

    from presto_tui import Params, testing

    def test_my_method_is_exact():
        params = Params(sampler="mine", max_new_tokens=3, steps=8)
        testing.check_invariance(params)
        testing.check_coupling(params.with_(max_new_tokens=8))
        testing.check_pit(params.with_(max_new_tokens=8))
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from presto_tui.runtime.core import registry
from presto_tui.runtime.core.names import PrefetchRule
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.engines.synthetic import ResponseLaw, SyntheticEngine, SyntheticLM
from presto_tui.runtime.samplers.families import sampler_family
from presto_tui.runtime.session.distance import Distance, distance, exact_floor
from presto_tui.runtime.session.events import BlockStart, RoundDone, SessionEnd, Transition
from presto_tui.runtime.session.loop import make_driver, run_chains

__all__ = ["CouplingReport", "Distance", "LawReport", "check_coupling", "check_invariance", "check_law",
           "check_pit", "distance", "enumerable", "exact_floor", "exact_law"]

P_MIN = 1e-4  # a PIT's uniformity p-value below this fails (its seeds are fixed: a correct method is far above)
AT_ONCE = 64  # sessions on the engine at once


def enumerable(vocab: int = 3, *, sharpness: float = 1.0, seed: int = 1, order: int = 2) -> SyntheticEngine:
    """A synthetic model of `vocab` tokens and no EOS: every response of n tokens (vocab^n of them) can be
    listed, so pi_alpha is known exactly (`exact_law`)."""
    return SyntheticEngine(SyntheticLM(vocab_size=vocab, order=order, seed=seed, sharpness=sharpness, eos_id=None))


def exact_law(engine: Any, prompt: Sequence[int], n: int, alpha: float) -> ResponseLaw:
    """pi_alpha ∝ p0^alpha over every response of n tokens after `prompt`, exactly (`engine`: a synthetic
    one, or a `presto_tui.Engine(backend="synthetic", synthetic_vocab=V)`)."""
    engine = _engine(engine)
    why = engine.not_enumerable(n)
    if why is not None:
        raise ValueError(why)
    return engine.power_law(prompt, n, alpha)


@dataclass(frozen=True)
class LawReport:
    """A method's answers against pi_alpha."""

    sessions: int
    tv: float  # the estimated total variation of the method's law from pi_alpha
    low: float  # its 95% interval
    high: float
    floor: float  # where an exact sampler with as many draws would sit
    foreign: int  # answers that are not responses of n tokens (none for a correct method)

    @property
    def within_noise(self) -> bool:
        return self.foreign == 0 and self.low <= self.floor

    def __str__(self) -> str:
        verdict = "within noise of pi_alpha" if self.within_noise else "away from pi_alpha"
        return (f"TV {self.tv:.4f} [{self.low:.4f}, {self.high:.4f}] over {self.sessions} sessions, noise floor "
                f"{self.floor:.4f}: {verdict}" + (f"; {self.foreign} answers of another length" if self.foreign
                                                   else ""))


def _engine(engine: Any) -> SyntheticEngine:
    """The synthetic engine the checks drive: the one given (a `presto_tui.Engine`'s), or `enumerable()`."""
    engine = getattr(engine, "runtime", engine)
    if engine is None:
        return enumerable()
    if not isinstance(engine, SyntheticEngine):
        raise ValueError("the law-test kit runs on the synthetic engine (its model can be enumerated)")
    return engine


def _answers(engine: SyntheticEngine, params: SamplerParams, prompt: Sequence[int], seeds: Sequence[int],
             states: Sequence[SeqState] | None = None) -> list[tuple[int, ...]]:
    """The final tokens of one session per seed (chain i started from states[i] where given)."""
    drivers = (make_driver(engine, params.with_(seed=s), list(prompt), state=states[i] if states else None)
               for i, s in enumerate(seeds))
    out: dict[int, tuple[int, ...]] = {}
    for i, ev in run_chains(engine, drivers, concurrency=AT_ONCE):
        if isinstance(ev, SessionEnd):
            out[i] = tuple(ev.tokens)
    return [out[i] for i in range(len(seeds))]


def _report(engine: SyntheticEngine, answers: list[tuple[int, ...]], law: ResponseLaw, seed: int) -> LawReport:
    counts = np.zeros(len(law.probs))
    foreign = 0
    for tokens in answers:
        at = law.index(tokens)
        if at is None:
            foreign += 1
        else:
            counts[at] += 1
    rng = np.random.default_rng(seed)
    d = distance([(counts, law.probs)], rng)
    floor = exact_floor(law.probs, int(counts.sum()), rng)
    return LawReport(len(answers), d.tv, d.low, d.high, floor, foreign)


def _fail(what: str, params: SamplerParams, detail: str) -> AssertionError:
    return AssertionError(f"{params.sampler} ({params.prefetch}): {what}: {detail}")


def check_law(params: SamplerParams, *, engine: Any = None, prompt: Sequence[int] = (1,),
              sessions: int = 400, seed: int = 0, assert_: bool = True) -> LawReport:
    """The law of `params`' answers (sessions from the prompt, seeds 0..sessions-1) against pi_alpha
    (see the module docstring).  An MH chain's law reaches pi_alpha only once it has mixed: give it
    enough K (or use `check_invariance`)."""
    engine = _engine(engine)
    law = exact_law(engine, prompt, params.max_new_tokens, params.alpha)
    report = _report(engine, _answers(engine, params, prompt, range(seed, seed + sessions)), law, seed)
    if assert_ and not report.within_noise:
        raise _fail("its answers are not pi_alpha's", params, str(report))
    return report


def check_invariance(params: SamplerParams, *, engine: Any = None, prompt: Sequence[int] = (1,),
                     chains: int = 2000, seed: int = 0, assert_: bool = True) -> LawReport:
    """An MH chain method's kernel leaves pi_alpha invariant: `chains` chains, each started from an exact
    draw of pi_alpha (one block of n tokens: no extension), follow pi_alpha after their K transitions."""
    engine = _engine(engine)
    if sampler_family(params) is None:
        raise ValueError(f"{params.sampler} is not an MH chain method: use check_law")
    n = params.max_new_tokens
    params = params.with_(block_size=None)  # one block, started from the given state
    law = exact_law(engine, prompt, n, params.alpha)
    rng = np.random.default_rng(seed)
    taus = sampler_family(params).score_taus
    exponents = params.method.chain_exponents(params)
    laws = [law if a == params.alpha else exact_law(engine, prompt, n, a) for a in exponents]
    # one exact draw per chain of each session, from the law its chain targets (one for all where they agree)
    picks = [[int(i) for i in rng.choice(len(lw.probs), size=chains, p=lw.probs)] for lw in laws]
    states: list = []
    for c in range(chains):
        drawn = [_state(engine, prompt, _response(lw, pk[c]), params.proposal_tau, taus) for lw, pk in zip(laws, picks)]
        states.append(drawn[0] if len(drawn) == 1 else tuple(drawn))
    report = _report(engine, _answers(engine, params, prompt, range(seed, seed + chains), states), law, seed)
    if assert_ and not report.within_noise:
        raise _fail("its kernel does not leave pi_alpha invariant", params, str(report))
    return report


def _response(law: ResponseLaw, index: int) -> tuple[int, ...]:
    """The response of n tokens at `index` of the law (its tokens are the index's digits in base V)."""
    digits = []
    for _ in range(law.n):
        index, t = divmod(index, law.vocab)
        digits.append(t)
    return tuple(reversed(digits))


def _state(engine: SyntheticEngine, prompt: Sequence[int], tokens: Sequence[int], tau: float,
           taus: Sequence[float] = ()) -> SeqState:
    """A chain's state holding `tokens` after the prompt, with the model's values for them (log q at the
    method's own score temperatures too, as an engine reports them)."""
    logq, logp, ent = [], [], []
    at: list[list[float]] = [[] for _ in taus]
    ctx = list(prompt)
    for t in tokens:
        lp, lq, h = engine.lm.log_probs(ctx, tau)
        logq.append(float(lq[t]))
        logp.append(float(lp[t]))
        ent.append(h)
        for row, other in zip(at, taus):
            row.append(float(engine.lm.log_probs(ctx, other)[1][t]))
        ctx.append(int(t))
    return SeqState(tuple(prompt)).extended(Proposal(tuple(int(t) for t in tokens), tuple(logq), tuple(logp),
                                                     tuple(ent), tuple(tuple(row) for row in at)))


@dataclass(frozen=True)
class CouplingReport:
    compared: int  # trajectories compared with the sequential chain's
    transitions: int  # states compared in them


UNTIMED = ("wall_s", "clock")  # fields of a method's event that the engine's clock sets, not the chain


def _trajectory(engine: SyntheticEngine, params: SamplerParams, prompt: Sequence[int]) -> list[Any]:
    """The chain's generated tokens after every block extension and every transition; a population's
    own events (but their times), draws and answer."""
    states: list[Any] = []
    whole = not params.method.rounds
    for _, ev in run_chains(engine, [make_driver(engine, params, list(prompt))]):
        if isinstance(ev, BlockStart):
            states.append(tuple(ev.tokens))
        elif isinstance(ev, RoundDone):
            states.extend(s.tokens for s in ev.tree.states_after_steps())
        elif whole and isinstance(ev, Transition):
            states.append((ev.block, ev.k, ev.accepted, ev.log_target))
        elif whole and isinstance(ev, SessionEnd):
            states.append(tuple(ev.tokens))
        elif whole and (kind := registry.event_type_of(ev)) is not None:
            states.append(json.dumps({k: v for k, v in kind.encode(ev).items() if k not in UNTIMED}, sort_keys=True))
    return states


def check_coupling(params: SamplerParams, *, engine: Any = None, prompt: Sequence[int] = (1, 2),
                   rules: Sequence[str] | None = None, budgets: Sequence[int] = (1, 2, 8),
                   seeds: Sequence[int] = (0, 1, 2)) -> CouplingReport:
    """Every PreSTO rule (`rules`, default all) at every budget reproduces the sequential chain's states
    after every extension and transition, token for token, for every seed (decision inputs).
    AssertionError names the first state that differs."""
    engine = _engine(engine) if engine is not None else SyntheticEngine(SyntheticLM(vocab_size=5, order=2, seed=1,
                                                                                     sharpness=1.5))
    rules = tuple(rules) if rules is not None else PrefetchRule.presto_names()
    compared = transitions = 0
    for seed in seeds:
        sequential = _trajectory(engine, params.with_(prefetch=PrefetchRule.NONE.value, inputs="decision",
                                                      seed=seed), prompt)
        for rule in rules:
            for budget in budgets:
                try:
                    p = params.with_(prefetch=rule, inputs="decision", budget=budget, seed=seed).validate()
                except ValueError:
                    continue  # a budget the method cannot take (MultiTryMH needs its tries in one call)
                got = _trajectory(engine, p, prompt)
                for i, (a, b) in enumerate(zip(got, sequential)):
                    if a != b:
                        raise _fail(f"PreSTO {rule} N={budget} leaves the sequential chain", p,
                                    f"seed {seed}, state #{i + 1} (extensions and transitions, or a population's "
                                    f"records, counted from 1): {_shown(a)} instead of {_shown(b)}")
                if len(got) != len(sequential):
                    raise _fail(f"PreSTO {rule} N={budget} made {len(got)} states", p,
                                f"the sequential chain made {len(sequential)} (seed {seed})")
                compared += 1
                transitions += len(got)
    return CouplingReport(compared, transitions)


def _shown(record: Any) -> str:
    return str(list(record)) if isinstance(record, tuple) and all(isinstance(t, int) for t in record) else str(record)


def _discrete_pit(probs: Sequence[float] | np.ndarray, k: int, v: float) -> float:
    """The randomized PIT of outcome k under `probs`: F(k-1) + v p(k), uniform on [0, 1) when k ~ probs."""
    p = np.asarray(probs, dtype=float)
    p = p / p.sum()
    return float(p[:k].sum() + v * p[k])


def _uniformity_p(u: Sequence[float]) -> float:
    from scipy import stats

    return float(stats.kstest(u, "uniform").pvalue)


def check_pit(params: SamplerParams, *, engine: Any = None, prompt: Sequence[int] = (1, 2),
              chains: int = 150, seed: int = 0, assert_: bool = True) -> dict[str, float]:
    """The PITs of every realized transition of `chains` chains (see the module docstring): the cut under
    the method's own cut law for the state the chain held, the accept decision against the A the kernel
    scored, and every token of the move's proposal under q_tau from the model's exact conditionals.
    Returns each stream's Kolmogorov-Smirnov p-value for uniformity."""
    engine = _engine(engine) if engine is not None else SyntheticEngine(SyntheticLM(vocab_size=5, order=2, seed=4,
                                                                                     sharpness=1.2))
    family = sampler_family(params)
    if family is None:
        raise ValueError(f"{params.sampler} is not an MH chain method: it has no transitions to check")
    if not params.method.rounds:
        raise ValueError(f"{params.sampler} runs several chains in a session and records none's rounds: check "
                         "its members' method (its family) instead")
    rng = np.random.default_rng(12345 + seed)
    streams: dict[str, list[float]] = {"cut": [], "accept": [], "tokens": []}
    for s in range(seed, seed + chains):
        for _, ev in run_chains(engine, [make_driver(engine, params.with_(seed=s), list(prompt))]):
            if not isinstance(ev, RoundDone):
                continue
            tree = ev.tree
            before = [tree.root, *tree.states_after_steps()[:-1]]
            for state, step in zip(before, tree.steps):
                dec = tree.decisions[step.decision]
                law = [math.exp(family.law.log_prob(c, state)) for c in range(state.T)]
                streams["cut"].append(_discrete_pit(law, dec.cut, rng.random()))
                # every request the decision made (a multiple-try decision's candidates, not only the one
                # selected, whose tokens the selection has weighed)
                for r in dec.candidates or ((dec.request,) if dec.request is not None else ()):
                    req = tree.requests[r]
                    ctx = list(state.prompt) + list(state.tokens[:dec.cut])
                    for tok in req.proposal.tokens:
                        _, logq, _ = engine.lm.log_probs(ctx, req.tau)
                        streams["tokens"].append(_discrete_pit(np.exp(logq), tok, rng.random()))
                        ctx.append(tok)
                A = tree.scores[(step.decision, step.src)].accept_prob
                v = rng.random()
                streams["accept"].append(v * A if step.accepted else A + v * (1 - A))
    pvalues = {name: _uniformity_p(u) for name, u in streams.items() if u}
    if assert_:
        bad = {k: p for k, p in pvalues.items() if p < P_MIN}
        if bad:
            raise _fail("its transitions do not draw from their laws", params,
                        ", ".join(f"{k} PIT p={p:.2e}" for k, p in bad.items()))
    return pvalues
