"""MH steps of the three samplers: sequential (paper alg. 1) and PreSTO rounds (alg. 2), as kernels.

`sequential_step` and `presto_round` take a `ChainState` and return the next
one together with the round's `RoundTree` and the timing of its model call;
the session runner (session.py) loops over them and turns results into events.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from presto_tui.runtime.backend import Backend, Request, SeqState
from presto_tui.runtime.classifier import DEFAULT_CLASSIFIER, CertaintyClassifier
from presto_tui.runtime.cutlaw import CutLaw, make_cut_law
from presto_tui.runtime.mh import accepts, score
from presto_tui.runtime.multitry import candidates, mtm_score, selected_candidate
from presto_tui.runtime.params import MULTITRY_TAUS, SamplerParams
from presto_tui.runtime.randomness import DecisionInputs, decision_inputs, node_inputs
from presto_tui.runtime.traversal import Draws, Plan, plan_bfs, plan_levels, plan_predictive, single_draw
from presto_tui.runtime.tree import (
    DEFERRED, EXPANDED, LEAF, ROOT, UNREACHABLE, DecisionRec, NodeRec, RequestRec, RoundTree, Step,
)


@dataclass(frozen=True)
class ChainState:
    state: SeqState
    block: int  # 0-based
    k: int = 0  # transitions done in this block
    round: int = 0  # rounds done in this block
    carried: DecisionInputs | None = None  # node inputs: the deferred root decision's inputs


@dataclass(frozen=True)
class CallInfo:
    requests: int
    tokens: int
    wall_s: float


def timed_generate(backend: Backend, requests: list[Request]) -> tuple[list, CallInfo]:
    t0 = time.perf_counter()
    proposals = backend.generate(requests)
    wall = time.perf_counter() - t0
    return proposals, CallInfo(len(requests), sum(len(p.tokens) for p in proposals), wall)


def decision_draws(params: SamplerParams) -> Draws:
    """(seed, temperature) of each request a decision makes: MultiTryMH makes one per candidate."""
    if params.sampler != "multitry":
        return single_draw

    def draws(inp: DecisionInputs) -> list[tuple[int, float | None]]:
        c = candidates(inp, params.tries)
        return list(zip(c.seeds, c.taus))

    return draws


def score_taus(params: SamplerParams) -> tuple[float, ...]:
    return MULTITRY_TAUS if params.sampler == "multitry" else ()


def sequential_step(backend: Backend, params: SamplerParams, chain: ChainState
                    ) -> tuple[ChainState, RoundTree, CallInfo]:
    """One transition with one model call (alg. 1, lines 4-7; MultiTryMH: M candidates in it).

    Written independently of the PreSTO code on purpose: it is the reference
    the coupling test holds PreSTO to.
    """
    x = chain.state
    law = make_cut_law(params.sampler, params.beta, params.cut_mix)
    inp = decision_inputs(params.seed, chain.block, chain.k)
    cut = law.cut(inp.cut_u, x)
    draws = decision_draws(params)(inp)
    props, call = timed_generate(backend, [
        Request(x.prefix(cut), x.T - cut, seed, tau or params.proposal_tau, score_taus(params))
        for seed, tau in draws])
    if params.sampler == "multitry":
        cands = candidates(inp, params.tries)
        J = selected_candidate(props, cands, params.alpha)
        sc = mtm_score(x, cut, props, cands, params.alpha, params.epsilon, J)
    else:
        sc = score(x, cut, props[0], params.alpha, params.epsilon, law)
    accepted = accepts(inp.accept_u, sc)
    plan = Plan()
    plan.add_decision(index=chain.k, depth=0, cut=cut, inputs=inp, issue=True, node=0,
                      draws=decision_draws(params))
    selected = max(sc.selected, 0)
    decision = replace(plan.decisions[0], request=selected)
    tree = RoundTree(
        rule="none", inputs="decision", T=x.T, k0=chain.k, depth_cap=params.steps - chain.k,
        root=x, decisions=(decision,),
        requests=tuple(RequestRec(0, cut, seed, p, tau or params.proposal_tau)
                       for (seed, tau), p in zip(draws, props)),
        scores={(0, ROOT): sc}, levels=False,
        table={0: NodeRec(0, EXPANDED, ROOT, 0), 1: NodeRec(1, LEAF, selected, None),
               2: NodeRec(1, LEAF, ROOT, None)},
        steps=(Step(0, 0, ROOT, accepted),), stop_node=1 if accepted else 2,
        stop_reason="cap" if chain.k + 1 >= params.steps else LEAF,
    )
    nxt = replace(chain, state=tree.final_state, k=chain.k + 1, round=chain.round + 1)
    return nxt, tree, call


Kernel = Callable[[Backend, SamplerParams, ChainState], tuple[ChainState, RoundTree, CallInfo]]


def make_kernel(params: SamplerParams, classifier: CertaintyClassifier | None = None) -> Kernel:
    """The kernel `--prefetch` selects: sequential PowerMH or a PreSTO round."""
    if params.prefetch == "none":
        return sequential_step
    clf = classifier or DEFAULT_CLASSIFIER
    return lambda backend, p, chain: presto_round(backend, p, chain, clf)


def run_block(backend: Backend, params: SamplerParams, chain: ChainState, kernel: Kernel
              ) -> Iterator[tuple[ChainState, RoundTree, CallInfo]]:
    """The K transitions of one block from `chain` (alg. 1 lines 3-7, alg. 2 lines 4-7)."""
    while chain.k < params.steps:
        chain, tree, call = kernel(backend, params, chain)
        yield chain, tree, call


def presto_round(backend: Backend, params: SamplerParams, chain: ChainState,
                 classifier: CertaintyClassifier = DEFAULT_CLASSIFIER
                 ) -> tuple[ChainState, RoundTree, CallInfo]:
    """One PreSTO round: plan, one batched call, score, walk (alg. 2, lines 5-7)."""
    t_plan = time.perf_counter()
    root = chain.state
    T, k0 = root.T, chain.k
    depth_cap = params.steps - k0
    law = make_cut_law(params.sampler, params.beta, params.cut_mix)

    def cut_of(inp: DecisionInputs) -> int:
        # A state-dependent law (EntropyCut) is read off the root, the only state known
        # before the call; nodes holding another state re-check their cut when scored.
        return law.cut(inp.cut_u, root)

    common = dict(T=T, k0=k0, depth_cap=depth_cap, budget=params.budget, cut_of=cut_of,
                  draws=decision_draws(params), cost=params.requests_per_decision)
    if params.inputs == "decision":
        plan = plan_levels(inputs_at=lambda d: decision_inputs(params.seed, chain.block, d),
                           classifier=classifier if params.prefetch == "predictive" else None,
                           quirk=params.prefetch == "bfs", **common)
    else:
        def inputs_at(node: int) -> DecisionInputs:
            if node == 0 and chain.carried is not None:
                return chain.carried
            return node_inputs(params.seed, chain.block, chain.round, node)

        if params.prefetch == "bfs":
            plan = plan_bfs(inputs_at=inputs_at, **common)
        else:
            plan = plan_predictive(inputs_at=inputs_at, classifier=classifier, **common)

    t_plan = time.perf_counter() - t_plan
    taus = [tau or params.proposal_tau for _, _, tau in plan.requests]
    reqs = [Request(root.prefix(plan.decisions[p].cut), T - plan.decisions[p].cut, seed, tau, score_taus(params))
            for (p, seed, _), tau in zip(plan.requests, taus)]
    proposals, call = timed_generate(backend, reqs)
    requests = tuple(RequestRec(p, plan.decisions[p].cut, seed, prop, tau)
                     for (p, seed, _), prop, tau in zip(plan.requests, proposals, taus))
    decisions = tuple(_with_selection(d, requests, params) for d in plan.decisions)
    # MultiTryMH: an accept child holds the selected candidate, known only now
    remap = {a.request: b.request for a, b in zip(plan.decisions, decisions) if a.request != b.request}
    table = {v: replace(rec, src=remap.get(rec.src, rec.src)) for v, rec in plan.table.items()}
    tree = RoundTree(
        rule=params.prefetch, inputs=params.inputs, T=T, k0=k0, depth_cap=depth_cap, root=root,
        decisions=decisions, requests=requests, scores={}, levels=plan.levels, table=table,
        quirk=plan.quirk,
    )
    t0 = time.perf_counter()
    if plan.levels:
        score_levels(tree, params, law, content_valid=params.prefetch == "spine")
    else:
        score_table(tree, params, law)
    t1 = time.perf_counter()

    def rescore(pos: int, state: SeqState):
        dec = tree.decisions[pos]
        return decision_score(tree, pos, state, params, law) if _cut_holds(law, dec, state) else None

    walk(tree, rescore)
    tree.phase_s = {"plan": t_plan, "score": t1 - t0, "walk": time.perf_counter() - t1}
    carried = None
    if tree.stop_reason == DEFERRED and not tree.levels:
        dec = tree.decisions[tree.table[tree.stop_node].decision]
        carried = DecisionInputs(dec.cut_u, dec.seed, dec.accept_u)
    nxt = ChainState(tree.final_state, chain.block, k0 + tree.transitions, chain.round + 1, carried)
    return nxt, tree, call


def _with_selection(dec: DecisionRec, requests, params: SamplerParams) -> DecisionRec:
    """MultiTryMH: the decision's proposal is the selected candidate (independent of the state)."""
    if not dec.candidates:
        return dec
    props = [requests[r].proposal for r in dec.candidates]
    J = selected_candidate(props, _candidates_of(dec, params), params.alpha)
    return replace(dec, request=dec.candidates[J])


