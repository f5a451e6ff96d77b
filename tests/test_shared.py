"""The engine's shared speculation budget (runtime/prefetch/stream/shared.py), the step cost it prices
with (runtime/session/cost.py: a request's start included), the learned move rates (moves.py), and
the shared policy on the engine loop: exact as every policy (test_coupling, test_law and
test_transitions cover it), speculating less as the load grows, and at saturation only what the
sequential chains batched would hold."""

from __future__ import annotations

import random

import pytest

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.prefetch.stream.moves import FLOOR, PRIOR_WEIGHT, MoveRates
from presto_tui.runtime.prefetch.stream.shared import Load, SharedBudget, best_width, clearing_price, slots, worth
from presto_tui.runtime.session.cost import StepCost
from presto_tui.runtime.session.loop import EngineLoop, make_driver, run_chains
from presto_tui.runtime.session.summary import SessionSummary

# -- the step cost: a + b n + p s ------------------------------------------------------------------


def test_step_cost_learns_what_a_request_start_costs():
    """With several chains on an engine about as many requests start in every step whatever n is: a
    fit of a + b n alone puts their prefill p into a and makes width look cheap; the plane does not."""
    a, b, p = 0.010, 0.0005, 0.008
    rng = random.Random(0)
    cost = StepCost()
    for _ in range(2000):
        n = rng.choice([8, 14, 20, 26, 32])
        s = rng.choice([4, 5, 6, 7, 8])  # the starts do not grow with n
        cost.record(n, (a + b * n + p * s) * rng.uniform(0.995, 1.005), s)
    fa, fb, fp = cost.plane()
    assert fa == pytest.approx(a, rel=0.05) and fb == pytest.approx(b, rel=0.05) and fp == pytest.approx(p, rel=0.05)
    assert cost.line() == (fa, fb)
    assert cost.turnover == pytest.approx(6 / 20, rel=0.1)  # starts per live request and step
    est = cost.estimate()
    assert est.p == fp and est.slot == pytest.approx(fb + fp * cost.turnover)
    assert cost.mean_live == pytest.approx(20, rel=0.05)


def test_step_cost_without_starts_to_tell_apart_fits_the_line():
    """Starts that never vary (or none at all) cannot be told from a: p is 0 and the line is a + b n."""
    cost = StepCost()
    for i in range(300):
        n = (1, 4, 16)[i % 3]
        cost.record(n, 0.010 + 0.001 * n, 1)
    a, b, p = cost.plane()
    assert p == 0.0 and a == pytest.approx(0.010) and b == pytest.approx(0.001)


def test_the_loop_learns_the_synthetic_engines_prefill():
    """The engine loop tells the step cost how many requests each step took: on the synthetic engine
    whose request starts cost `prefill` live requests, the plane finds it."""
    engine = SyntheticEngine(SyntheticLM(), slope=0.05, prefill=16)
    loop = EngineLoop(engine)
    params = SamplerParams(max_new_tokens=32, steps=8, prefetch="stream")
    prompts = [f"the cat {i}" for i in range(6)]
    list(run_chains(engine, [make_driver(engine, params, engine.encode_prompt(q), prompt=q) for q in prompts],
                    concurrency=3, loop=loop))
    a, b, p = loop.cost.plane()
    unit = engine.step_s * engine.slope  # one more live request
    assert a + b == pytest.approx(engine.step_s, rel=0.01) and b == pytest.approx(unit, rel=0.01)
    assert p == pytest.approx(16 * unit, rel=0.01)


def test_the_synthetic_engine_charges_a_request_start():
    engine = SyntheticEngine(SyntheticLM(), slope=0.1, prefill=10)
    from presto_tui.runtime.core.types import Request

    for seed in range(3):
        engine.submit(Request((1, 2), 4, seed, 0.25))
    engine.step()  # three live, all three taken since the last step
    assert engine.clock() == pytest.approx(0.01 * (1 + 0.1 * (2 + 10 * 3)))
    engine.step()  # the same three, none new
    assert engine.clock() == pytest.approx(0.01 * (1 + 0.1 * 32) + 0.01 * (1 + 0.1 * 2))


# -- the shared budget's arithmetic ----------------------------------------------------------------

CPU = dict(a=1.0, b=0.05)


