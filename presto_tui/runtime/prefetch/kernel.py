"""MH kernels: sequential (paper alg. 1) and PreSTO rounds (alg. 2), built once from the parameters.

A kernel is built by `build_kernel(params, classifier)` from a sampler family
and a traversal rule (both objects, chosen once) and advances a `ChainState`:

    pending = kernel.plan(chain)                 # the requests this step needs
    chain, tree = kernel.finish(pending, proposals)
    # or, in one call:  chain, tree = kernel.step(engine, chain)

`tree` is the frozen record of what happened (the round's `RoundTree`, whose
walk holds the realized transitions).  Kernels neither time nor log: the
session runner does, around `plan`, the engine call and `finish`.  Splitting a
step at its model call lets one engine loop serve many chains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from presto_tui.runtime.core.classifier import DEFAULT_CLASSIFIER, CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.mh import Score, accepts
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import DecisionInputs, decision_inputs, node_inputs
from presto_tui.runtime.core.types import Proposal, Request, SeqState
from presto_tui.runtime.prefetch.rules import Plan, traversal_rule
from presto_tui.runtime.prefetch.tree import (
    ROOT,
    LevelTree,
    NodeRec,
    NodeStatus,
    Path,
    RequestRec,
    RoundTree,
    Step,
    TableTree,
)
from presto_tui.runtime.samplers.families import SamplerFamily, sampler_family


@dataclass(frozen=True)
class ChainState:
    state: SeqState
    block: int  # 0-based
    k: int = 0  # transitions done in this block
    round: int = 0  # rounds done in this block
    carried: DecisionInputs | None = None  # node inputs: the deferred root decision's inputs
    # a barrier (runtime/session/population.py): no round walks past this many transitions of the block
    # (None: the block's K); the chain's law is the sequential one's either way, a round only stops sooner
    stop: int | None = None

    def cap(self, K: int) -> int:
        """The transitions a round from here may still walk: up to the barrier or the block's end."""
        return (K if self.stop is None else min(K, self.stop)) - self.k


@dataclass(frozen=True)
class Pending:
    """A step planned and waiting for its proposals."""

    chain: ChainState
    plan: Plan
    requests: tuple[Request, ...]


class Kernel(Protocol):
    family: SamplerFamily

    def plan(self, chain: ChainState) -> Pending: ...

    def finish(self, pending: Pending, proposals: Sequence[Proposal]) -> tuple[ChainState, RoundTree]: ...

    def step(self, engine: Engine, chain: ChainState) -> tuple[ChainState, RoundTree]: ...


class _Steps:
    def step(self, engine: Engine, chain: ChainState) -> tuple[ChainState, RoundTree]:
        pending = self.plan(chain)  # type: ignore[attr-defined]
        return self.finish(pending, engine.generate(pending.requests))  # type: ignore[attr-defined]


def build_kernel(params: SamplerParams, classifier: CertaintyClassifier | None = None,
                 family: SamplerFamily | None = None) -> Kernel:
    """The kernel `--sampler`, `--prefetch` and `--inputs` select (`family`: a decision rule other than the
    method's own, as a tempering replica's with its ladder's score temperatures)."""
    family = family or sampler_family(params)
    if params.prefetch == "none":
        return SequentialKernel(params, family)
    return RoundKernel(params, family, classifier or DEFAULT_CLASSIFIER)


def _requests(root: SeqState, plan: Plan, family: SamplerFamily) -> tuple[Request, ...]:
    return tuple(Request(root.prefix(plan.decisions[p].cut), root.T - plan.decisions[p].cut, seed, tau,
                         family.score_taus) for p, seed, tau in plan.requests)


def _request_recs(plan: Plan, proposals: Sequence[Proposal]) -> tuple[RequestRec, ...]:
    return tuple(RequestRec(p, plan.decisions[p].cut, seed, prop, tau)
                 for (p, seed, tau), prop in zip(plan.requests, proposals))


# -- the sequential kernel -------------------------------------------------------