def _candidates_of(dec: DecisionRec, params: SamplerParams):
    return candidates(DecisionInputs(dec.cut_u, dec.seed, dec.accept_u), params.tries)


def decision_score(tree: RoundTree, pos: int, state: SeqState, params: SamplerParams, law: CutLaw):
    dec = tree.decisions[pos]
    if dec.candidates:
        props = [tree.requests[r].proposal for r in dec.candidates]
        J = dec.candidates.index(dec.request)  # chosen once, in _with_selection
        return mtm_score(state, dec.cut, props, _candidates_of(dec, params), params.alpha, params.epsilon, J)
    return score(state, dec.cut, tree.requests[dec.request].proposal, params.alpha, params.epsilon, law)


def _cut_holds(law: CutLaw, dec, state: SeqState) -> bool:
    """A prefetched cut drawn from the root's law is this state's cut too."""
    return not law.state_dependent or law.cut(dec.cut_u, state) == dec.cut


def score_levels(tree: RoundTree, params: SamplerParams, law: CutLaw, content_valid: bool) -> None:
    """Decision inputs: score level j's proposal against every state that may use it.

    The states reachable at depth j are the root and the proposal of each
    earlier level (the last one accepted).  Cut rules (bfs, predictive) use a
    request iff Condition 1 holds, cut_j <= the state's cut index; the spine
    rule iff the state agrees with the root on positions < cut_j, the prefix
    the request was generated from (DESIGN.md sec 4).  Either way the proposal
    is the one sequential PowerMH would draw from that state, and it is scored
    against that state, never against the root's suffix.  With EntropyCut the
    state's own cut law must also give the prefetched cut; otherwise the
    decision is deferred and keeps its uniform for the next round.
    """
    root = tree.root
    earlier: list[int] = [ROOT]  # state sources reachable at depth j: the root, earlier proposals
    for j, dec in enumerate(tree.decisions):
        for src in tuple(earlier):
            state = tree.state_of(src)
            if content_valid:
                ok = src == ROOT or state.agrees_before(root, dec.cut)
            else:
                ok = dec.cut <= tree.cut_index(src)
            if ok and _cut_holds(law, dec, state):
                tree.scores[(j, src)] = decision_score(tree, j, state, params, law)
        earlier.append(dec.request)