def test_alone_the_engine_holds_one_chains_best_width():
    load = Load(**CPU)
    width = best_width(load)
    assert width == pytest.approx((16 / 0.05) ** 0.5) and slots(load) == pytest.approx(width - 1)
    reaches = [0.9 ** i for i in range(40)]  # one chain's offer, best first
    price = clearing_price(load, reaches)
    kept = sum(r >= price for r in reaches)
    assert kept == round(width) - 1  # all its slots, as the cost policy would keep
    assert price == pytest.approx(reaches[kept - 1])


def test_with_more_chains_each_request_must_be_worth_more():
    """The engine's width never falls as chains join and grows as sqrt(C), a chain's falls as 1 / sqrt(C);
    a request is never kept below its worth: reach x the step it saves >= the step time it adds to
    every chain."""
    widths = [best_width(Load(**CPU, chains=c)) for c in (1, 2, 4, 16)]
    assert widths[0] == pytest.approx(2 * widths[1]) and widths[2] == pytest.approx(2 * widths[3])
    assert widths[2] == pytest.approx((8 / (0.05 * 4)) ** 0.5)
    assert worth(Load(**CPU, chains=8), 20) == pytest.approx(0.05 * 8 / (1 + 0.05 * 20))
    reaches = [0.5] * 100
    assert clearing_price(Load(**CPU, chains=1), reaches) == 0.5
    dear = Load(a=1.0, b=4.0)  # two requests' width: one speculative slot, worth 4/9 of a reach
    assert slots(dear) == pytest.approx(1) and clearing_price(dear, [0.3] * 100) == worth(dear, 2) == 4 / 9


def test_the_slots_go_to_the_likeliest_requests_whichever_chain_asks():
    budget = SharedBudget(lambda: Load(**CPU, chains=4))
    n = round(slots(Load(**CPU, chains=4)))
    sure, unsure = [0.95 - 0.001 * i for i in range(n)], [0.3] * n
    budget.offer("unsure", unsure)
    price = budget.offer("sure", sure)
    assert price == pytest.approx(sure[-1])  # every slot to the chain whose requests are likelier needed
    assert sum(r >= price for r in unsure) == 0
    budget.leave("sure")  # it left the engine: its slots go to the other
    assert budget.price() == pytest.approx(max(0.3 if n else 0, worth(Load(**CPU, chains=4), 4 + n)))


def test_the_price_follows_the_load():
    """The price is kept between offers, but not across a change of load."""
    load = [Load(**CPU, chains=2)]
    budget = SharedBudget(lambda: load[0])
    budget.offer("a", [0.9 ** i for i in range(30)])
    before = budget.price()
    load[0] = Load(**CPU, chains=40)  # the engine filled up: fewer slots, each dearer
    assert budget.price() > before and budget.price() == clearing_price(load[0], [0.9 ** i for i in range(30)])


def test_at_saturation_no_slot_is_left_for_speculation():
    """So many chains that the engine is best with one request each: the price is out of reach."""
    load = Load(a=1.0, b=0.3, p=8.0, turnover=0.05, chains=64)
    assert load.slot == pytest.approx(0.7) and best_width(load) < 1 and slots(load) == 0
    assert clearing_price(load, [1.0] * 10) == float("inf")
    assert clearing_price(Load(a=1.0, b=0.0), [1e-3]) == 0.0  # a free batch: every request is worth it


# -- learned move rates ----------------------------------------------------------------------------


def test_move_rates_start_at_the_prior_and_follow_the_walks():
    pooled = MoveRates()
    chain = MoveRates(pooled)
    assert chain.rate(0.5, 0.4) == pytest.approx(0.4) and chain.rate(0.5, 0.0) == FLOOR
    v = chain.version
    for i in range(100):
        chain.observe(0.55, moved=i % 10 == 0)  # one in ten moved the state
    assert chain.version > v and pooled.version > v  # what a chain walks, the engine's rates learn
    assert pooled.rate(0.55, 0.4) == pytest.approx((PRIOR_WEIGHT * 0.4 + 10) / (PRIOR_WEIGHT + 100))
    assert chain.rate(0.55, 0.4) == pytest.approx(0.1, abs=0.02)
    assert chain.rate(0.05, 0.4) == pytest.approx(0.4)  # another part of the block: still the prior
    other = MoveRates(pooled)  # a chain that walked nothing yet leans on the engine's
    assert other.rate(0.55, 0.4) == pytest.approx(pooled.rate(0.55, 0.4))