class SequentialKernel(_Steps):
    """One transition per model call (alg. 1, lines 4-7; MultiTryMH: M candidates in the call).

    Written apart from the PreSTO kernel on purpose: it is the reference the
    coupling tests hold PreSTO to.
    """

    def __init__(self, params: SamplerParams, family: SamplerFamily):
        self.params, self.family = params, family

    def plan(self, chain: ChainState) -> Pending:
        x = chain.state
        inp = decision_inputs(self.params.seed, chain.block, chain.k)
        cut = self.family.law.cut(inp.cut_u, x)
        plan = Plan(self.family)
        plan.add_decision(index=chain.k, depth=0, cut=cut, inputs=inp, issue=True, node=0)
        return Pending(chain, plan, _requests(x, plan, self.family))

    def finish(self, pending: Pending, proposals: Sequence[Proposal]) -> tuple[ChainState, RoundTree]:
        chain, x = pending.chain, pending.chain.state
        dec = pending.plan.decisions[0]
        # MultiTryMH's candidates, in order (two identical draws share one request)
        props = [proposals[r] for r in dec.candidates] if dec.candidates else list(proposals)
        J = self.family.select(dec.inputs, props)
        sc = self.family.score(x, dec.cut, dec.inputs, props, J)
        accepted = accepts(dec.accept_u, sc)
        request = dec.candidates[J] if dec.candidates else 0
        dec = replace(dec, request=request)
        y = x.with_suffix(dec.cut, props[J]) if accepted else x
        tree = TableTree(
            rule="none", inputs="decision", T=x.T, k0=chain.k, depth_cap=chain.cap(self.params.steps),
            root=x, decisions=(dec,), requests=_request_recs(pending.plan, proposals),
            scores={(0, ROOT): sc}, steps=(Step(0, 0, ROOT, accepted),), stop_node=1 if accepted else 2,
            stop_reason="cap" if chain.k + 1 >= self.params.steps else NodeStatus.LEAF, walked=(y,),
            table={0: NodeRec(0, NodeStatus.EXPANDED, ROOT, 0), 1: NodeRec(1, NodeStatus.LEAF, request, None, 0, True),
                   2: NodeRec(1, NodeStatus.LEAF, ROOT, None, 0, False)},
        )
        return replace(chain, state=y, k=chain.k + 1, round=chain.round + 1), tree


# -- PreSTO rounds ------------------------------------------------------------------


class RoundKernel(_Steps):
    """One PreSTO round: plan, one batched call, score, walk (alg. 2, lines 5-7).

    The traversal rule (`rules.traversal_rule`) is chosen once.  Decision inputs
    (`LevelTree`): every rule issues one request per future decision and says
    which states may use it; `bfs` keeps its quirk's shape.  Node inputs
    (`TableTree`): the paper's BFS and predictive allocations.
    """

    def __init__(self, params: SamplerParams, family: SamplerFamily, classifier: CertaintyClassifier):
        self.params, self.family = params, family
        self.rule = traversal_rule(params.prefetch, params.inputs, classifier)

    def plan(self, chain: ChainState) -> Pending:
        p, root = self.params, chain.state
        law = self.family.law

        def cut_of(inp: DecisionInputs) -> int:
            # A state-dependent law (EntropyCut) is read off the root, the only state known
            # before the call; nodes holding another state re-check their cut when scored.
            return law.cut(inp.cut_u, root)

        if self.rule.levels:
            def inputs_at(index: int) -> DecisionInputs:
                return decision_inputs(p.seed, chain.block, index)
        else:
            def inputs_at(index: int) -> DecisionInputs:  # here, a node of the round's tree
                if index == 0 and chain.carried is not None:
                    return chain.carried
                return node_inputs(p.seed, chain.block, chain.round, index)

        plan = self.rule.plan(family=self.family, T=root.T, k0=chain.k, depth_cap=chain.cap(p.steps),
                              budget=p.budget, cut_of=cut_of, inputs_at=inputs_at)
        return Pending(chain, plan, _requests(root, plan, self.family))

    def finish(self, pending: Pending, proposals: Sequence[Proposal]) -> tuple[ChainState, RoundTree]:
        chain, plan = pending.chain, pending.plan
        root = chain.state
        requests = _request_recs(plan, proposals)
        # MultiTryMH: the decision's move is its selected candidate, drawn once, here
        selected: dict[int, int] = {}
        decisions = []
        for pos, d in enumerate(plan.decisions):
            if d.candidates:
                selected[pos] = self.family.select(d.inputs, [requests[r].proposal for r in d.candidates])
                d = replace(d, request=d.candidates[selected[pos]])
            decisions.append(d)
        remap = {a.request: b.request for a, b in zip(plan.decisions, decisions)
                 if a.request is not None and b.request is not None and a.request != b.request}
        common = dict(rule=self.rule.name, inputs=self.params.inputs, T=root.T, k0=chain.k,
                      depth_cap=chain.cap(self.params.steps), root=root, decisions=tuple(decisions),
                      requests=requests)

        def score_at(tree: RoundTree, pos: int, state: SeqState) -> Score | None:
            """Decision `pos` scored against `state`, or None if that state's cut law gives
            another cut than the prefetched one (EntropyCut): the decision is then deferred."""
            d = tree.decisions[pos]
            if self.family.law.state_dependent and self.family.law.cut(d.cut_u, state) != d.cut:
                return None
            props = [tree.requests[r].proposal for r in (d.candidates or (plan.request_of(pos),))]
            return self.family.score(state, d.cut, d.inputs, props, selected.get(pos, 0))

        tree: RoundTree
        if self.rule.levels:
            tree = LevelTree(**common, scores={}, quirk=self.rule.quirk)  # type: ignore[arg-type]
            tree = replace(tree, scores=self._score_levels(tree, score_at))
        else:
            table = {v: replace(rec, src=remap.get(rec.src, rec.src)) for v, rec in plan.table.items()}
            tree = TableTree(**common, scores={}, table=table)  # type: ignore[arg-type]
            table, scores = self._score_table(tree, score_at)
            tree = replace(tree, table=table, scores=scores)
        tree = walk(tree, score_at)
        carried = None
        if tree.stop_reason == NodeStatus.DEFERRED and isinstance(tree, TableTree):
            carried = tree.decisions[tree.table[tree.stop_node].decision].inputs  # type: ignore[index]
        nxt = ChainState(tree.final_state, chain.block, chain.k + tree.transitions, chain.round + 1, carried,
                         chain.stop)
        return nxt, tree

    def _score_levels(self, tree: RoundTree, score_at) -> dict[tuple[int, int], Score]:
        """Decision inputs: score level j's proposal against every state that may use it.

        The states reachable at depth j are the root and the proposal of each
        earlier level (the last one accepted).  The rule's `may_use` says which
        of them may use level j's request: Condition 1 for bfs and predictive,
        the content check for spine (docs/randomness.md#rounds-under-decision-inputs).  Either way the proposal
        is the one sequential PowerMH would draw from that state, and it is scored
        against that state, never against the root's suffix.
        """
        scores = {}
        earlier: list[int] = [ROOT]  # state sources reachable at depth j: the root, earlier proposals
        for j, dec in enumerate(tree.decisions):
            for src in tuple(earlier):
                sc = score_at(tree, j, tree.state_of(src)) if self.rule.may_use(tree, src, dec.cut) else None
                if sc is not None:
                    scores[(j, src)] = sc
            assert dec.request is not None  # every level is issued
            earlier.append(dec.request)
        return scores

    @staticmethod
    def _score_table(tree: TableTree, score_at) -> tuple[dict[int, NodeRec], dict[tuple[int, int], Score]]:
        """Node inputs: score each issued node's proposal against the state it holds.

        A node whose own cut law gives another cut than the prefetched one
        (EntropyCut below an accept) becomes deferred, and what lies below it
        unreachable.
        """
        table: dict[int, NodeRec] = dict(tree.table)
        scores: dict[tuple[int, int], Score] = {}
        for v in sorted(table):  # parents before children
            rec = table[v]
            pos = rec.decision
            if rec.status not in (NodeStatus.EXPANDED, NodeStatus.UNREACHABLE) or pos is None:
                continue
            parent = table.get(rec.parent) if v else None
            if rec.status == NodeStatus.EXPANDED and parent is not None and parent.status != NodeStatus.EXPANDED:
                table[v] = rec = replace(rec, status=NodeStatus.UNREACHABLE)
            sc = score_at(tree, pos, tree.state_of(rec.src))
            if sc is None:
                table[v] = replace(rec, status=NodeStatus.DEFERRED)
                continue
            scores[(pos, rec.src)] = sc
        return table, scores


