"""PreSTO with decision-keyed inputs reproduces sequential PowerMH exactly (paper prop. 1).

The project's strongest correctness test (docs/randomness.md): same seed, same
start, every traversal rule and budget, one-block and multi-block schedules;
the state after every transition must be identical, token for token.
"""

from __future__ import annotations

import math

import pytest
from helpers import noisy_backend, small_backend, trajectory

from presto_tui.runtime.core.mh import score
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.prefetch.tree import ROOT
from presto_tui.runtime.session.events import BlockStart, RoundDone

SCHEDULES = {
    "one-block": dict(max_new_tokens=16, steps=30),
    "multi-block": dict(max_new_tokens=18, block_size=6, steps=12),
}
RULES = ("bfs", "predictive", "spine")
BUDGETS = (1, 2, 8, 20, 64)
SEEDS = (0, 1, 2)

# A 4-token model with sharp logits at tau = 1/alpha proposes the old tokens
# again often, so the spine's content check (beyond Condition 1) gets exercised.
BACKENDS = {"v4-sharp": dict(vocab=4, sharpness=2.5), "v7": dict(vocab=7, sharpness=1.2)}

_reference_cache: dict = {}


def reference(backend_name, schedule, seed, sampler="powermh"):
    key = (backend_name, schedule, seed, sampler)
    if key not in _reference_cache:
        params = SamplerParams(sampler=sampler, prefetch="none", seed=seed, **SCHEDULES[schedule])
        _reference_cache[key] = trajectory(small_backend(**BACKENDS[backend_name]), params)
    return _reference_cache[key]


@pytest.mark.parametrize("backend_name", sorted(BACKENDS))
@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("budget", BUDGETS)
def test_presto_reproduces_sequential_trajectory(backend_name, schedule, rule, budget):
    for seed in SEEDS:
        expected, seq_trees = reference(backend_name, schedule, seed)
        params = SamplerParams(prefetch=rule, budget=budget, seed=seed, **SCHEDULES[schedule])
        got, trees = trajectory(small_backend(**BACKENDS[backend_name]), params)
        assert len(got) == len(expected)
        for i, (a, b) in enumerate(zip(got, expected)):
            assert a == b, f"seed {seed}: state after transition/extension #{i} differs"
        # Not vacuous: with a budget > 1 rounds do realize several transitions.
        if budget > 1:
            assert len(trees) < len(seq_trees)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("budget", (1, 8, 20))
def test_presto_entropycut_reproduces_sequential_entropycut(schedule, rule, budget):
    """PreSTO-EntropyCut draws cuts from the root's law and re-checks them against each node's
    own law; a mismatch defers the decision with its uniform kept, so the coupling holds."""
    deferred_by_law = 0
    for seed in SEEDS:
        expected, _ = reference("v7", schedule, seed, sampler="entropycut")
        params = SamplerParams(sampler="entropycut", prefetch=rule, budget=budget, seed=seed,
                               **SCHEDULES[schedule])
        got, trees = trajectory(small_backend(**BACKENDS["v7"]), params)
        assert got == expected
        for t in trees:
            stop = t.node(t.stop_node)
            if stop is not None and stop.status == "deferred" and stop.decision.cut <= t.cut_index(stop.src):
                deferred_by_law += 1  # Condition 1 held: only the node's own cut law differed
    if budget > 1:
        assert deferred_by_law > 0


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("budget", (4, 8, 20, 64))
def test_presto_multitry_reproduces_sequential_multitry(schedule, rule, budget):
    """PreSTO-MultiTryMH prefetches whole decisions (all 4 candidates) across transitions."""
    for seed in SEEDS:
        expected, seq_trees = reference("v7", schedule, seed, sampler="multitry")
        params = SamplerParams(sampler="multitry", prefetch=rule, budget=budget, seed=seed,
                               **SCHEDULES[schedule])
        got, trees = trajectory(small_backend(**BACKENDS["v7"]), params)
        assert got == expected
        assert all(len(t.requests) <= budget for t in trees)
        if budget >= 8:
            assert len(trees) < len(seq_trees)


