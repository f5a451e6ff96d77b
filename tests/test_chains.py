"""Several chains of one prompt: coupling to single chains, MCMC diagnostics against the exact law,
the answer the chains agree on.

The diagnostics are checked on the enumerable model of test_law.py, where the kernel P
and pi_alpha are known exactly: for chains started from pi_alpha, the integrated
autocorrelation time of the log-target under P, computed here from P itself, predicts
the effective sample size ArviZ estimates from the chains' draws.
"""

from __future__ import annotations

import math

import numpy as np
import oracle
import pytest
from helpers import small_backend, trajectory
from scipy.stats import norm
from test_law import PROMPT, SETUPS, backend, exact_kernel, start_state, target

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import chain_seed
from presto_tui.runtime.session import diagnostics
from presto_tui.runtime.session.answers import vote
from presto_tui.runtime.session.chains import chain_drivers, chain_params
from presto_tui.runtime.session.diagnostics import ESS_MIN, RHAT_MAX, chain_groups, chains_report
from presto_tui.runtime.session.events import BlockStart, RoundDone, SessionStart, Transition
from presto_tui.runtime.session.loop import run_chains
from presto_tui.runtime.session.summary import SessionSummary


def run_group(engine, params, prompt_ids, chains, **kw):
    """Every chain's events and summary, the chains run at once on one engine."""
    drivers = list(chain_drivers(engine, params, prompt_ids, chains, **kw))
    events: list[list] = [[] for _ in drivers]
    for i, ev in run_chains(engine, drivers, concurrency=len(drivers)):
        events[i].append(ev)
    return events, [_summary(evs) for evs in events]


def _summary(events) -> SessionSummary:
    s = SessionSummary()
    for ev in events:
        s.update(ev)
    return s


def states_of(events) -> list:
    """The chain's generated tokens after every block extension and transition (as helpers.trajectory)."""
    out = []
    for ev in events:
        if isinstance(ev, BlockStart):
            out.append(("extend", ev.block, ev.tokens))
        elif isinstance(ev, RoundDone):
            out.extend(s.tokens for s in ev.tree.states_after_steps())
    return out


# -- coupling: chain m of --chains M is the single chain with chain m's seed -------------------------

SCHEDULES = {"one-block": dict(max_new_tokens=16, steps=20), "multi-block": dict(max_new_tokens=12, block_size=4,
                                                                                    steps=8)}


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("prefetch", ["none", "spine", "stream"])
def test_chain_m_is_the_single_chain_with_its_seed(prefetch, schedule):
    params = SamplerParams(prefetch=prefetch, budget=6, seed=11, **SCHEDULES[schedule])
    events, summaries = run_group(small_backend(vocab=5), params, (1, 2), 3)
    finals = set()
    for m, evs in enumerate(events):
        alone = chain_params(params, m)
        assert alone.seed == chain_seed(11, m) and (m == 0) == (alone.seed == 11)
        expected, _ = trajectory(small_backend(vocab=5), alone)
        assert states_of(evs) == expected, f"chain {m} left its single-chain trajectory"
        single = [ev for ev in _events(small_backend(vocab=5), alone) if isinstance(ev, Transition)]
        assert [ev for ev in evs if isinstance(ev, Transition)] == single  # the diagnostics read the same draws
        finals.add(summaries[m].tokens)
    assert len(finals) > 1  # not vacuous: the chains differ from each other


def _events(engine, params):
    (evs,), _ = run_group(engine, params, (1, 2), 1)
    return evs


def test_chains_record_their_seed_index_and_one_group():
    params = SamplerParams(max_new_tokens=8, steps=4, seed=5)
    events, summaries = run_group(small_backend(), params, (1, 2), 4)
    starts = [evs[0] for evs in events]
    assert all(isinstance(s, SessionStart) for s in starts)
    assert [(s.chain, s.chains) for s in starts] == [(m, 4) for m in range(4)]
    assert len({s.group for s in starts}) == 1 and starts[0].group
    assert [s.params["seed"] for s in starts] == [chain_seed(5, m) for m in range(4)]
    assert [[s.chain for s in g] for g in chain_groups(list(reversed(summaries)))] == [[1, 2, 3, 4]]  # from 1
    (alone,), _ = run_group(small_backend(), params, (1, 2), 1)
    assert (alone[0].chain, alone[0].chains, alone[0].group) == (0, 1, "")  # one chain: the run it always was


class CountingBackend(type(small_backend())):  # type: ignore[misc]
    """Records the most requests live in one engine step."""

    peak = 0

    def step(self):
        self.peak = max(self.peak, self.live)
        return super().step()


def test_the_chains_of_a_prompt_share_the_engine_batch():
    from presto_tui.runtime.engines.synthetic import SyntheticLM

    engine = CountingBackend(SyntheticLM(vocab_size=5, order=2, seed=1, sharpness=1.5))
    run_group(engine, SamplerParams(prefetch="none", max_new_tokens=8, steps=6), (1, 2), 4)
    assert engine.peak == 4  # one sequential request per chain, all four in every step


