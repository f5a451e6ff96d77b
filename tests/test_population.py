"""Parallel power tempering and resample-move: what their sessions record, held against numbers
re-derived here from the model's conditionals (`oracle.py`), and the populations of one chain
being the chain itself.  Their exactness under every PreSTO rule is tests/test_coupling.py's
(`test_presto_reproduces_every_member_of_a_population`), their laws tests/test_law.py's."""

from __future__ import annotations

import json
import math

import numpy as np
import oracle
import pytest
from helpers import small_backend
from scipy import stats

from presto_tui.errors import TraceError
from presto_tui.logs.reader import read_trace
from presto_tui.logs.schema import decode, encode
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.fields import SchemaError
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import member_seed, resample_uniform, swap_uniform
from presto_tui.runtime.core.spec import ParamError
from presto_tui.runtime.methods.ppt import PT_STEP, PptInfo, PtStep, ladder
from presto_tui.runtime.methods.resample_move import RM_STEP, RmStep
from presto_tui.runtime.session.events import (
    TRANSIENT,
    Choice,
    MemberEvent,
    RoundDone,
    SessionEnd,
    SessionStart,
    Transition,
)
from presto_tui.runtime.session.runner import run_session
from presto_tui.runtime.session.summary import summarize

PROMPT = (1, 2)


def events_of(params, backend=None, prompt=PROMPT):
    b = backend or small_backend(vocab=7, sharpness=1.2)
    return b, list(run_session(b, params, list(prompt)))


# -- a population of one is its chain ------------------------------------------------------------

@pytest.mark.parametrize("rule", ["none", "spine", "stream"])
@pytest.mark.parametrize("population", [dict(sampler="ppt", pt_replicas=1),
                                        dict(sampler="resample-move", particles=1, rm_ess=0.5)])
def test_a_population_of_one_is_the_powermh_chain_token_for_token(rule, population):
    """PPT with one replica and resample-move with one particle are PowerMH: the same answer, and the
    same state after every transition (the member keeps the session seed and PowerMH's requests)."""
    for seed in (0, 1):
        sizes = dict(max_new_tokens=12, block_size=4, steps=5, seed=seed, prefetch=rule, budget=4)
        _, mine = events_of(SamplerParams(**population, **sizes))
        _, chain = events_of(SamplerParams(sampler="powermh", **sizes))
        end = lambda evs: next(e for e in evs if isinstance(e, SessionEnd)).tokens
        assert end(mine) == end(chain)
        log_targets = lambda evs: [e.log_target for e in evs if isinstance(e, Transition)]
        if population["sampler"] == "ppt":  # (the alpha replica's draws are the session's)
            assert log_targets(mine) == log_targets(chain) and len(log_targets(chain)) == 15


# -- parallel tempering ------------------------------------------------------------------------------

def test_the_default_ladder_is_geometric_and_a_given_one_is_taken_as_written():
    p = SamplerParams(sampler="ppt", alpha=8.0, pt_replicas=4, pt_alpha_min=1.0)
    assert ladder(p) == pytest.approx((1.0, 2.0, 4.0, 8.0))
    assert ladder(p.with_(pt_ladder="1, 3,8")) == (1.0, 3.0, 8.0)
    assert p.method.chain_exponents(p) == ladder(p)


@pytest.mark.parametrize("values,words", [
    (dict(pt_ladder="1,2,3"), "last exponent is the target's"),
    (dict(pt_ladder="2,1,4"), "ascending order"),
    (dict(pt_ladder="1,x,4"), "exponents above 0 separated by commas"),
    (dict(pt_alpha_min=4.0), "must lie below --alpha 4"),
    (dict(pt_alpha_min=0.001), "would propose at temperature"),
    (dict(pt_family="bestofn"), "--pt-family"),
])
def test_a_ladder_that_cannot_run_is_refused_in_one_line(values, words):
    from presto_tui.runtime.core.params import params_from

    with pytest.raises(ParamError) as e:
        params_from({"sampler": "ppt", **values})
    assert words in str(e.value) and "\n" not in str(e.value)


def pt_steps(events):
    return [e for e in events if isinstance(e, PtStep)]


@pytest.mark.parametrize("scheme", ["deo", "random"])
def test_every_swap_is_the_replica_exchange_rule_recomputed_from_the_model(scheme):
    """Each proposed swap's A is min(1, (p0(x_j) / p0(x_i))^(alpha_i - alpha_j)) from the recorded states'
    log p0 under the model itself, it is accepted iff its keyed uniform is below A, the deterministic
    scheme alternates even and odd pairs and the random one proposes one pair per barrier, and the
    states move with the swaps."""
    checked = accepted = 0
    for seed in range(4):
        params = SamplerParams(sampler="ppt", prefetch="stream", budget=4, max_new_tokens=8, steps=12, seed=seed,
                               pt_swap_every=2, pt_scheme=scheme, pt_replicas=4, pt_alpha_min=1.0)
        b, events = events_of(params)
        steps = [s for s in pt_steps(events) if not s.final]
        assert len(steps) == 6
        exps = ladder(params)
        for n, st in enumerate(steps, 1):
            assert st.exponents == exps and (st.block, st.k) == (0, 2 * n)
            if scheme == "deo":
                assert list(st.pairs) == [i for i in range(3) if i % 2 == (n - 1) % 2]  # pair 1-2 first
            else:
                assert list(st.pairs) == [min(2, int(swap_uniform(seed, n, 0) * 3))]
            logp = [oracle.suffix_logprobs(b.lm, PROMPT, t, 1.0)[1] for t in st.tokens]
            assert st.log_p0 == pytest.approx(logp, abs=1e-9)
            for i, A, ok in zip(st.pairs, st.accept_probs, st.swapped):
                # after the swap level i holds what level i + 1 held before it, and the other way round
                xi, xj = (logp[i + 1], logp[i]) if ok else (logp[i], logp[i + 1])
                want = math.exp(min(0.0, (exps[i] - exps[i + 1]) * (xj - xi)))
                assert pytest.approx(want, rel=1e-9, abs=1e-12) == A
                assert ok == (swap_uniform(seed, n, i + 1) < A)
                checked += 1
                accepted += ok
    assert checked > 20 and 0 < accepted < checked