def test_budget_one_is_one_transition_per_call():
    params = SamplerParams(prefetch="spine", budget=1, **SCHEDULES["one-block"])
    _, trees = trajectory(small_backend(), params)
    assert all(t.transitions == 1 and len(t.requests) == 1 for t in trees)


def _rounds_with_two_accepts():
    found = []
    for seed in range(6):
        for rule in RULES:
            params = SamplerParams(prefetch=rule, budget=20, seed=seed, **SCHEDULES["one-block"])
            _, trees = trajectory(small_backend(**BACKENDS["v4-sharp"]), params)
            found += [t for t in trees if sum(s.accepted for s in t.steps) >= 2]
    return found


def test_two_accepts_in_one_round_are_scored_against_the_state_they_replace():
    """The second accepted proposal is scored against the first one's state, not the root.

    A reading of the paper's released code scores every proposal against the
    root's suffix; on a path with two accepts that uses the wrong state.
    """
    rounds = _rounds_with_two_accepts()
    assert rounds, "the fixture no longer produces rounds with two accepts"
    differing = 0
    for tree in rounds:
        state = tree.root
        for step in tree.steps:
            dec = tree.decisions[step.decision]
            prop = tree.requests[dec.request].proposal
            # the walk's recorded state is the chain's actual state
            assert tree.state_of(step.src).tokens == state.tokens
            expected = score(state, dec.cut, prop, 4.0, 0.01)
            assert tree.scores[(step.decision, step.src)] == expected
            against_root = score(tree.root, dec.cut, prop, 4.0, 0.01)
            if step.src != ROOT and not math.isclose(against_root.log_ratio, expected.log_ratio):
                differing += 1
            if step.accepted:
                state = state.with_suffix(dec.cut, prop)
        assert state.tokens == tree.final_state.tokens
    # The fixture must contain cases where scoring against the root would be wrong.
    assert differing > 0


@pytest.mark.parametrize("sampler", ["powermh", "entropycut", "multitry"])
@pytest.mark.parametrize("budget", (8, 20))
def test_spine_keeps_the_records_the_sequential_chain_holds(sampler, budget):
    """Records of the same tokens differ between calls on a real engine (float noise).

    When an accepted proposal reproduced the old tokens past a later decision's
    cut, the spine's content check lets that decision use its prefetched
    proposal; the new state must then keep the accepted proposal's records
    before the cut (as sequential PowerMH does), not the round root's.  With
    request-dependent record noise, taking them from the root changes decisions.
    """
    content_passes = 0
    for seed in range(12):
        params = SamplerParams(sampler=sampler, prefetch="none", seed=seed, **SCHEDULES["one-block"])
        expected, _ = trajectory(noisy_backend(), params)
        got, trees = trajectory(noisy_backend(), params.with_(prefetch="spine", budget=budget))
        assert got == expected
        for t in trees:
            cut_index = t.T
            for s in t.steps:
                dec = t.decisions[s.decision]
                content_passes += dec.cut > cut_index
                if s.accepted:
                    cut_index = dec.cut
    assert content_passes > 0  # the content check (not Condition 1) was exercised


