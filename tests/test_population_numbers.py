"""Populations as data: every member's MH transitions counted (the session's, per member, in all), the
ladder's diagnostics (mean swap probability per pair, the barrier Lambda, the index process), an SMC
session's history (ESS, resampling, genealogy) and its evidence estimate log Z, whose unbiasedness for Z is
held against the exact Z = sum_x p0(x)^alpha of the enumerable model; and the trace reader's DataFrames of
all of it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import small_backend
from typer.testing import CliRunner

import presto_tui
from presto_tui import testing
from presto_tui.cli import app as cli_app
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.methods.population_numbers import TARGET_LENGTH, LadderNumbers, SmcNumbers, log_mean_exp
from presto_tui.runtime.methods.ppt import PtStep
from presto_tui.runtime.methods.resample_move import RmStep
from presto_tui.runtime.session.events import Transition
from presto_tui.runtime.session.loop import make_driver, run_chains
from presto_tui.runtime.session.runner import run_session
from presto_tui.runtime.session.summary import SessionSummary, summarize

runner = CliRunner()
PROMPT = (1, 2)


def events_of(params):
    return list(run_session(small_backend(vocab=7, sharpness=1.2), params, list(PROMPT)))


# -- every member's transitions --------------------------------------------------------------------

@pytest.mark.parametrize("rule", ["none", "stream"])
def test_a_tempering_session_counts_its_alpha_replicas_transitions_and_every_replicas(rule):
    """`transitions 0, acceptance_rate 0.0` was what a tempering session said: its transitions are the alpha
    replica's (its draws), and each replica's are counted per member and in all."""
    params = SamplerParams(sampler="ppt", prefetch=rule, budget=4, max_new_tokens=8, block_size=4, steps=6, seed=2,
                           pt_replicas=3, pt_swap_every=1)
    events = events_of(params)
    s = summarize(events)
    draws = [e for e in events if isinstance(e, Transition)]
    assert s.transitions == len(draws) == 2 * 6 and s.accepted == sum(e.accepted for e in draws)
    assert s.acceptance_rate == pytest.approx(s.accepted / s.transitions) and s.acceptance_rate > 0
    d = s.to_dict()
    assert d["transitions"] == 12 and d["member_transitions"] == [12, 12, 12]
    assert d["population_transitions"] == 36 and d["member_accepted"][-1] == s.accepted
    steps = [e for e in events if isinstance(e, PtStep)]
    assert d["member_accepted"] == [sum(st.accepted[r] for st in steps) for r in range(3)]


def test_a_resample_move_session_counts_every_particles_moves():
    """resample-move said `acceptance_rate 0.0` beside `moves_accepted 15`: its transitions are its
    particles' K moves a block, each particle's counted."""
    P, K = 4, 3
    params = SamplerParams(sampler="resample-move", prefetch="none", particles=P, max_new_tokens=9, block_size=3,
                           steps=K, seed=1)
    events = events_of(params)
    s = summarize(events)
    rm = [e for e in events if isinstance(e, RmStep)]
    moved = sum(sum(e.accepted) for e in rm)
    assert s.transitions == P * K * len(rm) == P * K * 3 and s.accepted == moved > 0
    d = s.to_dict()
    assert d["moves_accepted"] == moved and d["acceptance_rate"] == pytest.approx(moved / (P * K * 3))
    assert d["member_transitions"] == [K * 3] * P
    assert d["member_accepted"] == [sum(e.accepted[i] for e in rm) for i in range(P)]


@pytest.mark.parametrize("rule", ["none", "stream"])
def test_a_populations_throughput_counts_every_members_transitions(rule):
    """requests_realized, tr/call, ms/tr and tr/s charged all R replicas' calls and time to the alpha
    replica's transitions (`stats --json` said 43 requests issued, 6 realized, at 0 waste): they count every
    member's transitions, as the calls and time are all of theirs."""
    params = SamplerParams(sampler="ppt", prefetch=rule, budget=4, max_new_tokens=8, block_size=4, steps=6, seed=2,
                           pt_replicas=3, pt_swap_every=1)
    s = summarize(events_of(params))
    d = s.to_dict()
    members = sum(d["member_transitions"])
    assert d["requests_realized"] == members == 3 * s.transitions
    assert d["transitions_per_s"] == pytest.approx(members / s.wall_s)
    assert d["wall_per_transition_s"] == pytest.approx(s.wall_s / members)
    if rule == "none":
        assert d["transitions_per_call"] == pytest.approx(members / s.calls)