def test_the_state_swapped_into_a_replica_is_scored_at_its_own_temperature():
    """A replica proposes at 1/alpha_r; a state swapped in came with log q at another temperature.  The
    replica's next decisions score it with its own (from the ladder's temperatures every request reports),
    so its MH ratios are those of the state as if it had been drawn at 1/alpha_r."""
    from presto_tui.runtime.methods.ppt import PptDriver

    params = SamplerParams(sampler="ppt", prefetch="none", max_new_tokens=6, steps=16, seed=3, pt_swap_every=1)
    b = small_backend(vocab=5, sharpness=1.0)
    seen = []
    original = PptDriver.cross

    def cross(self, barrier, states):
        out = original(self, barrier, states)
        for r, x in enumerate(out):
            tau = self.taus[r]
            logq = [oracle.log_probs(b.lm, list(PROMPT) + list(x.tokens[:j]), tau)[1][t]
                    for j, t in enumerate(x.tokens)]
            seen.append(max(abs(a - c) for a, c in zip(x.logq, logq)))
        return out

    PptDriver.cross = cross
    try:
        events = list(run_session(b, params, list(PROMPT)))
    finally:
        PptDriver.cross = original
    assert sum(sum(s.swapped) for s in pt_steps(events)) > 3
    assert seen and max(seen) < 1e-9


def test_swap_decisions_are_uniform_under_their_pit():
    """The randomized PIT of every swap decision (accept: v A; refuse: A + v (1 - A)) over many sessions
    is uniform: a swap accepted with another probability than the A it records would not be."""
    rng = np.random.default_rng(7)
    u = []
    for seed in range(60):
        params = SamplerParams(sampler="ppt", prefetch="none", max_new_tokens=4, steps=8, seed=seed, pt_swap_every=1,
                               pt_scheme="random" if seed % 2 else "deo")
        _, events = events_of(params, small_backend(vocab=4, sharpness=1.0))
        for st in pt_steps(events):
            for A, ok in zip(st.accept_probs, st.swapped):
                v = rng.random()
                u.append(v * A if ok else A + v * (1 - A))
    assert len(u) > 300
    assert stats.kstest(u, "uniform").pvalue > 1e-4


def test_round_trips_count_states_that_went_from_the_hottest_replica_to_the_coldest_and_back():
    info = PptInfo()
    exps = (1.0, 2.0, 4.0)

    def step(holders, pairs=(), swapped=()):
        info.update(PtStep(1, 0, 1, exps, pairs, tuple(0.5 for _ in pairs), swapped, holders, (0.0,) * 3,
                           ((),) * 3, (1, 1, 1), (1, 0, 1), False, 0.0))

    step((0, 1, 2))
    step((1, 0, 2), (0,), (True,))
    step((1, 2, 0), (1,), (True,))  # state 0 reached the coldest level
    assert info.round_trips == 0
    step((2, 1, 0), (0,), (True,))  # state 2 at the hottest, state 0 still at the coldest
    step((2, 0, 1), (1,), (True,))
    step((0, 2, 1), (0,), (True,))  # state 0 back at the hottest: one round trip
    assert info.round_trips == 1
    first = info.to_dict()["ladder"]["pairs"][0]  # pair 2-1
    assert first["label"].startswith("2-1")
    assert (first["proposed"], first["accepted"], first["accepted_share"]) == (3, 3, 1.0)
    assert info.drawn() == "R=3 A 3-2 .50 2-1 .50, 1 trips"  # each pair's mean swap probability, top-down


def test_ppt_reports_its_replicas_swaps_and_round_trips_in_run_json_and_says_when_no_swap_was_proposed():
    params = SamplerParams(sampler="ppt", prefetch="spine", budget=4, max_new_tokens=8, steps=20, seed=1,
                           pt_swap_every=1, pt_replicas=3)
    _, events = events_of(params)
    d = summarize(events).to_dict()
    assert d["replicas"] == 3 and len(d["ladder"]["pairs"]) == 2 and d["swap_barriers"] == 20
    assert sum(s["proposed"] for s in d["ladder"]["pairs"]) == 20 and "round_trips" in d
    choice = next(e for e in events if isinstance(e, Choice))
    assert choice.index == 2 and "alpha replica" in choice.rule
    with pytest.raises(ParamError, match="no swap would ever be proposed"):
        params.with_(pt_swap_every=21).validate()
    info = PptInfo()  # a trace of a session that never met a barrier still says so
    info.update(PtStep(1, 0, 20, (1.0, 4.0), (), (), (), (0, 1), (0.0, 0.0), ((), ()), (20, 20), (9, 9), True, 0.0))
    assert any("no swap was proposed" in n for n in info.notes())