def test_multitry_selection_on_a_boundary_moves_to_the_candidate_it_scores(monkeypatch):
    """MultiTryMH draws J once, from the candidates alone; the walk moves to candidate J and
    accepts with J's probability, even for a selection uniform within rounding of a boundary
    of the cumulative selection probabilities (where two computations of J could differ)."""
    import oracle

    from presto_tui.runtime.core.randomness import decision_inputs
    from presto_tui.runtime.methods import multitry as families
    from presto_tui.runtime.prefetch.kernel import ChainState, build_kernel
    from presto_tui.runtime.samplers.multitry import Candidates, candidates

    b = small_backend(**BACKENDS["v7"])
    params = SamplerParams(sampler="multitry", prefetch="none", budget=4, max_new_tokens=8, steps=6)
    _, trees = trajectory(b, params)
    checked = 0
    for tree in trees:
        chain = ChainState(tree.root, 0, k=tree.k0)
        dec = tree.decisions[0]
        tails = [tree.requests[r].proposal.tokens for r in dec.candidates]
        x = tree.root.tokens
        log_w, probs = oracle.multitry_weights(b.lm, (1, 2), x, dec.cut, tails, params.alpha)
        real = candidates(decision_inputs(params.seed, 0, tree.k0), params.tries)
        for j in range(len(probs) - 1):
            edge = math.fsum(probs[: j + 1])
            above = math.nextafter(edge, 1)
            for u in (edge, math.nextafter(edge, 0), above, math.nextafter(above, 1)):
                monkeypatch.setattr(families, "candidates",
                                    lambda inp, tries, u=u, c=real: Candidates(c.seeds, c.taus, u))
                results = []
                for kernel in (build_kernel(params), build_kernel(params.with_(prefetch="spine"))):
                    nxt, t = kernel.step(b, chain)
                    d = t.decisions[0]
                    sc = t.scores[(0, -1)]
                    J = d.candidates.index(d.request)
                    assert sc.selected == J  # scored the candidate the walk moves to
                    A = oracle.multitry_accept_prob(log_w, J)
                    assert math.isclose(sc.accept_prob, A, rel_tol=1e-9, abs_tol=1e-12)
                    results.append((J, nxt.state.tokens))
                assert results[0] == results[1]  # and PreSTO agrees with the sequential kernel
                checked += 1
    assert checked > 0


STREAM_SAMPLERS = ("powermh", "entropycut", "multitry")


# what the streaming rule speculates, with the block's extension overlapped (the default) and not
OVERLAP = {"overlapped": "proposal,block,extension", "waited for": "proposal,block"}


@pytest.mark.parametrize("sampler", STREAM_SAMPLERS)
@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("budget,extension", [(b, "overlapped") for b in BUDGETS]
                         + [(b, "waited for") for b in (2, 8, 64)])
def test_streaming_reproduces_the_sequential_trajectory(sampler, schedule, budget, extension):
    """The streaming rule computes requests in another order and aborts some; the walker still
    takes exactly the proposals the sequential sampler draws, token for token, whether a block's
    first proposals start while its extension decodes or only once it has arrived."""
    if sampler == "multitry" and budget < 4:
        budget = 4  # a MultiTryMH decision needs its 4 candidates live at once
    backend_name = "v7" if sampler != "powermh" else "v4-sharp"
    for seed in SEEDS:
        expected, seq_trees = reference(backend_name, schedule, seed, sampler=sampler)
        params = SamplerParams(sampler=sampler, prefetch="stream", budget=budget, seed=seed, **SCHEDULES[schedule],
                               speculate=OVERLAP[extension])
        got, epochs = trajectory(small_backend(**BACKENDS[backend_name]), params)
        assert got == expected, f"seed {seed}: streaming left the sequential chain"
        assert sum(t.transitions for t in epochs) == len(seq_trees)


POLICIES = {  # the streaming rule's budget policy and what it speculates (the default: shared, all three)
    "fill-none": dict(budget_policy="fill", speculate="none"),
    "fill-proposal": dict(budget_policy="fill", speculate="proposal"),
    "fill-block": dict(budget_policy="fill", speculate="block"),
    "fill-extension": dict(budget_policy="fill", speculate="extension"),
    "cost-none": dict(budget_policy="cost", speculate="none"),
    "cost-block-extension": dict(budget_policy="cost", speculate="block,extension"),
    "cost-all": dict(budget_policy="cost"),
    "shared-none": dict(budget_policy="shared", speculate="none"),
    "shared-block-extension": dict(budget_policy="shared", speculate="block,extension"),
    "shared-all": dict(budget_policy="shared"),
}