def score_table(tree: RoundTree, params: SamplerParams, law: CutLaw) -> None:
    """Node inputs: score each issued node's proposal against the state it holds.

    A node whose own cut law gives another cut than the prefetched one
    (EntropyCut below an accept) becomes deferred, and what lies below it
    unreachable.
    """
    for v in sorted(tree.table):  # parents before children
        rec = tree.table[v]
        if rec.status not in (EXPANDED, UNREACHABLE):
            continue
        parent = tree.table.get((v - 1) // 2) if v else None
        if rec.status == EXPANDED and parent is not None and parent.status != EXPANDED:
            tree.table[v] = rec = NodeRec(rec.depth, UNREACHABLE, rec.src, rec.decision)
        dec = tree.decisions[rec.decision]
        state = tree.state_of(rec.src)
        if not _cut_holds(law, dec, state):
            tree.table[v] = NodeRec(rec.depth, DEFERRED, rec.src, rec.decision)
            continue
        tree.scores[(rec.decision, rec.src)] = decision_score(tree, rec.decision, state, params, law)


def walk(tree: RoundTree, rescore: Callable[[int, SeqState], object] | None = None) -> None:
    """Follow the realized accept/reject path with the unchanged MH rule (sec 3.2, step 3).

    Stops at a leaf, at a deferred decision, or after the transitions left in
    the block (the depth cap).  The walk builds the chain's exact states as the
    sequential sampler would: accepting proposal y at cut c from state x gives
    x[:c] + y, keeping x's own per-token records before c.  A node's tree state
    `state_of(src)` takes those records from the round's root instead; the two
    hold the same tokens (Condition 1 or the spine's content check) but, on a
    real engine, records of the same token computed in different calls differ
    by float noise.  Where they differ, `rescore(pos, exact_state)` scores the
    decision against the exact state (None: its cut law gives another cut
    there, so the decision is deferred).
    """
    steps: list[Step] = []
    states: list[SeqState] = []
    state = tree.root
    node = 0
    while True:
        if len(steps) >= tree.depth_cap:
            tree.stop_reason = "cap"
            break
        view = tree.node(node)
        if view.status != EXPANDED:
            tree.stop_reason = view.status
            break
        sc = view.score
        if rescore is not None and state != tree.state_of(view.src):
            sc = rescore(view.pos, state)
            if sc is None:
                tree.stop_reason = DEFERRED
                break
            tree.scores[(view.pos, view.src)] = sc  # the path shows what the chain used
        accepted = accepts(view.decision.accept_u, sc)
        steps.append(Step(node, view.pos, view.src, accepted))
        if accepted:
            dec = view.decision
            state = state.with_suffix(dec.cut, tree.requests[dec.request].proposal)
        states.append(state)
        node = 2 * node + (1 if accepted else 2)
    tree.steps = tuple(steps)
    tree.walked = tuple(states)
    tree.stop_node = node