@pytest.mark.parametrize("R,K,S", [(2, 2, 2), (2, 3, 2), (3, 2, 2), (4, 1, 1)])
def test_the_even_odd_scheme_proposes_a_pair_at_its_first_barrier(R, K, S):
    """Tempering is never a silent no-op: with one barrier in the whole response (two replicas, K = 2, swaps
    every 2), the even/odd scheme proposes the pair 1-2 there (it used to start with the odd-indexed pairs,
    none for two replicas), and over two barriers it proposes every pair of three."""
    params = SamplerParams(sampler="ppt", prefetch="stream", budget=4, max_new_tokens=4, steps=K, seed=0,
                           pt_swap_every=S, pt_replicas=R).validate()
    steps = [s for s in pt_steps(events_of(params)[1]) if not s.final]
    assert steps and list(steps[0].pairs) == list(range(0, R - 1, 2))
    proposed = {i for s in steps for i in s.pairs}
    assert proposed == set(range(R - 1)) or len(steps) == 1


# -- resample-move -------------------------------------------------------------------------------------

def rm_steps(events):
    return [e for e in events if isinstance(e, RmStep)]


@pytest.mark.parametrize("rule", ["none", "stream"])
def test_resample_move_weights_resampling_and_answer_are_recomputed_from_the_model(rule):
    """Each block's log weights gain alpha log p0 - log q_tau of the particle's extension (the model's own
    values); the ESS is (sum w)^2 / sum w^2; it resamples exactly when the ESS falls below rm_ess P, with
    systematic resampling at its keyed uniform, and the weights start again; the answer is drawn by the
    final weights."""
    resampled = 0
    for seed in range(3):
        P, B, alpha = 6, 3, 4.0
        params = SamplerParams(sampler="resample-move", prefetch=rule, budget=4, particles=P, rm_ess=0.7,
                               max_new_tokens=9, block_size=B, steps=3, seed=seed, alpha=alpha)
        b, events = events_of(params)
        steps = rm_steps(events)
        assert len(steps) == 3
        log_w = np.zeros(P)
        moved: list[tuple[int, ...]] = [()] * P
        for s, st in enumerate(steps):
            assert st.exponent == alpha and st.t == B * (s + 1)
            for i in range(P):
                ctx = list(PROMPT) + list(moved[i])
                lq, lp = oracle.suffix_logprobs(b.lm, ctx, st.tokens[i], 1 / alpha)
                log_w[i] += alpha * lp - lq
            assert st.log_weights == pytest.approx(list(log_w), abs=1e-9)
            w = np.exp(log_w - log_w.max())
            ess = w.sum() ** 2 / (w ** 2).sum()
            assert st.ess == pytest.approx(ess, rel=1e-9)
            assert st.resampled == (ess < 0.7 * P)
            if st.resampled:
                cdf = np.cumsum(w / w.sum())
                cdf[-1] = 1.0
                u = resample_uniform(seed, s)
                assert list(st.parents) == [min(P - 1, int(np.searchsorted(cdf, (u + j) / P, side="right")))
                                            for j in range(P)]
                log_w = np.zeros(P)
                resampled += 1
            else:
                assert list(st.parents) == list(range(P))
            assert all(len(x) == st.t for x in st.states)
            moved = list(st.states)
        choice = next(e for e in events if isinstance(e, Choice))
        w = np.exp(log_w - log_w.max())
        cdf = np.cumsum(w / w.sum())
        cdf[-1] = 1.0
        assert choice.index == min(P - 1, int(np.searchsorted(cdf, resample_uniform(seed, -1), side="right")))
        assert next(e for e in events if isinstance(e, SessionEnd)).tokens == steps[-1].states[choice.index]
    assert resampled > 0


def test_resample_move_particles_are_powermh_chains_with_seeds_of_their_own():
    """Particle i is PowerMH with member_seed(seed, i): without resampling (rm_ess 0) particle 0's final
    state is the session's PowerMH chain's, and particles 1.. are those chains of their own seeds."""
    sizes = dict(max_new_tokens=8, block_size=4, steps=4, prefetch="none")
    _, events = events_of(SamplerParams(sampler="resample-move", particles=3, rm_ess=0.0, seed=5, **sizes))
    last = rm_steps(events)[-1]
    assert not any(st.resampled for st in rm_steps(events))
    for i in range(3):
        _, chain = events_of(SamplerParams(sampler="powermh", seed=member_seed(5, i), **sizes))
        assert last.states[i] == next(e for e in chain if isinstance(e, SessionEnd)).tokens


def test_resample_move_says_when_it_never_resampled():
    _, events = events_of(SamplerParams(sampler="resample-move", particles=3, rm_ess=0.0, max_new_tokens=8,
                                        block_size=4, steps=2))
    notes = summarize(events).info.notes()
    assert len(notes) == 1 and "never resampled" in notes[0] and "--rm-ess" in notes[0]


# -- their events in a trace ----------------------------------------------------------------------