# -- diagnostics against the exact law -------------------------------------------------------------

def exact_setup():
    _, _, T, _, alpha, _, _, V = SETUPS["powermh"]
    b = backend("powermh")
    states, _, P = exact_kernel(b.lm, V, T, alpha)
    pi = target(b.lm, states, alpha)
    log_target = np.array([alpha * oracle.suffix_logprobs(b.lm, PROMPT, s, 1.0)[1] for s in states])
    return b, states, P, pi, log_target, T, alpha


def integrated_autocorrelation(P, pi, g, lags=4000) -> tuple[float, float]:
    """(1 + 2 sum_t rho_t, Var_pi g) of g(X_t) for the stationary chain with kernel P."""
    gc = g - pi @ g
    var = pi @ (gc * gc)
    v, total = gc.copy(), 0.0
    for _ in range(lags):
        v = P @ v  # E[g(X_t) - mu | X_0 = x]
        total += pi @ (gc * v)
    return 1 + 2 * total / var, var


def rank_normal(pi, f) -> np.ndarray:
    """What bulk ESS reads instead of f: the normal quantile of f's mid-rank under pi (ArviZ's rank
    normalisation, in the limit of many draws; ties share their mid-rank)."""
    mid = {v: pi[f < v].sum() + pi[f == v].sum() / 2 for v in np.unique(f)}
    return np.array([norm.ppf(mid[v]) for v in f])


def diagnosed(b, states, starts, K, alpha, T, seed):
    params = SamplerParams(prefetch="none", alpha=alpha, max_new_tokens=T, steps=K, seed=seed)
    inits = [start_state(b.lm, states[i], 1 / alpha) for i in starts]
    _, summaries = run_group(b, params, PROMPT, len(starts), states=inits)
    return chains_report(summaries)


def test_chains_from_pi_alpha_mix_and_their_ess_is_the_exact_one():
    b, states, P, pi, f, T, alpha = exact_setup()
    M, K = 4, 2000
    tau_bulk, _ = integrated_autocorrelation(P, pi, rank_normal(pi, f))
    tau_mean, var = integrated_autocorrelation(P, pi, f)
    assert tau_bulk > 1.5  # not vacuous: the draws are correlated, ESS is well below M K
    starts = np.random.default_rng(0).choice(len(states), size=M, p=pi)  # X_0 ~ pi_alpha
    report = diagnosed(b, states, starts, K, alpha, T, seed=3)
    d = next(x for x in report.diagnostics if x.quantity == "log_target")
    assert (d.chains, d.draws) == (M, K)
    assert d.rhat is not None and abs(d.rhat - 1) < 0.005
    assert d.ess_bulk == pytest.approx(M * K / tau_bulk, rel=0.15)
    assert d.mcse == pytest.approx(math.sqrt(var * tau_mean / (M * K)), rel=0.15)
    assert d.mean == pytest.approx(pi @ f, abs=4 * d.mcse)
    # the log-likelihood is the response's (up to EOS), not the log-target on another scale: where a
    # state's response is empty (EOS first) it is undefined, and so are its diagnostics
    loglik = next(x for x in report.diagnostics if x.quantity == "loglik")
    assert loglik.draws == K and (loglik.rhat is None) == (loglik.mean is None or not math.isfinite(loglik.mean))
    assert report.warnings == ()


def test_chains_started_far_away_with_a_short_k_are_warned_about():
    b, states, P, pi, f, T, alpha = exact_setup()
    far = np.argsort(pi)[:4]  # the four least likely states under pi_alpha
    report = diagnosed(b, states, far, 12, alpha, T, seed=3)
    d = next(x for x in report.diagnostics if x.quantity == "log_target")
    assert d.rhat > RHAT_MAX and d.ess_bulk < ESS_MIN  # the chains still remember where they started
    (warning,) = report.warnings
    assert "K=12 was too short" in warning and f"R-hat <= {RHAT_MAX}, bulk ESS >= {ESS_MIN}" in warning
    assert f"R-hat {d.rhat:.3f} > {RHAT_MAX}" in warning


def test_chains_that_never_move_are_said_to_show_nothing():
    events = [SessionSummary().update(SessionStart("s", "v", "b", "m", {"steps": 5}, "p", (1,), 0.0, {}, m, 2, "g"))
              for m in range(2)]
    for s in events:
        for k in range(5):
            s.update(Transition(0, k, False, -3.0, -1.0, -0.5, 3))
    (warning,) = chains_report(events).warnings  # still running: no verdict on K yet
    assert "has not varied so far" in warning and "K=5 was too short" not in warning
    for s in events:
        s.status = "done"
    (warning,) = chains_report(events).warnings
    assert "never varied" in warning and "K=5 was too short" in warning