def test_bench_gives_a_population_its_rates_as_an_mh_row():
    """bench decided a row had MH transitions by `requests_realized > 0`; it asks whether the sessions are an
    MH chain's or a population's, so a one-shot row keeps '-' whatever it realized."""
    from presto_tui.cli.bench import aggregate

    ppt = summarize(events_of(SamplerParams(sampler="ppt", prefetch="none", max_new_tokens=8, block_size=4,
                                            steps=4, seed=2, pt_replicas=3)))
    smc = summarize(events_of(SamplerParams(sampler="powersmc", max_new_tokens=8, particles=3, seed=2)))
    row = aggregate([ppt], None)
    assert row["mh"] and row["requests_realized"] == sum(ppt.to_dict()["member_transitions"])
    assert not aggregate([smc], None)["mh"]


def test_resample_moves_counts_are_each_particles_own_not_k_a_block():
    """resample-move's member transitions were inferred as K per particle per block (and the test checked the
    same formula): the record counts each particle's transitions, the summary reads them, and they are what the
    sampler's own members made (their `Transition`s, folded by the population)."""
    engine = small_backend(vocab=7, sharpness=1.2)
    params = SamplerParams(sampler="resample-move", prefetch="none", particles=3, max_new_tokens=9, block_size=3,
                           steps=2, seed=4)
    driver = make_driver(engine, params, list(PROMPT))
    s = SessionSummary()
    for _, ev in run_chains(engine, [driver]):
        s.update(ev)
    d = s.to_dict()
    assert d["member_transitions"] == [t.transitions for t in driver.tallies]
    assert d["member_accepted"] == [t.accepted for t in driver.tallies]
    assert s.transitions == sum(t.transitions for t in driver.tallies) and not s.info.inferred
    # a record's own counts win over K (a particle that moved less is counted as it moved) ...
    info = s.info.__class__()
    info.steps = 5
    base = dict(step=0, t=3, exponent=4.0, tokens=((1,), (2,)), log_weights=(0.0, 0.0), ess=2.0, resampled=False,
                parents=(0, 1), wall_s=0.0, accepted=(1, 0), states=((1,), (2,)))
    info.update(RmStep(**base, transitions=(2, 1)))
    assert info.member_moves() == [(2, 1), (1, 0)] and info.session_moves() == (3, 1) and not info.inferred
    # ... and a trace written before they were recorded falls back to K each, and says so
    info.update(RmStep(**base))
    assert info.member_moves() == [(7, 2), (6, 0)] and any("K" in n for n in info.notes())