@pytest.mark.parametrize("kind,params", [
    (PT_STEP, SamplerParams(sampler="ppt", max_new_tokens=6, steps=4, pt_swap_every=1)),
    (RM_STEP, SamplerParams(sampler="resample-move", particles=3, max_new_tokens=6, block_size=2, steps=2,
                            rm_ess=1.0)),
])
def test_their_events_read_back_equal_and_a_damaged_one_is_refused_naming_its_field(kind, params):
    _, events = events_of(params)
    mine = [e for e in events if isinstance(e, kind.cls) and type(e) is kind.cls]
    assert mine and registry.event_type(kind.type) is kind
    for ev in mine:
        assert kind.decode(json.loads(json.dumps(kind.encode(ev)))) == ev
        assert set(kind.tokens(ev)) >= set(ev.tokens[0])
    d = json.loads(json.dumps(kind.encode(mine[0])))
    field = "holders" if kind is PT_STEP else "states"
    d[field] = d[field][:-1]
    with pytest.raises(SchemaError) as e:
        kind.decode(d)
    assert f"'{field}'" in str(e.value) or "'tokens'" in str(e.value)


def test_every_session_counts_its_engine_steps():
    """(The frontier's steps axis.)  Every session, one-shot ones too, writes the engine steps it was on the
    loop for: as many as the engine took."""
    from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM

    class Counting(SyntheticEngine):
        steps = 0

        def step(self):
            self.steps += 1
            return super().step()

    for params in (SamplerParams(sampler="bestofn", samples=3, max_new_tokens=8),
                   SamplerParams(sampler="powersmc", particles=3, max_new_tokens=8),
                   SamplerParams(sampler="ppt", max_new_tokens=8, steps=4),
                   SamplerParams(prefetch="none", max_new_tokens=8, steps=4)):
        engine = Counting(SyntheticLM(vocab_size=7, order=2, seed=1, sharpness=1.2))
        s = summarize(run_session(engine, params, list(PROMPT)))
        assert s.engine_steps == engine.steps > 0 and s.to_dict()["engine_steps"] == s.engine_steps



# -- conflicting tempering flags: refused, or the trace records what ran --------------------------------

def test_what_the_flags_say_together_runs_and_the_trace_records_what_ran(in_tmp):
    from typer.testing import CliRunner

    from presto_tui.cli import app

    base = ["run", "x", "--backend", "synthetic", "-n", "8", "-K", "2", "--json", "--no-trace", "--sampler", "ppt"]
    for extra in (["--pt-replicas", "3", "--pt-ladder", "1,2,4"], ["--pt-family", "multitry", "--tries", "3"]):
        res = CliRunner().invoke(app, [*base, *extra])
        assert res.exit_code == 0, res.output
    d = json.loads(CliRunner().invoke(app, [*base, "--pt-ladder", "1.5,4"]).stdout)
    assert d["params"]["pt_replicas"] == 2 and d["params"]["pt_alpha_min"] == 1.5 and d["replicas"] == 2
    # the library: a Params whose replica count a ladder overrides records the ladder's
    p = SamplerParams(sampler="ppt", pt_replicas=5, pt_alpha_min=2.0, pt_ladder="1,2,4").validate()
    assert p.to_dict()["pt_replicas"] == 3 and p.to_dict()["pt_alpha_min"] == 1.0


@pytest.mark.parametrize("args,line", [
    (["--sampler", "ppt", "--pt-replicas", "5", "--pt-alpha-min", "2", "--pt-ladder", "1,2,4"],
     "--pt-replicas 5 contradicts --pt-ladder 1,2,4 (3 replicas): the ladder sets them, drop --pt-replicas"),
    (["--sampler", "ppt", "--pt-alpha-min", "2", "--pt-ladder", "1,2,4"],
     "--pt-alpha-min 2 contradicts --pt-ladder 1,2,4 (its lowest exponent 1): the ladder sets it, drop "
     "--pt-alpha-min"),
    (["--sampler", "powermh", "--pt-replicas", "3"],
     "--pt-replicas applies to --sampler ppt, not powermh: drop it, or choose that sampler"),
    (["--particles", "4"],  # one rule for every method's own parameter
     "--particles applies to --sampler powersmc or resample-move, not powermh: drop it, or choose that sampler"),
    (["--sampler", "ppt", "--tries", "3"],  # a parameter of the replicas' family applies only with that family
     "--tries applies to --sampler multitry, not ppt: drop it, or choose that sampler"),
])
def test_a_flag_that_cannot_apply_to_the_run_is_refused_in_one_line(no_engine, in_tmp, args, line):
    from helpers import cli_error

    assert cli_error("run", "x", "--backend", "synthetic", "-n", "8", "-K", "2", *args) == line


def test_one_replica_is_titled_by_its_one_exponent_and_a_given_ladder_is_not_told_to_raise_alpha_min():
    from presto_tui.runtime.session.events import SessionStart

    assert registry.method("ppt").describe(SamplerParams(sampler="ppt", pt_replicas=1).to_dict()).startswith(
        "PPT R=1 alpha 4 S=2")

    def notes(params):
        info = PptInfo()
        info.update(SessionStart("s", "0", "synthetic", "m", params.to_dict(), "x", (1,), 0.0))
        for n in range(1, 6):
            info.update(PtStep(n, 0, n, (1.0, 4.0), (0,), (0.0,), (False,), (0, 1), (0.0, 0.0), ((), ()), (1, 1),
                               (0, 0), False, 0.0))
        return " ".join(info.notes())

    geometric = notes(SamplerParams(sampler="ppt", pt_replicas=2, steps=10))
    given = notes(SamplerParams(sampler="ppt", pt_ladder="1,4", steps=10))
    assert "--pt-alpha-min" in geometric and "--pt-alpha-min" not in given and "--pt-ladder" in given