@pytest.mark.parametrize("sampler", STREAM_SAMPLERS)
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("budget", (2, 8, 20))
def test_every_speculation_policy_reproduces_the_sequential_trajectory(sampler, policy, budget):
    budget = max(budget, 4) if sampler == "multitry" else budget
    backend_name = "v7" if sampler != "powermh" else "v4-sharp"
    for seed in SEEDS:
        expected, _ = reference(backend_name, "multi-block", seed, sampler=sampler)
        params = SamplerParams(sampler=sampler, prefetch="stream", budget=budget, seed=seed,
                               **SCHEDULES["multi-block"], **POLICIES[policy])
        got, _ = trajectory(small_backend(**BACKENDS[backend_name]), params)
        assert got == expected, f"seed {seed}: {policy} left the sequential chain"


@pytest.mark.parametrize("speculate,inside", [("proposal,block", True), ("none", False)])
def test_requests_cut_inside_a_proposal_start_before_it_finishes(monkeypatch, speculate, inside):
    """White-box: wants found past a proposal's cut, in tokens it has decoded so far (a node of the
    speculation tree that knows its state only in part) and not the walker's own, get issued; and the
    next block's extension is decoded ahead and used."""
    from presto_tui.runtime.prefetch.stream import requests as book_module
    from presto_tui.runtime.prefetch.stream import speculation
    from presto_tui.runtime.session.events import ModelCall
    from presto_tui.runtime.session.runner import run_session

    found: set = set()
    issued: list = []
    visit, issue = speculation.SpeculationTree._visit, book_module.RequestBook.issued

    def watch_visit(self, priority, node):
        result, children = visit(self, priority, node)
        if result is not None and not node.exact:
            want = result[0]
            if want.prefix != self.walker.state.tokens[: want.cut]:
                found.add(want)
        return result, children

    def watch_issue(self, g, j, handle):
        issued.append(g.want)
        return issue(self, g, j, handle)

    monkeypatch.setattr(speculation.SpeculationTree, "_visit", watch_visit)
    monkeypatch.setattr(book_module.RequestBook, "issued", watch_issue)
    ahead = 0
    for seed in SEEDS:
        params = SamplerParams(prefetch="stream", budget=8, budget_policy="fill", speculate=speculate, seed=seed,
                               **SCHEDULES["multi-block"])
        events = list(run_session(small_backend(**BACKENDS["v7"]), params, [1, 2]))
        ahead += sum(isinstance(e, ModelCall) and e.purpose == "extend-ahead" for e in events)
    assert (sum(w in found for w in issued) > 0) == inside and (ahead > 0) == inside


@pytest.mark.parametrize("sampler", ("powermh", "multitry"))
def test_the_first_proposals_start_while_the_extension_decodes(sampler):
    """White-box, so that the overlap tested above is not vacuous: with the extension overlapped some
    block's proposals are issued before its extension arrives (its call `extend-overlap`, its arrival
    `clock`), and none without; EntropyCut's cuts need the whole state, so it never overlaps."""
    from presto_tui.runtime.session.events import ModelCall, RequestEvent
    from presto_tui.runtime.session.runner import run_session

    def early(speculate: str, sampler: str = sampler) -> int:
        n = 0
        for seed in SEEDS:
            params = SamplerParams(sampler=sampler, prefetch="stream", budget=8, seed=seed, speculate=speculate,
                                   **SCHEDULES["multi-block"])
            events = list(run_session(small_backend(**BACKENDS["v7"]), params, [1, 2]))
            arrived = {e.block: e.clock for e in events if isinstance(e, ModelCall) and e.round == -1}
            overlapped = [e for e in events if isinstance(e, ModelCall) and e.purpose == "extend-overlap"]
            assert not overlapped or "extension" in speculate
            n += sum(e.kind == "issued" and e.purpose == "propose" and e.clock < arrived[e.block]
                     for e in events if isinstance(e, RequestEvent))
        return n

    assert early(OVERLAP["overlapped"]) > 0 and early(OVERLAP["waited for"]) == 0
    assert early(OVERLAP["overlapped"], "entropycut") == 0


