"""The dependency limit (limit.py): checked by brute force, and achieved by an oracle on the synthetic
engine, whose clock is exact.

On an engine where a batch costs what one request costs, an oracle that knows the trajectory starts
each used proposal the moment its prefix exists.  Every position of a state then exists one step after
the position before it (an extension or an accepted proposal decodes one token a step from a start no
later than its cut), so the last decision is taken after exactly n decode steps: the answer's own
length.  The brute force below does not assume that; it simulates step by step.
"""

from __future__ import annotations

import random

import pytest
from helpers import small_backend

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import decision_inputs, extension_seed
from presto_tui.runtime.core.types import Request
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.session.events import RoundDone
from presto_tui.runtime.session.limit import BlockPath, dependency_steps, useful_tokens
from presto_tui.runtime.session.runner import run_session
from presto_tui.runtime.session.summary import summarize


def brute_force(blocks: list[BlockPath]) -> int:
    """Step the clock one decode step at a time: a request starts at the first step at which every
    token of its prefix exists, then makes one token a step; decisions are taken in order."""
    # per position: (request, its offset in the request); None: a token of the given start state
    source: list[tuple[int, int] | None] = [None] * (blocks[0].L if blocks else 0)
    started: dict[int, int] = {}  # request -> step it started
    reqs: list[tuple[int, int, list[tuple[int, int]]]] = []  # (cut, length, prefix sources)
    order: list[tuple[int, bool]] = []  # (request, is a decision)
    for b in blocks:
        r = len(reqs)
        reqs.append((b.L, b.T - b.L, list(source)))  # the extension needs the whole state before it
        order.append((r, False))
        source = source[: b.L] + [(r, i) for i in range(b.T - b.L)]
        for cut, accepted in b.walk:
            r = len(reqs)
            reqs.append((cut, b.T - cut, source[:cut]))
            order.append((r, True))
            if accepted:
                source = source[:cut] + [(r, i) for i in range(b.T - cut)]

    def made(src: tuple[int, int] | None, step: int) -> bool:  # the token exists after `step`
        if src is None:
            return True
        req, offset = src
        return req in started and step >= started[req] + offset + 1

    step, taken = 0, 0
    while len(started) < len(reqs) or any(step < started[r] + reqs[r][1] for r, _ in order):
        for r, (_, _, prefix) in enumerate(reqs):
            if r not in started and all(made(src, step) for src in prefix):
                started[r] = step
        step += 1
    for r, decision in order:
        if decision:
            taken = max(taken, started[r] + reqs[r][1])
    return taken


def random_path(rng: random.Random, given: int = 0) -> list[BlockPath]:
    """Random blocks; `given` > 0: the chain starts from a given state of that many tokens (no
    extension: a first block with L = T, as a summary records it)."""
    blocks, L = [], given
    B = rng.randint(1, 6)
    if given:
        blocks.append(BlockPath(given, given, [(rng.randrange(given), rng.random() < 0.4)
                                               for _ in range(rng.randint(1, 6))]))
    for _ in range(rng.randint(0 if given else 1, 3)):
        T = L + B
        walk = [(rng.randrange(T), rng.random() < 0.4) for _ in range(rng.randint(1, 6))]
        blocks.append(BlockPath(L, T, walk))
        L = T
    return blocks


@pytest.mark.parametrize("seed", range(200))
def test_the_formula_is_the_brute_force(seed):
    blocks = random_path(random.Random(seed))
    assert dependency_steps(blocks) == brute_force(blocks) == blocks[-1].T


@pytest.mark.parametrize("seed", range(100))
def test_the_formula_is_the_brute_force_from_a_given_state(seed):
    """A chain started from given tokens: they exist at step 0, so the limit can fall short of T."""
    rng = random.Random(seed)
    blocks = random_path(rng, given=rng.randint(1, 6))
    assert dependency_steps(blocks) == brute_force(blocks)


def test_a_given_state_limit_by_hand():
    assert dependency_steps([BlockPath(10, 10, [(3, True), (5, False)])]) == 7  # 7 tokens after cut 3
    assert dependency_steps([BlockPath(10, 10, [(3, False)]), BlockPath(10, 20, [(15, False)])]) == 10


def test_useful_tokens_count_extensions_and_every_walked_proposal():
    blocks = [BlockPath(0, 4, [(1, True), (3, False)]), BlockPath(4, 8, [(0, False)])]
    assert useful_tokens(blocks) == 4 + 3 + 1 + 4 + 8
    multitry = [BlockPath(0, 4, [(1, True), (3, False)], draws=3)]  # every candidate is decoded
    assert useful_tokens(multitry) == 4 + 3 * (3 + 1)