def test_run_chains_of_tempering_report_transitions_and_blame_the_right_k(tmp_path):
    """`run --sampler ppt --chains 3 -K 12` warned "K=0 was too short" and its chains table said `-`: the
    table gives each chain's (its alpha replica's) transitions, the warning K=12."""
    path = tmp_path / "t.jsonl"
    res = runner.invoke(cli_app, ["run", "the cat", "--sampler", "ppt", "--chains", "2", "-K", "12", "-n", "4",
                                  "--prefetch", "none", "--trace", str(path)],
                        env={"PRESTO_TUI_BACKEND": "synthetic", "COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert "K=0" not in res.output
    rows = [ln.split() for ln in res.output.splitlines() if ln.strip()[:1] in "123" and "done" in ln]
    assert [r[2] for r in rows[:2]] == ["12", "12"]
    d = json.loads(runner.invoke(cli_app, ["stats", str(path), "--json"]).stdout)
    assert [r["transitions"] for r in d["sessions"]] == [12] * 2
    assert all(r["population_transitions"] == 48 for r in d["sessions"])
    assert d["chains"][0]["steps"] == 12


# -- the ladder ------------------------------------------------------------------------------------

def _step(step, pairs, probs, swapped, holders, final=False):
    return PtStep(step, 0, step, (1.0, 2.0, 4.0), pairs, probs, swapped, holders, (-3.0, -2.0, -1.0), ((),) * 3,
                  (1, 1, 1), (1, 0, 1), final, 0.0)


def test_the_ladder_numbers_are_the_mean_swap_probability_per_pair_and_lambda_their_rejections():
    lad = LadderNumbers()
    for ev in (_step(1, (0,), (0.5,), (True,), (1, 0, 2)), _step(2, (1,), (0.25,), (False,), (1, 0, 2)),
               _step(3, (0,), (0.1,), (False,), (1, 0, 2)), _step(4, (), (), (), (1, 0, 2), final=True)):
        lad.update(ev)
    assert lad.mean_accept() == pytest.approx([0.3, 0.25]) and lad.accepted_share() == [0.5, 0.0]
    assert lad.barrier == pytest.approx(0.7 + 0.75)
    # each pair's length: the l with erfc(l / 2) = its mean A; L their sum, 1 + L / l* replicas suggested
    assert [math.erfc(x / 2) for x in lad.lengths()] == pytest.approx([0.3, 0.25])
    assert lad.length == pytest.approx(sum(lad.lengths()))
    assert lad.length / TARGET_LENGTH == pytest.approx(2.11, abs=0.01)
    assert lad.suggested_replicas == 4 and lad.floored_pairs() == []
    assert lad.index == [(1, 0, 2)] * 4 and lad.barriers == 3 and lad.transitions == [4, 4, 4]
    assert lad.alpha_level_share() == [0.0, 0.0, 1.0]  # the state that started at the top never left it
    d = lad.to_dict()["ladder"]
    assert [p["pair"] for p in d["pairs"]] == [[2, 1], [3, 2]]  # from the lowest, as every list of the JSON
    assert d["pairs"][1]["mean_accept_prob"] == pytest.approx(0.25) and d["pairs"][0]["proposed"] == 2
    labels = [label for label, _ in lad.rows()]
    assert labels[:2] == ["swap 3-2 (alpha 4/2)", "swap 2-1 (alpha 2/1)"]
    # a pair never proposed: no Lambda (it would leave that pair's rejections out)
    one = LadderNumbers()
    one.update(_step(1, (0,), (0.5,), (True,), (1, 0, 2)))
    assert one.barrier is None and one.length is None and one.suggested_replicas is None
    assert "never proposed" in dict(one.rows())["barrier Lambda (Syed et al.)"]
    assert "never proposed" in dict(one.rows())["length L (sum of 2 erfcinv(A))"]


def test_the_ladder_is_folded_once_and_afresh_for_every_ladder_its_records_hold():
    """PptInfo and LadderNumbers both folded the ladder (round trips and pairs twice in the JSON), and the fold
    started again only when R changed: an adaptive ladder's warm-up ladders (same R, other exponents) would
    be pooled with the frozen one.  One fold, keyed by the exponents; the levels' MH transitions count all."""
    from presto_tui.runtime.methods.ppt import PptInfo

    def step(s, exps, probs, final=False):
        return PtStep(s, 0, s, exps, (0, 1)[: len(probs)], probs, (False,) * len(probs), (0, 1, 2),
                      (-3.0, -2.0, -1.0), ((),) * 3, (1, 1, 1), (1, 0, 1), final, 0.0)

    info = PptInfo()
    warm, frozen = (1.0, 1.5, 4.0), (1.0, 2.0, 4.0)
    for s in (1, 2):
        info.update(step(s, warm, (0.01, 0.02)))
    for s in (3, 4, 5):
        info.update(step(s, frozen, (0.5, 0.3)))
    info.update(step(6, frozen, (), final=True))
    lad = info.ladder
    assert lad.exponents == frozen and lad.proposed == [3, 3] and lad.barriers == 3
    assert lad.mean_accept() == pytest.approx([0.5, 0.3])  # the warm-up's 0.01, 0.02 left out
    assert lad.earlier_ladders == 1 and lad.earlier_barriers == 2
    assert lad.transitions == [6, 6, 6]  # every ladder's transitions: the members' work
    assert info.proposed is lad.proposed and info.round_trips == lad.round_trips  # read off the one fold
    d = info.to_dict()
    assert "swaps" not in d and "round_trips" not in d["ladder"] and "round_trips" in d
    assert d["ladder"]["earlier_ladders"] == 1 and "earlier ladders (left out)" in dict(info.rows())
    # the alpha level's share counts the barriers, not the end's record that repeats the last one
    assert len(lad.index) == 4 and lad.alpha_level_share() == [0.0, 0.0, 1.0]


def test_lambda_is_a_lower_bound_where_a_pair_never_swaps_and_the_length_says_how_far():
    """A pair that accepts nothing has rejection rate 1 whatever its barrier: Lambda saturated at R - 1 and
    `stats` said "about 4 replicas suit it; 4 ran" of a broken ladder.  Lambda is shown as a lower bound; the
    length, which keeps growing as a pair stops swapping, suggests the replicas and names the long gap."""
    lad = LadderNumbers()
    for s in range(1, 7):  # pair 2-1 (index 0) never swaps, pair 3-2 swaps often
        lad.update(_step(s, (s % 2,), (0.001 if s % 2 == 0 else 0.8,), (s % 2 == 1,), (0, 1, 2)))
    assert lad.saturated_pairs() == [0] and lad.barrier_is_lower_bound
    rows = dict(lad.rows())
    words = rows["barrier Lambda (Syed et al.)"]
    assert words.startswith(f">= {lad.barrier:.2f}") and "2-1 rarely swaps" in words
    assert lad.lengths()[0] > 4 * lad.lengths()[1] and lad.suggested_replicas == 5  # L 4.65 + 0.36: 5.01 / 1.47
    assert rows["length L (sum of 2 erfcinv(A))"] == (f"{lad.length:.2f}: 5 replicas give each pair a mean A near 0.3 "
                                                       "(3 ran); the longest gap: alpha 1 to 2")
    d = lad.to_dict()["ladder"]
    assert d["barrier_is_lower_bound"] is True and d["saturated_pairs"] == ["2-1"]
    assert d["suggested_replicas"] == 5 and d["pairs"][0]["length"] == pytest.approx(lad.lengths()[0])
    healthy = LadderNumbers()
    for s in range(1, 5):
        healthy.update(_step(s, (s % 2,), (0.4,), (True,), (0, 1, 2)))
    assert not healthy.barrier_is_lower_bound and healthy.to_dict()["ladder"]["saturated_pairs"] == []
    assert dict(healthy.rows())["barrier Lambda (Syed et al.)"] == "1.20"
    assert dict(healthy.rows())["length L (sum of 2 erfcinv(A))"].startswith("2.38: 3 replicas")
    # a pair below A_FLOOR reads as A_FLOOR (its length 6.9), and the row says so
    stuck = LadderNumbers()
    for s in range(1, 5):
        stuck.update(_step(s, (s % 2,), (1e-9 if s % 2 == 0 else 0.4,), (False,), (0, 1, 2)))
    assert stuck.floored_pairs() == [0] and stuck.lengths()[0] == pytest.approx(6.9, abs=0.05)
    assert dict(stuck.rows())["length L (sum of 2 erfcinv(A))"].endswith(
        "; pair 2-1 read the floor (mean A < 1e-06: 6.9 each), so L is rough")
    assert stuck.to_dict()["ladder"]["floored_pairs"] == ["2-1"]


def test_a_pair_that_never_swaps_gets_a_note_naming_it_and_the_replicas_the_length_suggests():
    """A pair that refused REFUSED_NOTE swaps and accepted none is named in `run`'s and `stats`' notes, with the
    remedy for the ladder it ran (geometric: more replicas, as many as the length suggests; given: closer
    exponents); a pair refused fewer times says too little for a note."""
    from presto_tui.runtime.methods.ppt import REFUSED_NOTE, PptInfo

    info = PptInfo()
    for s in range(1, 2 * REFUSED_NOTE + 1):  # pair 2-1 refused REFUSED_NOTE times (A 1e-4), pair 3-2 swaps
        info.update(_step(s, (0,) if s % 2 else (1,), (1e-4,) if s % 2 else (0.5,), (False,) if s % 2 else (True,),
                          (0, 1, 2)))
    notes = info.notes()
    assert len(notes) == 1 and notes[0].startswith(f"no swap between replicas 1 and 2 (alpha 1 and 2) was accepted in "
                                                   f"{REFUSED_NOTE} tries")
    assert info.ladder.suggested_replicas > 3
    assert "more replicas" in notes[0]
    assert f"suggests about {info.ladder.suggested_replicas} replicas, 3 ran" in notes[0]
    info.ladder_given = True
    assert "closer together there in --pt-ladder" in info.notes()[0]
    few = PptInfo()
    for s in range(1, 2 * REFUSED_NOTE - 1):
        few.update(_step(s, (0,) if s % 2 else (1,), (1e-4,) if s % 2 else (0.5,), (False,), (0, 1, 2)))
    assert few.notes() == []


def test_the_suggested_replicas_give_each_pair_the_target_acceptance_where_swaps_are_gaussian():
    """Where log p0 has standard deviation sigma at every exponent, a pair's swap log ratio is Gaussian with mean
    -(d sigma)^2 and variance 2 (d sigma)^2 (d its gap), and its mean A is erfc(d sigma / 2): the lengths
    measured on any ladder add up to (alpha - alpha_1) sigma, and the R they suggest, evenly spaced, gives each
    pair a mean A of TARGET_A at least, where one replica fewer falls below it."""
    from presto_tui.runtime.methods.population_numbers import TARGET_A

    sigma, lo, hi = 3.0, 1.0, 4.0
    for exps in ((1.0, 4 ** (1 / 3), 4 ** (2 / 3), 4.0), (1.0, 1.2, 2.5, 4.0), (1.0, 2.0, 4.0)):
        lad = LadderNumbers()
        R = len(exps)
        for s in range(1, 2 * R):
            pairs = tuple(i for i in range(R - 1) if i % 2 == (s - 1) % 2)
            probs = tuple(math.erfc((exps[i + 1] - exps[i]) * sigma / 2) for i in pairs)
            lad.update(PtStep(s, 0, s, exps, pairs, probs, (False,) * len(pairs), tuple(range(R)), (0.0,) * R,
                              ((),) * R, (1,) * R, (0,) * R, False, 0.0))
        assert lad.length == pytest.approx((hi - lo) * sigma)
        n = lad.suggested_replicas
        assert math.erfc((hi - lo) / (n - 1) * sigma / 2) >= TARGET_A > math.erfc((hi - lo) / (n - 2) * sigma / 2)


def test_stats_and_run_print_the_ladder_top_down_with_mean_a_and_lambda(tmp_path):
    path = tmp_path / "t.jsonl"
    env = {"PRESTO_TUI_BACKEND": "synthetic", "COLUMNS": "200"}
    res = runner.invoke(cli_app, ["run", "the cat", "--sampler", "ppt", "-K", "8", "-n", "8", "--pt-swap-every",
                                  "1", "--trace", str(path)], env=env)
    assert res.exit_code == 0, res.output
    out = runner.invoke(cli_app, ["stats", str(path)], env=env).stdout
    for text in (res.output, out):
        assert text.index("swap 4-3") < text.index("swap 3-2") < text.index("swap 2-1")
        assert "barrier Lambda" in text and "MH transitions per replica" in text
    s = presto_tui.read_trace(path).summaries()[0]
    lam = s.to_dict()["ladder"]["barrier"]
    assert f"{lam:.2f}" in out and "mean A" in out


# -- SMC: history and the evidence ----------------------------------------------------------------

SEEDS = 300


def _log_zs(params, engine, seeds=SEEDS):
    sums: dict[int, SessionSummary] = {}
    drivers = (make_driver(engine, params.with_(seed=s), [1]) for s in range(seeds))
    for i, ev in run_chains(engine, drivers, concurrency=64):
        sums.setdefault(i, SessionSummary()).update(ev)
    return [sums[i] for i in range(seeds)]


@pytest.mark.slow  # (300 sessions a case, as the law tests' sessions: about 12 s in all)
@pytest.mark.parametrize("sampler,P", [("powersmc", 3), ("powersmc", 8), ("resample-move", 3),
                                       ("resample-move", 6)])
def test_the_log_z_estimate_is_unbiased_for_z_on_the_enumerable_model(sampler, P):
    """The mean over seeds of Z-hat = exp(log Z) matches the exact Z = sum_x p0(x)^alpha over every response
    (within 4 standard errors), with resampling happening; leaving out the resampled blocks' factors (the
    final weights alone) misses it far: the check can fail."""
    engine = testing.enumerable()
    extra = dict(smc_block=1) if sampler == "powersmc" else dict(block_size=1, steps=1)
    params = SamplerParams(sampler=sampler, prefetch="none", alpha=4.0, max_new_tokens=3, particles=P, tau=1.0,
                           **extra)
    law = testing.exact_law(engine, [1], 3, 4.0)
    log_z = float(np.logaddexp.reduce(4.0 * law.logp0))
    sums = _log_zs(params, engine)
    ratio = np.exp(np.array([s.info.smc.log_z for s in sums]) - log_z)
    mean, se = ratio.mean(), ratio.std(ddof=1) / math.sqrt(SEEDS)
    assert sum(s.info.resamplings for s in sums) > SEEDS / 4
    assert abs(mean - 1.0) < 4 * se and se < 0.1, (mean, se)
    final_only = np.exp(np.array([log_mean_exp(s.info.smc.final_log_w) for s in sums]) - log_z)
    assert abs(final_only.mean() - 1.0) > 10 * se
    assert np.mean(np.log(ratio)) < 0  # (log Z-hat itself is biased low: Jensen)


def _z_with_eos(engine, prompt, n, alpha):
    """Z = sum over responses of p0^alpha, a response ending at its EOS or after n tokens (PowerSMC's)."""
    lm = engine.lm

    def z(ctx, left):
        if left == 0:
            return 1.0
        logp = lm.log_probs(ctx, 1.0)[0]
        return math.fsum(math.exp(alpha * logp[t]) * (1.0 if t == lm.eos_id else z([*ctx, t], left - 1))
                         for t in range(lm.vocab_size))

    return z(list(prompt), n)


@pytest.mark.slow  # (400 sessions)
def test_the_log_z_estimate_is_unbiased_with_eos_and_powersmcs_ramp():
    """PowerSMC with EOS (absorbed particles) and a ramp over the whole response (the completion to p0^alpha
    at the end, `_complete`): the enumerable model had neither, so neither was tested."""
    from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM

    engine = SyntheticEngine(SyntheticLM(vocab_size=3, order=2, seed=1, sharpness=1.0, eos_id=0))
    n, alpha = 4, 4.0
    params = SamplerParams(sampler="powersmc", prefetch="none", alpha=alpha, max_new_tokens=n, particles=3,
                           tau=0.5, smc_block=1, smc_ramp=n)
    sums = _log_zs(params, engine, seeds=400)
    ratio = np.exp(np.array([s.info.smc.log_z for s in sums]) - math.log(_z_with_eos(engine, [1], n, alpha)))
    mean, se = ratio.mean(), ratio.std(ddof=1) / math.sqrt(len(sums))
    assert sum(s.info.resamplings for s in sums) > 50 and any(len(s.tokens) < n for s in sums)  # (EOS ended some)
    assert abs(mean - 1.0) < 4 * se and se < 0.1, (mean, se)


def test_the_smc_history_gives_ess_resampling_and_genealogy_per_block():
    smc = SmcNumbers()

    class Ev:
        def __init__(self, step, log_w, resampled, parents):
            self.step, self.t, self.log_weights, self.ess = step, step + 1, log_w, 1.0
            self.resampled, self.parents = resampled, parents

    smc.step(Ev(0, (0.0, 0.0, 0.0, math.log(5)), True, (3, 3, 3, 1)))
    smc.step(Ev(1, (0.0, 0.0, 1.0, 1.0), False, (0, 1, 2, 3)))
    smc.step(Ev(2, (math.log(2),) * 4, True, (0, 1, 2, 0)))
    smc.final((0.0, math.log(3), 0.0, 0.0))
    assert [b["unique_ancestors"] for b in smc.blocks] == [2, 4, 3]
    assert [b["lineages"] for b in smc.blocks] == [2, 2, 1]  # every particle descends from particle 4 at last
    assert smc.log_z == pytest.approx(math.log(2) + math.log(2) + math.log(6 / 4))
    assert smc.to_dict()["resampled_history"] == [True, False, True]
    assert math.isnan(log_mean_exp([0.0, math.nan]))  # (a NaN weight was dropped and counted as weight 0)
    assert log_mean_exp([0.0, math.log(3)]) == pytest.approx(math.log(2)) and log_mean_exp([]) == -math.inf


def test_each_block_gives_its_own_evidence_increment_and_their_running_sum():
    """`log_mean_weight` is cumulative since the last resampling: summed over blocks it counted a block's
    factor again in every block after it (-60.06 against log Z -44.53).  `log_z_increment` is the block's own
    factor log sum_i W_(b-1)^i w_b^i, `log_z_running` their sum: log Z of the block's intermediate target."""
    smc = SmcNumbers()

    class Ev:
        def __init__(self, step, log_w, resampled):
            self.step, self.t, self.log_weights, self.ess = step, step + 1, log_w, 1.0
            self.resampled, self.parents = resampled, (0, 1)

    w1, w2, w3 = (0.0, math.log(3)), (math.log(2), math.log(4)), (0.0, 0.0)  # w2: w1 times (2, 4/3)
    smc.step(Ev(0, w1, False))
    smc.step(Ev(1, w2, True))
    smc.step(Ev(2, w3, False))
    smc.final(w3)
    inc = [b["log_z_increment"] for b in smc.blocks]
    # block 2's own factor: sum_i W_1^i (w_2^i / w_1^i) = 1/4 * 2 + 3/4 * 4/3 = 1.5
    assert inc == pytest.approx([math.log(2), math.log(1.5), 0.0])
    assert sum(b["log_mean_weight"] for b in smc.blocks) != pytest.approx(smc.log_z)  # (cumulative: no sum)
    running = [b["log_z_running"] for b in smc.blocks]
    assert running == pytest.approx(np.cumsum(inc)) and running[-1] == pytest.approx(smc.log_z)


def test_run_json_and_stats_give_log_z_ess_and_genealogy(tmp_path):
    env = {"PRESTO_TUI_BACKEND": "synthetic", "COLUMNS": "200"}
    for i, (sampler, extra) in enumerate((("powersmc", ["--particles", "6"]),
                                          ("resample-move", ["--particles", "4", "-B", "3", "-K", "2"]))):
        res = runner.invoke(cli_app, ["run", "the cat", "--sampler", sampler, "-n", "12", "--json", "--trace",
                                      str(tmp_path / f"{i}.jsonl"), *extra], env=env)
        assert res.exit_code == 0, res.output
        d = json.loads(res.stdout.strip().splitlines()[-1])
        d = d.get("sessions", [d])[0] if "sessions" in d else d
        assert math.isfinite(d["log_z"]) and len(d["ess_history"]) == d["smc_steps"] == len(d["lineages"])
        blocks = presto_tui.read_trace(tmp_path / f"{i}.jsonl").smc_blocks  # (the same numbers, every surface)
        assert d["lineages"] == blocks["lineages"].tolist() and d["ess_history"] == blocks["ess"].tolist()
    out = runner.invoke(cli_app, ["stats", str(tmp_path / "0.jsonl"), str(tmp_path / "1.jsonl")], env=env).stdout
    assert "log Z (evidence of p0^alpha)" in out and "unique ancestors / lineages" in out


# -- the trace reader's DataFrames -----------------------------------------------------------------

@pytest.fixture(scope="module")
def population_trace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pop")
    env = {"PRESTO_TUI_BACKEND": "synthetic"}
    for i, args in enumerate((["--sampler", "ppt", "--chains", "2", "-K", "6", "--pt-swap-every", "1", "--prefetch",
                               "none"],
                              ["--sampler", "resample-move", "--particles", "4", "-B", "2", "-K", "2", "--rm-ess",
                               "1", "--tau", "1"])):
        res = runner.invoke(cli_app, ["run", "the cat", "-n", "8", "--trace", str(folder / f"{i}.jsonl"), *args],
                            env=env)
        assert res.exit_code == 0, res.output
    return presto_tui.read_trace([folder / "0.jsonl", folder / "1.jsonl"])


def test_read_trace_gives_swaps_replicas_and_the_ladder_as_dataframes(population_trace):
    t = population_trace
    pt = [[e for e in s.events if isinstance(e, PtStep)] for s in (t.session(1), t.session(2))]
    swaps = t.swaps
    assert len(swaps) == sum(len(st.pairs) for steps in pt for st in steps)
    first = swaps.iloc[0]
    st = pt[0][0]
    assert first["accept_prob"] == st.accept_probs[0] and first["accepted"] == st.swapped[0]
    assert first["pair"] == f"{st.pairs[0] + 2}-{st.pairs[0] + 1}"
    # log p0 of each state before the swap: an accepted swap exchanged them
    lo = st.pairs[0]
    before = (st.log_p0[lo + 1], st.log_p0[lo]) if st.swapped[0] else (st.log_p0[lo], st.log_p0[lo + 1])
    assert (first["log_p0_lower"], first["log_p0_upper"]) == before
    reps = t.replicas
    assert len(reps) == 4 * sum(len(steps) for steps in pt)
    # the index process: at every record each replica holds exactly one level
    assert (reps.groupby(["session", "barrier"])["state"].nunique() == 4).all()
    s = t.summaries()[0]
    assert reps[reps.session == 1].groupby("level")["transitions"].sum().tolist() == s.to_dict()["member_transitions"]
    ladder = t.ladder
    assert ladder[ladder.session == 1]["pair"].tolist() == ["4-3", "3-2", "2-1"]
    mine = ladder[ladder.session == 1].set_index("pair")
    sw = swaps[swaps.session == 1]
    assert mine.loc["4-3", "mean_accept_prob"] == pytest.approx(sw[sw.pair == "4-3"]["accept_prob"].mean())
    sessions = t.sessions
    assert sessions.loc[0, "transitions"] == 6 and sessions.loc[0, "population_transitions"] == 24
    assert sessions.loc[0, "barrier"] == pytest.approx((1 - mine["mean_accept_prob"]).sum())
    # per level: the draws of one level of the prompt's chains
    lv = t.chains(1, level=2)
    # (the end's record repeats the last barrier's states here: every transition is followed by a barrier)
    assert lv.posterior["log_target"].shape == (2, min(sum(any(e.transitions) for e in steps) for steps in pt))
    assert float(lv.posterior["log_p0"][0, 0]) == pt[0][0].log_p0[1]
    with pytest.raises(presto_tui.InputError, match="level must be"):
        t.chains(1, level=5)


def test_read_trace_gives_every_members_own_chain(population_trace):
    """Every replica's and particle's own MH transitions (schema 1.4's member lines): as many per member as
    its records count, the alpha replica's the session's own draws, each at its member's exponent."""
    t = population_trace
    mt, reps, parts = t.member_chains, t.replicas, t.particles
    for session, R in ((1, 4), (3, 4)):  # (two chains of tempering, then resample-move's four particles)
        mine = mt[mt.session == session]
        assert sorted(mine.member.unique()) == list(range(1, R + 1))
        counts = mine.groupby("member").size().tolist()
        if session == 1:
            assert counts == reps[reps.session == 1].groupby("level")["transitions"].sum().tolist()
            own = t.transitions[t.transitions.session == 1].reset_index(drop=True)
            alpha = mine[mine.member == R].reset_index(drop=True)
            assert (alpha[list(own.columns)] == own).all().all() and (alpha.exponent == 4.0).all()
            assert sorted(mine.exponent.unique()) == pytest.approx(sorted(reps[reps.session == 1].exponent.unique()))
        else:
            assert counts == parts[parts.session == session].groupby("particle")["moves_proposed"].sum().tolist()


def test_chains_of_a_level_keep_to_one_block_and_honour_burn_in_and_thin(tmp_path):
    """`chains(p, level=r)` took every block's records (prefixes of different lengths in one chain), repeated
    the last barrier's states as the end's record, and ignored block, burn_in and thin."""
    path = tmp_path / "t.jsonl"
    res = runner.invoke(cli_app, ["run", "the cat", "--sampler", "ppt", "--chains", "2", "-K", "4", "-n", "8", "-B",
                                  "4", "--pt-swap-every", "1", "--prefetch", "none", "--trace", str(path)],
                        env={"PRESTO_TUI_BACKEND": "synthetic"})
    assert res.exit_code == 0, res.output
    t = presto_tui.read_trace(path)
    steps = [e for e in t.session(1).events if isinstance(e, PtStep)]

    def expected(block):  # level 2's log p0 after each barrier of the block, none repeated by the end's record
        return [e.log_p0[1] for e in steps if e.block == block - 1 and any(e.transitions)]

    for block in (1, 2):
        got = t.chains(1, level=2, block=block).posterior["log_p0"].values[0].tolist()
        assert got == expected(block) and len(got) == 4  # K = 4 barriers, one a transition
    sel = t.chains(1, level=2, block=2, burn_in=1, thin=2)
    assert sel.posterior["log_p0"].values[0].tolist() == expected(2)[1::2]
    assert sel.warmup_posterior["log_p0"].values[0].tolist() == expected(2)[:1]
    with pytest.raises(presto_tui.InputError, match="no tempering records in block 3"):
        t.chains(1, level=2, block=3)


def test_read_trace_gives_particles_and_smc_blocks_as_dataframes(population_trace):
    t = population_trace
    rm = [e for e in t.session(3).events if isinstance(e, RmStep)]
    parts = t.particles
    assert len(parts) == 4 * len(rm)
    assert parts["ancestor"].tolist() == [j + 1 for e in rm for j in e.parents]
    assert parts["moves_accepted"].tolist() == [a for e in rm for a in e.accepted]
    assert (parts["moves_proposed"] == 2).all()
    blocks = t.smc_blocks
    # (resample-move's final weights are its last block's, or all 1 after a resampling: the running sum is log Z)
    assert blocks["log_z_running"].iloc[-1] == pytest.approx(t.sessions.loc[2, "log_z"])
    assert blocks["resampled"].tolist() == [e.resampled for e in rm] and any(e.resampled for e in rm)
    assert blocks["unique_ancestors"].tolist() == [len(set(e.parents)) if e.resampled else 4 for e in rm]
    assert math.isfinite(t.sessions.loc[2, "log_z"]) and t.sessions.loc[2, "transitions"] == 4 * 2 * len(rm)


def test_eval_gives_populations_their_transitions(tmp_path):
    """eval's `tr` said 0 for tempering and resample-move: it is the alpha replica's transitions, and every
    particle's moves."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"prompt": q, "answer": "cat", "grader": "regex"}) + "\n"
                             for q in ("the cat", "a dog ran")))
    res = runner.invoke(cli_app, ["eval", str(tasks), "--methods", "ppt,resample-move", "-n", "4", "-K", "3",
                                  "--particles", "2", "--json", "--no-trace", "-o", str(tmp_path / "r.json")],
                        env={"PRESTO_TUI_BACKEND": "synthetic"})
    assert res.exit_code == 0, res.output
    rows = {m["label"]: m for m in json.loads(res.stdout)["methods"]}
    assert rows["ppt"]["transitions"] == 3  # one block of K = 3: the alpha replica's
    assert rows["resample-move"]["transitions"] == 2 * 3  # two particles, K = 3 each
    assert all(0 < m["acceptance_rate"] <= 1 for m in rows.values())