def test_the_speculation_tree_branches_with_the_learned_rates():
    from presto_tui.runtime.core.classifier import DEFAULT_CLASSIFIER
    from presto_tui.runtime.core.types import SeqState
    from presto_tui.runtime.prefetch.stream.block import StreamBlock
    from presto_tui.runtime.prefetch.stream.policy import FillPolicy
    from presto_tui.runtime.samplers.families import sampler_family

    params = SamplerParams(max_new_tokens=16, steps=4, prefetch="stream")
    state = SeqState.tokens_only((1, 2), tuple(range(3, 19)))
    moves = MoveRates()
    blk = StreamBlock(params, sampler_family(params), DEFAULT_CLASSIFIER, 0, state, FillPolicy(4), moves=moves)
    cut = blk.decisions.cut(1, state)
    before = blk.tree.h_pred(1, cut)
    for _ in range(200):
        moves.observe(cut / 16, moved=False)
    assert blk.tree.h_pred(1, cut) < before / 10  # the cache followed the rates


# -- the shared policy on the engine loop ----------------------------------------------------------


def primed(a: float, b: float, p: float) -> StepCost:
    """A step cost that already knows the engine (the policies price with it from the first step), a
    request living about 20 steps."""
    cost = StepCost()
    for i in range(400):
        n, s = 10 + i % 20, i % 3
        cost.record(n, a + b * n + p * s, s)
    assert cost.turnover == pytest.approx(0.05, rel=0.05)
    return cost


def run_loaded(policy: str, chains: int, cost: StepCost | None = None, slope=0.2, prefill=16.0):
    engine = SyntheticEngine(SyntheticLM(), slope=slope, prefill=prefill)
    params = SamplerParams(max_new_tokens=32, steps=8, prefetch="stream", budget=64, budget_policy=policy)
    loop = EngineLoop(engine, cost)
    prompts = [f"the cat {i}" for i in range(chains)]
    sums = [SessionSummary() for _ in prompts]
    drivers = [make_driver(engine, params.with_(seed=i), engine.encode_prompt(q), prompt=q)
               for i, q in enumerate(prompts)]
    for i, ev in run_chains(engine, drivers, concurrency=chains, loop=loop):
        sums[i].update(ev)
    return sums, loop


def test_at_saturation_the_shared_policy_issues_only_what_the_walk_uses():
    """24 chains on an engine whose request costs a fifth of a step and whose starts cost 16 more: one
    request a chain is the engine's best, so every request the shared policy issues is used (the
    sequential chains batched); the cost policy, pricing only its own chain's path, speculates and
    throws work away.  Both end where the sequential sampler does."""
    unit = 0.01 * 0.2
    sums, _ = run_loaded("shared", 24, primed(0.01 - unit, unit, 16 * unit))
    assert all(s.requests_aborted == 0 and s.wasted_share == 0.0 for s in sums)
    cost_sums, _ = run_loaded("cost", 24, primed(0.01 - unit, unit, 16 * unit))
    assert sum(s.requests_aborted for s in cost_sums) > 0
    seq = SamplerParams(max_new_tokens=32, steps=8, prefetch="none")
    engine = SyntheticEngine(SyntheticLM())
    for i, s in enumerate(sums):
        q = f"the cat {i}"
        (ref,) = [SessionSummary()]
        for _, ev in run_chains(engine, [make_driver(engine, seq.with_(seed=i), engine.encode_prompt(q), prompt=q)]):
            ref.update(ev)
        assert s.tokens == ref.tokens == cost_sums[i].tokens


def test_alone_the_shared_policy_speculates():
    """On an idle engine (one chain, a CPU's cost) it keeps many requests live."""
    sums, loop = run_loaded("shared", 1, slope=0.05, prefill=0.0)
    assert sums[0].mean_live > 4 and loop.budget.price() < 0.1


def test_a_chain_that_leaves_the_engine_takes_its_offer_with_it():
    sums, loop = run_loaded("shared", 3, slope=0.05, prefill=0.0)
    assert all(s.status == "done" for s in sums)
    assert loop.budget._offers == {}


def test_a_prompts_file_runs_as_many_shared_chains_at_once_as_cost_ones():
    """`run --prompts-file` keeps about 64 requests live: a chain under the shared or the cost policy
    counts as the 8 it typically keeps (not its cap of 64), N live under fill:N, one sequentially."""
    from presto_tui.runtime.session.loop import default_concurrency

    stream = SamplerParams(prefetch="stream")
    assert default_concurrency(20, stream) == default_concurrency(20, stream.with_(budget_policy="cost")) == 8
    assert default_concurrency(20, stream.with_(budget=16, budget_policy="fill")) == 4
    assert default_concurrency(20, SamplerParams(prefetch="none")) == 20