@pytest.mark.parametrize("seed", range(4))
def test_an_oracle_on_the_synthetic_engine_achieves_the_limit(seed):
    """Record sequential PowerMH's trajectory, then let an oracle replay it on a synthetic engine whose
    batch costs one request's step: it reaches the last decision after exactly the limit's steps,
    with the same proposals."""
    params = SamplerParams(prefetch="none", max_new_tokens=12, block_size=6, steps=5, seed=seed)
    events = list(run_session(small_backend(), params, [1, 2]))
    s = summarize(events)
    trees = [e.tree for e in events if isinstance(e, RoundDone)]
    limit = dependency_steps(s.path)

    engine = SyntheticEngine(small_backend().lm, step_s=1.0, slope=0.0)  # a batch costs one request
    tau = params.proposal_tau
    # every request the chain used, with the state it is cut from and where each of its tokens goes
    plan: list[tuple[Request, list[int]]] = []  # (request, the requests its prefix positions come from)
    owner: list[int] = []  # per position of the current state: the request that made it
    k = 0
    for b, block in enumerate(s.path):
        prefix = tuple(trees[k].root.tokens[: block.L]) if k < len(trees) else ()
        ext = Request((1, 2) + prefix, block.T - block.L, extension_seed(seed, b), tau)
        plan.append((ext, list(owner)))
        owner = owner[: block.L] + [len(plan) - 1] * (block.T - block.L)
        for i, (cut, accepted) in enumerate(block.walk):
            state = trees[k + i].root if i == 0 else trees[k + i - 1].final_state
            req = Request((1, 2) + tuple(state.tokens[:cut]), block.T - cut, decision_inputs(seed, b, i).seed, tau)
            plan.append((req, owner[:cut]))
            if accepted:
                owner = owner[:cut] + [len(plan) - 1] * (block.T - cut)
        k += len(block.walk)
    handles: dict[int, int] = {}
    done: dict[int, tuple[int, ...]] = {}
    while len(done) < len(plan):
        for r, (req, needs) in enumerate(plan):
            # position `pos` of the prefix exists once the request that makes it has decoded it
            ready = all(q in done or (q in handles and len(engine.partial(handles[q])) >= pos - first(plan, q) + 1)
                        for pos, q in enumerate(needs))
            if r not in handles and ready:
                handles[r] = engine.submit(req)
        for h, prop in engine.step():
            done[next(r for r, hh in handles.items() if hh == h)] = prop.tokens
    assert engine.clock() == pytest.approx(limit) and limit == s.path[-1].T
    # the oracle decoded exactly the chain's own proposals
    chain = [t.requests[0].proposal.tokens for t in trees]
    assert len(chain) == 10 and all(c in done.values() for c in chain)


def first(plan, q: int) -> int:
    """The generated position of request q's first token."""
    return len(plan[q][0].prefix) - 2


# -- the engine's step cost, learned online (cost.py) -----------------------------------------------

def test_step_cost_recovers_the_line_and_the_best_throughput():
    from presto_tui.runtime.session.cost import PRIOR_SLOPE, StepCost

    cost = StepCost()
    assert cost.estimate() is None and cost.line() == (1.0, PRIOR_SLOPE)
    cost.record(4, 0.012)  # one batch size seen: the prior slope through that point
    a, b = cost.line()
    assert b == pytest.approx(PRIOR_SLOPE * a) and a + 4 * b == pytest.approx(0.012)
    rng = random.Random(0)
    for _ in range(400):  # a + b n with a = 10 ms, b = 0.5 ms, and a little noise
        n = rng.choice([1, 2, 4, 8, 16])
        cost.record(n, (0.010 + 0.0005 * n) * rng.uniform(0.99, 1.01))
    a, b = cost.line()
    assert a == pytest.approx(0.010, rel=0.02) and b == pytest.approx(0.0005, rel=0.05)
    est = cost.estimate()
    assert est.best_n == 16 and est.best_rate == pytest.approx(16 / 0.018, rel=0.02)
    cost.record(0, 1.0)  # no live request, or no time: not a step
    cost.record(3, 0.0)
    assert cost.steps == 401


def test_step_cost_follows_a_machine_that_slows_down():
    """Old steps fade: after the machine becomes twice as slow, the fit follows within a few hundred steps."""
    from presto_tui.runtime.session.cost import StepCost

    cost = StepCost()
    for scale in (1.0, 2.0):
        for i in range(600):
            n = (1, 4, 16)[i % 3]
            cost.record(n, scale * (0.010 + 0.001 * n))
    a, b = cost.line()
    assert a == pytest.approx(0.020, rel=0.01) and b == pytest.approx(0.002, rel=0.01)