def test_streaming_keeps_the_records_the_sequential_chain_holds():
    for seed in range(12):
        params = SamplerParams(prefetch="none", seed=seed, **SCHEDULES["one-block"])
        expected, _ = trajectory(noisy_backend(), params)
        got, _ = trajectory(noisy_backend(), params.with_(prefetch="stream", budget=8))
        assert got == expected


def test_streaming_aborts_what_no_reachable_state_needs_and_spends_less_time():
    """On the synthetic engine's cost model (a step costs more with more live requests),
    streaming finishes the same chain in less engine time than round-based spine."""
    from presto_tui.runtime.session.events import RequestEvent, RoundDone
    from presto_tui.runtime.session.runner import run_session

    def engine_time(rule):
        b = small_backend(**BACKENDS["v7"])
        events = list(run_session(b, SamplerParams(prefetch=rule, budget=8, max_new_tokens=32, steps=24), [1, 2]))
        return b.clock(), events

    t_stream, events = engine_time("stream")
    t_spine, _ = engine_time("spine")
    t_seq, _ = engine_time("none")
    # at N=20 some requests are still decoding when the walk ends (measured: one, on this model)
    b = small_backend(**BACKENDS["v7"])
    events += list(run_session(b, SamplerParams(prefetch="stream", budget=20, max_new_tokens=32, steps=24), [1, 2]))
    kinds = [e.kind for e in events if isinstance(e, RequestEvent)]
    # every request ends finished or aborted, those still decoding when the last block ends too
    assert kinds.count("issued") == kinds.count("finished") + kinds.count("aborted")
    last = [e for e in events if isinstance(e, RequestEvent) and e.kind != "issued"][-1]
    assert events.index(last) < len(events) - 1  # before the session's end
    assert kinds.count("aborted") > 0
    assert t_stream < t_spine < t_seq
    assert sum(isinstance(e, RoundDone) for e in events) > 0


# -- populations: several chains in one session, barriers between them -------------------------------

POPULATIONS = {  # parallel tempering (every scheme, every family) and resample-move, swapping or resampling often
    "ppt-deo-every": dict(sampler="ppt", pt_swap_every=1),
    "ppt-random-3": dict(sampler="ppt", pt_scheme="random", pt_swap_every=3, pt_replicas=3),
    "ppt-entropycut": dict(sampler="ppt", pt_family="entropycut", pt_swap_every=2, pt_alpha_min=2.0),
    "ppt-multitry": dict(sampler="ppt", pt_family="multitry", pt_swap_every=2, pt_replicas=2),
    # the adaptive ladder: its exponents move at the warm-up's barriers (pt_ladder events), then stay
    "ppt-auto": dict(sampler="ppt", pt_ladder="auto", pt_swap_every=1, pt_replicas=4),
    "rm": dict(sampler="resample-move", particles=4, rm_ess=0.9),
}
POPULATION_RULES = {  # the round rules, and the streaming rule under its policies
    "bfs": dict(prefetch="bfs"), "predictive": dict(prefetch="predictive"), "spine": dict(prefetch="spine"),
    **{f"stream-{name}": dict(prefetch="stream", **policy) for name, policy in POLICIES.items()},
    "stream": dict(prefetch="stream"),
}


def population_run(backend, params, prompt=(1, 2)):
    """(each member's states after every extension and transition, the session's events): white-box, the
    members' own events as the population folds them."""
    from presto_tui.runtime.session.loop import make_driver, run_chains

    driver = make_driver(backend, params, list(prompt))
    members: dict[int, list] = {}
    consume = driver._consume

    def record(i, events):
        for ev in events:
            if isinstance(ev, BlockStart):
                members.setdefault(i, []).append(("extend", ev.block, ev.tokens))
            elif isinstance(ev, RoundDone):
                members.setdefault(i, []).extend(s.tokens for s in ev.tree.states_after_steps())
        consume(i, events)

    driver._consume = record
    events = [ev for _, ev in run_chains(backend, [driver])]
    return members, events