# -- the adaptive ladder (--pt-ladder auto) ---------------------------------------------------------------

AUTO = dict(sampler="ppt", pt_ladder="auto", pt_replicas=4, pt_swap_every=1, max_new_tokens=8, steps=24)


def test_the_schedule_update_spaces_the_exponents_at_equal_length():
    """Syed et al.'s update on the pairs' lengths: a curve piecewise linear through the pairs' cumulative
    lengths l_i = 2 erfcinv(1 - r_i), the new exponents at k L / (R - 1) of its inverse, the ends kept; equal
    rates leave a ladder where it is; several rounds' curves are averaged by their weights; Lambda is the
    rejection rates' sum."""
    from presto_tui.runtime.methods.population_numbers import swap_length
    from presto_tui.runtime.methods.ppt import adapted as with_prior

    def adapted(rounds):  # (the update itself; the geometric prior below)
        return with_prior(rounds, prior=0.0)

    def spaced(exps, rates):  # the exponents at equal length along one round's curve
        cum = np.concatenate([[0.0], np.cumsum([swap_length(1 - r) for r in rates])])
        return tuple(np.interp(cum[-1] * np.arange(1, len(exps) - 1) / (len(exps) - 1), cum, exps))

    new, barrier = adapted([((1.0, 2.0, 3.0, 4.0), (0.9, 0.3, 0.3), 4.0)])
    assert barrier == pytest.approx(1.5)
    assert new[0] == 1.0 and new[-1] == 4.0
    assert new[1:3] == pytest.approx(spaced((1.0, 2.0, 3.0, 4.0), (0.9, 0.3, 0.3)), abs=2e-3)  # (the sliver: a hair)
    assert 1.0 < new[1] < new[2] < 2.0  # the first gap, four times as long as the others, takes two of three parts
    same, _ = adapted([((1.0, 1.5, 2.5, 4.0), (0.4, 0.4, 0.4), 2.0)])
    assert same == pytest.approx((1.0, 1.5, 2.5, 4.0), abs=1e-3)
    none, _ = adapted([((1.0, 2.0, 3.0, 4.0), (0.0, 0.0, 0.0), 2.0)])  # nothing rejected: evenly spaced, distinct
    assert all(b > a for a, b in zip(none, none[1:]))
    # two rounds, the second three times the first's weight: the curve is their curves' weighted mean
    rounds = [((1.0, 2.0, 3.0, 4.0), (0.9, 0.3, 0.3), 1.0), ((1.0, 1.5, 2.5, 4.0), (0.3, 0.6, 0.3), 3.0)]
    both, barrier = adapted(rounds)
    assert barrier == pytest.approx((1.5 + 3 * 1.2) / 4)
    grid = np.linspace(1.0, 4.0, 3001)
    curve = sum(w * np.interp(grid, exps, np.concatenate([[0.0], np.cumsum([swap_length(1 - r) for r in rates])]))
                for exps, rates, w in rounds) / 4
    assert both[1:3] == pytest.approx(tuple(np.interp(curve[-1] * np.array([1, 2]) / 3, curve, grid)), abs=5e-3)


def test_one_update_reaches_the_equal_acceptance_ladder_where_a_rejection_rate_saturates():
    """Where log p0's standard deviation is sigma at every exponent, a pair of gap d swaps with mean A
    erfc(d sigma / 2) (Gaussian swaps): on the geometric ladder from 1 to 4 at sigma 3 its pairs read A 0.21,
    0.05 and 0.002, rejection rates 0.79-1.00 that Syed et al.'s update on rates barely tells apart.  On the
    lengths one update (no prior) lands on the evenly spaced ladder, where every pair swaps alike."""
    from presto_tui.runtime.methods.ppt import adapted

    sigma, geometric = 3.0, (1.0, 4 ** (1 / 3), 4 ** (2 / 3), 4.0)
    rates = tuple(1 - math.erfc((b - a) * sigma / 2) for a, b in zip(geometric, geometric[1:]))
    assert rates[0] < 0.8 and rates[2] > 0.99
    new, _ = adapted([(geometric, rates, 8.0)], prior=0.0)
    assert new == pytest.approx((1.0, 2.0, 3.0, 4.0), abs=5e-3)
    accept = [math.erfc((b - a) * sigma / 2) for a, b in zip(new, new[1:])]
    assert max(accept) - min(accept) < 0.01
    # Syed et al.'s curve (cumulative rates) from the same rates: its middle exponents stay near the geometric
    cum = np.concatenate([[0.0], np.cumsum(rates)])
    on_rates = np.interp(cum[-1] * np.array([1, 2]) / 3, cum, geometric)
    assert abs(on_rates[0] - geometric[1]) < abs(on_rates[0] - 2.0)