def test_chains_stuck_apart_are_infinitely_far_from_mixing():
    """Each chain keeps one state, a different one per chain: R-hat is infinite, never missing."""
    chains = []
    for m in range(2):
        s = SessionSummary().update(SessionStart("s", "v", "b", "m", {"steps": 8}, "p", (1,), 0.0, {}, m, 2, "g"))
        for k in range(8):
            s.update(Transition(0, k, False, -3.0 - m, -1.0, -0.5, 3))
        chains.append(s)
    report = chains_report(chains)
    assert next(d for d in report.diagnostics if d.quantity == "log_target").rhat == math.inf
    (warning,) = report.warnings
    assert "R-hat inf > 1.01" in warning


def test_chains_each_constant_at_an_unround_value_have_an_infinite_r_hat_everywhere():
    """Each chain stays at one value after the burn-in, a different one per chain, values that are no
    binary fraction (ArviZ then divides by a within-chain variance of 1e-33 and gives 9e15): R-hat is
    inf in the report, the warning and the running R-hat, and null with rhat_infinite in JSON."""
    import io

    from rich.console import Console

    from presto_tui.logs.chains import diagnostics_table, warnings_text
    from presto_tui.runtime.session.diagnostics import diagnose, running_rhat, stuck

    values = (-1.084, -1.173, -0.946)
    chains = []
    for m, v in enumerate(values):
        s = SessionSummary().update(SessionStart("s", "v", "b", "m", {"steps": 25}, "p", (1,), 0.0, {}, m, 3, "g"))
        for k in range(25):
            s.update(Transition(0, k, False, -3.0 + k / 10, v, -0.5, 3))
        s.status = "done"
        chains.append(s)
    report = chains_report(chains)
    loglik = next(d for d in report.diagnostics if d.quantity == "loglik")
    assert loglik.rhat == math.inf and loglik.to_dict()["rhat"] is None and loglik.to_dict()["rhat_infinite"]
    target = next(d for d in report.diagnostics if d.quantity == "log_target")
    assert target.to_dict()["rhat_infinite"] is False  # a number, or null where undefined: never inf
    (warning,) = report.warnings
    assert "R-hat inf > 1.01 (no chain varied within itself, and the chains differ" in warning
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(diagnostics_table(report))
    (row,) = [ln.split() for ln in console.export_text().splitlines() if ln.split()[:1] == ["log-likelihood"]]
    assert row[3] == "inf"  # quantity, draws, mean, R-hat
    assert "R-hat inf" in warnings_text(report).plain
    draws = np.array([[v] * 25 for v in values])
    assert stuck(draws) and all(r == math.inf for _, r in running_rhat(draws))
    # a chain that moved once, at its middle, still has two constant halves: no variation within them
    moved = draws.copy()
    moved[0, 13:] = -2.0
    assert stuck(moved) and diagnose(moved).rhat == math.inf
    moved[0, 5] = -2.0  # now it varies within its first half: a number
    assert not stuck(moved) and math.isfinite(diagnose(moved).rhat)


def test_a_report_without_arviz_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(diagnostics, "available", lambda: False)
    _, summaries = run_group(small_backend(), SamplerParams(max_new_tokens=8, steps=6), (1, 2), 2)
    report = chains_report(summaries)
    assert report.diagnostics == () and report.warnings == (diagnostics.MISSING,)
    assert report.vote.total == 2
    with pytest.raises(ValueError, match="arviz-stats"):
        diagnostics.require()


# -- the answer the chains agree on --------------------------------------------------------------------

def test_vote_groups_exact_texts_most_chains_first():
    v = vote(["b", "a", "b", "c", "a", "b"])
    assert [(g.answer, g.chains) for g in v.groups] == [("b", (1, 3, 6)), ("a", (2, 5)), ("c", (4,))]  # from 1
    assert v.majority.answer == "b" and v.share == 0.5 and not v.tied and v.by == "text"
    assert vote(["x ", "x"]).share == 0.5  # exact text: a trailing space is another answer


def test_vote_by_an_extracted_answer_counts_the_chains_without_one():
    extract = lambda t: t.split("=")[-1].strip() if "=" in t else None
    v = vote(["7*8 = 56", "so 56 = 56", "I think 54", "= 54"], extract)
    assert v.by == "answer" and v.unanswered == (3,)
    assert [(g.answer, g.count) for g in v.groups] == [("56", 2), ("54", 1)]
    assert v.share == 0.5 and v.to_dict()["majority"] == "56"


def test_vote_ties_go_to_the_answer_seen_first_and_say_so():
    v = vote(["a", "b", "b", "a"])
    assert v.majority.answer == "a" and v.tied
    assert vote([]).majority is None and vote([]).share == 0.0
    assert vote(["q"], lambda t: None).majority is None