def session_records(events):
    """What the session says of itself, but the engine's clock: its method's events, its draws, its answer."""
    from presto_tui.runtime.core import registry
    from presto_tui.runtime.session.events import Choice, SessionEnd, Transition

    out = []
    for ev in events:
        kind = registry.event_type_of(ev)
        if kind is not None:
            out.append({k: v for k, v in kind.encode(ev).items() if k not in ("wall_s", "clock")})
        elif isinstance(ev, (Transition, Choice, SessionEnd)):
            out.append(ev)
    return out


_population_cache: dict = {}


def population_reference(name, schedule, seed):
    key = (name, schedule, seed)
    if key not in _population_cache:
        params = SamplerParams(prefetch="none", seed=seed, **POPULATIONS[name], **SCHEDULES[schedule])
        members, events = population_run(small_backend(**BACKENDS["v7"]), params)
        _population_cache[key] = members, session_records(events)
    return _population_cache[key]


@pytest.mark.parametrize("name", sorted(POPULATIONS))
@pytest.mark.parametrize("rule", sorted(POPULATION_RULES))
@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_presto_reproduces_every_member_of_a_population(name, rule, schedule):
    """Parallel tempering's replicas and resample-move's particles, each under a PreSTO rule, all on one
    loop, paused at barriers where swaps and resampling replace their states: every member's state after
    every extension and transition is the sequential population's, token for token, and so are the
    swaps, weights, resampling and answer the session records."""
    budget = 8 if POPULATIONS[name].get("pt_family") == "multitry" or rule == "spine" else 2
    for seed in SEEDS[:2]:
        expected, records = population_reference(name, schedule, seed)
        params = SamplerParams(seed=seed, budget=budget, **POPULATIONS[name], **POPULATION_RULES[rule],
                               **SCHEDULES[schedule])
        got, events = population_run(small_backend(**BACKENDS["v7"]), params)
        assert sorted(got) == sorted(expected)
        for i in expected:
            assert got[i] == expected[i], f"seed {seed}: member {i + 1} left the sequential population"
        assert session_records(events) == records, f"seed {seed}: the session's records differ"


def test_the_population_coupling_is_not_vacuous():
    """Swaps and resamplings do happen in the configurations above, and replace states of members whose
    PreSTO rule had speculated past the barrier."""
    from presto_tui.runtime.prefetch.stream.block import StreamBlock

    swaps = resamplings = 0
    for seed in SEEDS[:2]:
        for name in POPULATIONS:
            _, records = population_reference(name, "multi-block", seed)
            swaps += sum(sum(r["swapped"]) for r in records if isinstance(r, dict) and "swapped" in r)
            resamplings += sum(r["resampled"] for r in records if isinstance(r, dict) and "resampled" in r)
    assert swaps > 10 and resamplings > 0
    for seed in SEEDS[:2]:  # the adaptive ladder moved, so its members' targets changed mid-chain
        _, records = population_reference("ppt-auto", "multi-block", seed)
        moves = [r for r in records if isinstance(r, dict) and "frozen" in r]
        assert moves and moves[-1]["frozen"] and any(m["exponents"] != m["before"] for m in moves)
    replaced = []
    original = StreamBlock.replace

    def watch(self, state):
        replaced.append(sum(g.want.d >= self.walker.k for g in self.book.groups.values()))  # speculated past it
        return original(self, state)

    StreamBlock.replace = watch
    try:
        for name in ("ppt-deo-every", "rm"):
            params = SamplerParams(seed=0, prefetch="stream", budget=8, **POPULATIONS[name], **SCHEDULES["multi-block"])
            population_run(small_backend(**BACKENDS["v7"]), params)
    finally:
        StreamBlock.replace = original
    assert replaced and max(replaced) > 0