def test_the_update_leans_on_the_geometric_ladder_as_much_as_four_barriers_of_swaps():
    """The geometric ladder's curve (Lambda evenly over log a) joins the rounds' with the weight of four
    barriers: one short round of all-or-nothing rates moves the exponents only part of the way from the
    geometric ladder, a long warm-up of the same rates nearly all of it, and Lambda is the rounds' alone."""
    from presto_tui.runtime.methods.ppt import PRIOR_BARRIERS, adapted

    geometric = (1.0, 4 ** (1 / 3), 4 ** (2 / 3), 4.0)
    rates = (1.0, 0.0, 0.0)  # (one proposal each: the first pair rejected, the others accepted)
    syed, _ = adapted([(geometric, rates, 2.0)], prior=0.0)
    short, barrier = adapted([(geometric, rates, 2.0)])
    long, _ = adapted([(geometric, rates, 400.0)])
    assert barrier == pytest.approx(1.0) and PRIOR_BARRIERS == 4.0
    for k in (1, 2):
        assert syed[k] < long[k] < short[k] < geometric[k]  # (Syed's alone crowds them into the first gap)
        assert short[k] - syed[k] > 0.3 * (geometric[k] - syed[k])
        assert long[k] - syed[k] < 0.05 * (geometric[k] - syed[k])
    grid = np.linspace(1.0, 4.0, 30001)
    data = np.interp(grid, geometric, (0.0, 1.0, 1.0, 1.0))
    curve = (2 * data + 4 * np.log(grid) / np.log(4.0)) / 6
    assert short[1:3] == pytest.approx(tuple(np.interp(np.array([1, 2]) / 3, curve, grid)), abs=5e-3)
    same, _ = adapted([(geometric, (0.5, 0.5, 0.5), 2.0)])  # equal rates on the geometric ladder: it stays
    assert same == pytest.approx(geometric, abs=1e-3)
    calm, _ = adapted([(geometric, (0.0, 0.0, 0.0), 2.0)])  # nothing rejected: the prior still holds it near
    assert calm == pytest.approx(geometric, abs=0.05)


def test_a_rounds_rejection_rate_is_the_mean_of_one_minus_a_over_each_pairs_proposals():
    """A warm-up round's rejection rate per pair: the mean of 1 - A over the swaps it proposed for the pair
    (None where it proposed none, which `adapted` fills with the round's other pairs' mean)."""
    from presto_tui.runtime.methods.ppt import adapted, round_rejection

    assert round_rejection(4, [(0, 0.2), (2, 1.0), (0, 0.6)]) == pytest.approx((0.6, None, 0.0))
    filled, barrier = adapted([((1.0, 2.0, 3.0, 4.0), (0.6, None, 0.0), 2.0)])
    assert filled == pytest.approx(adapted([((1.0, 2.0, 3.0, 4.0), (0.6, 0.3, 0.0), 2.0)])[0])
    assert barrier == pytest.approx(0.9)


def test_the_adaptive_ladder_moves_in_its_warm_up_from_the_recorded_swaps_then_stays():
    """Every update is the schedule update recomputed from the records: each warm-up round's rejection rates
    from the swap probabilities it recorded, the exponents from every round so far weighted by its barriers,
    after the barriers `updates` names (rounds doubling, the last at the warm-up's end, frozen); the barriers
    after the freeze run the frozen exponents, and the ends stay alpha_min and alpha."""
    from presto_tui.runtime.methods.ppt import PtLadder, adapted, round_rejection, updates, warmup

    moved = 0
    for seed in range(3):
        params = SamplerParams(**AUTO, seed=seed, prefetch="stream", budget=4).validate()
        assert warmup(params) == 12 and updates(params) == (2, 4, 8, 12)
        _, events = events_of(params)
        steps = [e for e in pt_steps(events) if not e.final]
        ladders = [e for e in events if isinstance(e, PtLadder)]
        assert [u.step for u in ladders] == [2, 4, 8, 12] and [u.frozen for u in ladders] == [False] * 3 + [True]
        start, rounds = 0, []
        for u in ladders:
            rnd = steps[start:u.step]
            assert all(st.exponents == u.before for st in rnd)
            swaps = [(i, a) for st in rnd for i, a in zip(st.pairs, st.accept_probs)]
            assert u.rejection == pytest.approx(round_rejection(4, swaps))
            rounds.append((u.before, u.rejection, float(len(rnd))))
            assert u.exponents == pytest.approx(adapted(rounds)[0])
            start = u.step
            moved += u.exponents != u.before
        frozen = ladders[-1].exponents
        assert frozen[0] == 1.0 and frozen[-1] == 4.0 and all(b > a for a, b in zip(frozen, frozen[1:]))
        assert all(st.exponents == frozen for st in pt_steps(events)[12:])
        info = summarize(events).info.to_dict()
        assert info["exponents"] == list(frozen) and len(info["ladder_updates"]) == 4
        # the pairs' counts are the frozen ladder's, after the freeze; the warm-up's apart
        assert sum(p["proposed"] for p in info["ladder"]["pairs"]) == sum(len(st.pairs) for st in steps[12:]) == 18
        assert sum(s["proposed"] for s in info["warmup_swaps"]) == sum(len(st.pairs) for st in steps[:12])
    assert moved > 0


def test_the_adaptive_ladders_event_reads_back_equal_and_a_damaged_one_is_refused():
    from presto_tui.runtime.methods.ppt import PT_LADDER, PtLadder

    _, events = events_of(SamplerParams(**AUTO).validate())
    mine = [e for e in events if isinstance(e, PtLadder)]
    assert mine and registry.event_type("pt_ladder") is PT_LADDER
    for ev in mine:
        assert PT_LADDER.decode(json.loads(json.dumps(PT_LADDER.encode(ev)))) == ev
    d = json.loads(json.dumps(PT_LADDER.encode(mine[0])))
    d["rejection"] = d["rejection"][:-1]
    with pytest.raises(SchemaError, match="'rejection'"):
        PT_LADDER.decode(d)