def walk(tree: RoundTree, score_at: Callable[[RoundTree, int, SeqState], Score | None]) -> RoundTree:
    """Follow the realized accept/reject path with the unchanged MH rule (sec 3.2, step 3).

    Stops at a leaf, at a deferred decision, or after the transitions left in
    the block (the depth cap).  The walk builds the chain's exact states as the
    sequential sampler would: accepting proposal y at cut c from state x gives
    x[:c] + y, keeping x's own per-token records before c.  A node's tree state
    `state_of(src)` takes those records from the round's root instead; the two
    hold the same tokens (Condition 1 or the spine's content check) but, on a
    real engine, records of the same token computed in different calls differ
    by float noise.  Where they differ, the decision is scored again against
    the exact state (and deferred if its cut law gives another cut there).
    """
    steps: list[Step] = []
    states: list[SeqState] = []
    scores = dict(tree.scores)
    state = tree.root
    path: Path = ()
    stop: str = NodeStatus.LEAF  # or "cap"
    while True:
        view = tree.node_at(path)
        assert view is not None, "a rule records both children of every node it expands"
        node = view.id
        if len(steps) >= tree.depth_cap:
            stop = "cap"
            break
        if view.status != NodeStatus.EXPANDED:
            stop = view.status
            break
        assert view.pos is not None and view.decision is not None and view.score is not None
        sc = view.score
        if state != tree.state_of(view.src):
            exact = score_at(tree, view.pos, state)
            if exact is None:
                stop = NodeStatus.DEFERRED
                break
            sc = scores[(view.pos, view.src)] = exact  # the path shows what the chain used
        accepted = accepts(view.decision.accept_u, sc)
        steps.append(Step(node, view.pos, view.src, accepted))
        if accepted:
            dec = view.decision
            state = state.with_suffix(dec.cut, tree.requests[dec.request].proposal)  # type: ignore[index]
        states.append(state)
        path += (accepted,)
    return replace(tree, scores=scores, steps=tuple(steps), walked=tuple(states), stop_node=node, stop_reason=stop)