@pytest.mark.parametrize("values,words", [
    (dict(pt_ladder="auto", pt_replicas=1), "--pt-ladder auto tunes a ladder of --pt-replicas 2 or more"),
    (dict(pt_ladder="auto", pt_warmup=3), "--pt-warmup 3 should span two swap barriers at least"),
    (dict(pt_ladder="auto", pt_warmup=24), "leave transitions after it (fewer than the response's 24)"),
    (dict(pt_warmup=8), "--pt-warmup applies to --pt-ladder auto only"),
    (dict(pt_ladder="automatic"), "--pt-ladder takes exponents above 0 separated by commas"),
])
def test_an_adaptive_ladder_that_cannot_run_is_refused_in_one_line(values, words):
    from presto_tui.runtime.core.params import params_from

    with pytest.raises(ParamError) as e:
        params_from({"sampler": "ppt", "steps": 24, **values})
    assert words in str(e.value) and "\n" not in str(e.value)


def test_the_adaptive_ladder_is_asked_for_alike_on_every_front_end(in_tmp):
    """`--pt-ladder auto` (and `--pt-warmup`), the library's Params, the method language's `ppt:ladder=auto:W=8`;
    the trace records the warm-up that ran, and the run's table shows how the ladder moved."""
    from typer.testing import CliRunner

    from presto_tui.api.params import parse_method
    from presto_tui.cli import app

    res = CliRunner().invoke(app, ["run", "x", "--backend", "synthetic", "-n", "8", "-K", "24", "--no-trace",
                                   "--sampler", "ppt", "--pt-ladder", "auto", "--pt-swap-every", "1"])
    assert res.exit_code == 0, res.output
    assert "ladder frozen after barrier 12" in res.stdout and "R=4 ladder auto W=12" in res.stdout
    assert "(rejection 4-3 " in res.stdout and "2-1 " in res.stdout.split("(rejection 4-3 ")[1]  # (top-down, labelled)
    p = SamplerParams(sampler="ppt", pt_ladder="auto", steps=24).validate()
    assert p.to_dict()["pt_warmup"] == 12
    m = parse_method("ppt:ladder=auto:W=8", SamplerParams(steps=24))
    assert m.params.pt_ladder == "auto" and m.params.pt_warmup == 8


def test_the_adaptive_ladders_warm_up_is_warm_up_in_the_diagnostics():
    """The diagnostics of tempering chains with an adaptive ladder leave its warm-up's draws out (a burn-in of
    at least W, in one block); others keep what they are asked for."""
    from presto_tui.runtime.session.diagnostics import Selection, warmed

    auto = SamplerParams(**AUTO).validate().to_dict()
    assert warmed(Selection(), [auto, auto]) == Selection(12, 1)
    assert warmed(Selection(15, 2), [auto]) == Selection(15, 2)
    assert warmed(Selection(), [SamplerParams(sampler="ppt").to_dict()]) == Selection()


def test_the_adaptive_ladders_warm_up_is_warm_up_in_the_library_and_the_draws_files(in_tmp):
    """`read_trace(...).chains()` and the `--draws` files leave the warm-up's draws out of the posterior as
    `stats` does: the first W transitions are `warmup_posterior` / not `kept`, whatever burn-in was asked."""
    import csv

    from typer.testing import CliRunner

    from presto_tui import read_trace
    from presto_tui.cli import app

    res = CliRunner().invoke(app, ["run", "x", "--backend", "synthetic", "-n", "8", "-K", "24", "--sampler", "ppt",
                                   "--pt-ladder", "auto", "--pt-swap-every", "1", "--chains", "2",
                                   "--trace", "t.jsonl", "--draws", "d.csv"])
    assert res.exit_code == 0, res.output
    tree = read_trace("t.jsonl").chains(1)
    assert tree.posterior.sizes["draw"] == 12 and tree.warmup_posterior.sizes["draw"] == 12
    assert list(tree.sample_stats["transition"].values[0]) == list(range(13, 25))
    with open("d.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["kept"] for r in rows if int(r["transition"]) <= 12} == {"false"}
    assert {r["kept"] for r in rows if int(r["transition"]) > 12} == {"true"}


# -- every member's own chain, recorded ------------------------------------------------------------

def member_views(events):
    """The members' recorded events, by member: (its start, its own events after it)."""
    out: dict[int, list] = {}
    for e in events:
        if isinstance(e, MemberEvent):
            out.setdefault(e.member, []).append(e.event)
    return out


@pytest.mark.parametrize("rule", ["none", "bfs", "spine", "stream"])
def test_every_member_records_its_own_chain_start_to_end_under_every_rule(rule):
    """A population records each member's own events (`MemberEvent`): its start with its own parameters
    first, its rounds (epochs), transitions and end, whose counts the method's records agree with; the
    alpha replica's transitions are the session's draws."""
    for params in (SamplerParams(sampler="ppt", max_new_tokens=8, block_size=4, steps=4, seed=3, prefetch=rule,
                                 budget=4, pt_swap_every=1),
                   SamplerParams(sampler="resample-move", particles=3, max_new_tokens=8, block_size=4, steps=3,
                                 seed=4, prefetch=rule, budget=4, rm_ess=1.0)):
        _, events = events_of(params)
        members = member_views(events)
        expect = params.method.members(params)
        assert sorted(members) == list(range(len(expect)))
        own = [e for e in events if isinstance(e, (PtStep, RmStep))]
        for i, evs in members.items():
            start = evs[0]
            assert isinstance(start, SessionStart) and start.params == expect[i].to_dict()
            assert not any(isinstance(e, SessionStart) for e in evs[1:])
            assert isinstance(evs[-1], SessionEnd)
            tr = [e for e in evs if isinstance(e, Transition)]
            counts = [st.transitions[i] for st in own]
            assert len(tr) == sum(counts) == params.n_blocks * params.steps
            accepted = [st.accepted[i] for st in own]
            assert sum(e.accepted for e in tr) == sum(accepted)
            rounds = [e for e in evs if isinstance(e, RoundDone)]
            if rule != "none":  # (PreSTO's rounds or epochs: together every transition, each in order)
                assert rounds and sum(r.k_after - r.k_before for r in rounds) == len(tr)
            if isinstance(own[-1], PtStep):
                assert evs[-1].tokens == own[-1].tokens[i]  # (the end's record: no swap after it)
        if params.sampler == "ppt":
            lead = [e for e in members[len(expect) - 1] if isinstance(e, Transition)]
            assert lead == [e for e in events if isinstance(e, Transition)]


def test_members_events_read_back_equal_from_the_trace_and_a_damaged_one_is_refused_naming_its_field(tmp_path):
    path = tmp_path / "m.jsonl"
    params = SamplerParams(sampler="ppt", max_new_tokens=8, block_size=4, steps=4, seed=3, prefetch="bfs", budget=4)
    b = small_backend(vocab=7, sharpness=1.2)
    with TraceWriter(path, command="test", backend=b.name, model=b.model, params=params.to_dict(),
                     pieces=b.token_pieces) as w:
        written = list(run_session(b, params, list(PROMPT), prompt="p"))
        for ev in written:
            w.write(ev)
    mine = [e for e in written if isinstance(e, MemberEvent)]
    assert mine and not any(isinstance(e.event, TRANSIENT) for e in mine)
    read = [e for e in read_trace(path).sessions[0].events if isinstance(e, MemberEvent)]
    # (a round tree's per-token values are written rounded: what reads back is what its line says)
    assert [encode(e) for e in read] == [encode(decode(json.loads(json.dumps(encode(e))))) for e in mine]
    assert [type(e.event) for e in read] == [type(e.event) for e in mine]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    line = next(x for x in lines if x["type"] == "member" and x["event"]["type"] == "round")
    del line["event"]["k_after"]
    with pytest.raises(SchemaError, match="missing field 'event.k_after'"):
        decode(line)
    line["event"] = {"type": "pt_step"}  # (a member is an MH chain: no method's own record inside)
    with pytest.raises(SchemaError, match="'event.type'"):
        decode(line)
    # a member's chain reads as a session's: its start first and once, nothing after its end (line numbered)
    raw = path.read_text().splitlines()
    at = {kind: next(i for i, x in enumerate(raw) if '"member":1,' in x and f'"type":"{kind}"' in x.split('"event"')[1])
          for kind in ("session_start", "session_end")}
    for name, lines, said in (
            ("late", raw[:at["session_start"]] + raw[at["session_start"] + 1:at["session_end"] + 1]
             + [raw[at["session_start"]]] + raw[at["session_end"] + 1:], r"member 2's \w+ event before its "
                                                                          "session_start"),
            ("twice", raw[:at["session_start"] + 1] + [raw[at["session_start"]]] + raw[at["session_start"] + 1:],
             "member 2's second session_start"),
            ("after", raw[:at["session_end"] + 1] + [raw[at["session_end"]]] + raw[at["session_end"] + 1:],
             "member 2's event after its chain ended")):
        bad = tmp_path / f"{name}.jsonl"
        bad.write_text("\n".join(lines) + "\n")
        with pytest.raises(TraceError, match=rf"{name}.jsonl:\d+: {said}"):
            read_trace(bad)


@pytest.mark.parametrize("rule", ["bfs", "stream"])
def test_a_cancelled_population_ends_every_members_chain_before_its_own(rule):
    """Cancelled mid-run (the loop polls `cancel` before every engine step): every member's recorded chain
    ends as cancelled where it stopped, before the population's end; nothing of a member follows."""
    for params in (SamplerParams(sampler="ppt", max_new_tokens=16, block_size=4, steps=4, seed=3, prefetch=rule,
                                 budget=4, pt_swap_every=1),
                   SamplerParams(sampler="resample-move", particles=3, max_new_tokens=16, block_size=4, steps=3,
                                 seed=4, prefetch=rule, budget=4, rm_ess=1.0)):
        b = small_backend(vocab=7, sharpness=1.2)
        polls = iter(range(1000))
        events = list(run_session(b, params, list(PROMPT), cancel=lambda polls=polls: next(polls) >= 12))
        end = next(i for i, e in enumerate(events) if isinstance(e, SessionEnd))
        assert events[end].reason == "cancelled" and end == len(events) - 1
        members = member_views(events[:end])
        assert sorted(members) == list(range(len(params.method.members(params))))
        for evs in members.values():
            ends = [e for e in evs if isinstance(e, SessionEnd)]
            assert len(ends) == 1 and evs[-1] is ends[0] and ends[0].reason == "cancelled"
            done = sum(isinstance(e, Transition) for e in evs)
            assert done < params.n_blocks * params.steps  # (cut short: it did not run to its end)
