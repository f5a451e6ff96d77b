"""Traversal rules: which requests a prefetch round issues (paper sec 3.2-3.3, DESIGN.md sec 4).

A planner decides, before any proposal exists, which decisions of the round's
tree get a request.  Every request's prefix is a prefix of the round's root
state (Condition 1 guarantees it for the cut-based rules), so a request is
fully given by its cut and seed; identical requests are issued once and the
budget counts distinct requests, i.e. what the engine actually generates.

- node inputs: `plan_bfs` (the paper's BFS, quirk included) and
  `plan_predictive` (best-first over predicted reach weights, the optimum of
  eq. 17 computed in O(N log N); the DP of eq. 19 is the test oracle).
- decision inputs: every node at depth j shares decision k0+j's inputs, hence
  one request per depth; `plan_levels` issues depths 0..min(N, K-k)-1 for all
  three rules, which is what BFS and the predictive optimum both reduce to
  when identical requests cost one.  The rules then differ in which nodes may
  use a request (see `presto.score_levels`).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from presto_tui.runtime.classifier import CertaintyClassifier, node_features
from presto_tui.runtime.randomness import DecisionInputs
from presto_tui.runtime.tree import (
    DEFERRED, EXPANDED, LEAF, ROOT, UNREACHABLE, DecisionRec, NodeRec,
)

CutOf = Callable[[DecisionInputs], int]
# A decision's suffix draws: (seed, temperature or None for the chain's own) per request;
# one for PowerMH and EntropyCut, one per candidate for MultiTryMH.
Draws = Callable[[DecisionInputs], list[tuple[int, float | None]]]


def single_draw(inp: DecisionInputs) -> list[tuple[int, float | None]]:
    return [(inp.seed, None)]


@dataclass
class Plan:
    decisions: list[DecisionRec] = field(default_factory=list)
    requests: list[tuple[int, int, float | None]] = field(default_factory=list)  # decision pos, seed, tau
    levels: bool = False
    table: dict[int, NodeRec] = field(default_factory=dict)
    quirk: bool = False
    _by_key: dict[tuple, int] = field(default_factory=dict)

    def add_decision(self, *, index, depth, cut, inputs: DecisionInputs, issue: bool,
                     h_pred=None, node=None, draws: Draws = single_draw) -> int:
        """Record a decision; issue (or share) its requests when `issue`. Returns its position."""
        pos = len(self.decisions)
        issued = []
        if issue:
            for seed, tau in draws(inputs):
                key = (cut, seed, tau)
                if key not in self._by_key:
                    self._by_key[key] = len(self.requests)
                    self.requests.append((pos, seed, tau))
                issued.append(self._by_key[key])
        candidates = tuple(issued) if draws is not single_draw else ()  # MultiTryMH, even with 1 try
        self.decisions.append(DecisionRec(index, depth, cut, inputs.cut_u, inputs.seed, inputs.accept_u,
                                          issued[0] if issued else None, h_pred, node, candidates))
        return pos

    @property
    def n_requests(self) -> int:
        return len(self.requests)


def plan_levels(*, T: int, k0: int, depth_cap: int, budget: int,
                inputs_at: Callable[[int], DecisionInputs], cut_of: CutOf,
                classifier: CertaintyClassifier | None = None, quirk: bool = False,
                draws: Draws = single_draw, cost: int = 1) -> Plan:
    """Decision inputs: one request per depth, depths 0..min(budget, depth_cap)-1.

    `quirk` keeps BFS's shape: below the reject child of a deferred node the
    (shared) requests count as issued but unreachable.
    """
    plan = Plan(levels=True, quirk=quirk)
    for j in range(min(budget // cost, depth_cap)):
        inp = inputs_at(k0 + j)
        cut = cut_of(inp)
        # With shared requests the rules need no prediction to choose; the
        # predictive rule still records h+ as seen from the all-reject path.
        h = classifier.branch_prob(node_features(cut, T, j, 0, T)) if classifier else None
        plan.add_decision(index=k0 + j, depth=j, cut=cut, inputs=inp, issue=True, h_pred=h, draws=draws)
    return plan


def plan_bfs(*, T: int, k0: int, depth_cap: int, budget: int,
             inputs_at: Callable[[int], DecisionInputs], cut_of: CutOf,
             draws: Draws = single_draw, cost: int = 1) -> Plan:
    """Paper sec 3.2: BFS from the root, Condition 1, deferral keeping the drawn cut.

    As in the paper's implementation, the reject child of a deferred node is
    enqueued too; what BFS places below it is issued but unreachable.
    """
    plan = Plan(quirk=True)
    queue = deque([(0, 0, ROOT, T, False)])  # node, depth, state source, cut index, below a deferral
    while queue:
        v, depth, src, cut_index, unreachable = queue.popleft()
        if plan.n_requests + cost > budget or depth >= depth_cap:
            plan.table[v] = NodeRec(depth, LEAF, src, None)
            continue
        inp = inputs_at(v)
        cut = cut_of(inp)
        feasible = cut <= cut_index  # Condition 1
        pos = plan.add_decision(index=k0 + depth, depth=depth, cut=cut, inputs=inp,
                                issue=feasible, node=v, draws=draws)
        if feasible:
            status = UNREACHABLE if unreachable else EXPANDED
            plan.table[v] = NodeRec(depth, status, src, pos)
            queue.append((2 * v + 1, depth + 1, plan.decisions[pos].request, cut, unreachable))
            queue.append((2 * v + 2, depth + 1, src, cut_index, unreachable))
        else:
            plan.table[v] = NodeRec(depth, DEFERRED, src, pos)
            queue.append((2 * v + 2, depth + 1, src, cut_index, True))
    return plan


def plan_predictive(*, T: int, k0: int, depth_cap: int, budget: int,
                    inputs_at: Callable[[int], DecisionInputs], cut_of: CutOf,
                    classifier: CertaintyClassifier, draws: Draws = single_draw, cost: int = 1) -> Plan:
    """Paper sec 3.3 / appendix C: maximise the predicted transition count (eq. 17).

    Reach weights strictly decrease along every path (0 < h+ < 1), so the
    `budget` candidates of largest reach form an ancestor-closed set, and a
    best-first expansion finds the optimum of eq. 19 while drawing cuts only
    for the nodes it pops.  A popped node whose request violates Condition 1
    is not a candidate: it keeps its drawn inputs (deferred) and its subtree
    is left out.
    """
    plan = Plan()
    order = 0  # ties: first pushed first, so ancestors precede descendants
    heap = [(-1.0, order, 0, 0, ROOT, T, 0)]  # -reach, order, node, depth, src, cut index, accepts
    while heap:
        neg_reach, _, v, depth, src, cut_index, accepts = heapq.heappop(heap)
        if plan.n_requests + cost > budget or depth >= depth_cap:
            plan.table[v] = NodeRec(depth, LEAF, src, None)
            continue
        inp = inputs_at(v)
        cut = cut_of(inp)
        if cut > cut_index:
            pos = plan.add_decision(index=k0 + depth, depth=depth, cut=cut, inputs=inp,
                                    issue=False, node=v)
            plan.table[v] = NodeRec(depth, DEFERRED, src, pos)
            continue
        h = classifier.branch_prob(node_features(cut, cut_index, depth, accepts, T))
        pos = plan.add_decision(index=k0 + depth, depth=depth, cut=cut, inputs=inp,
                                issue=True, h_pred=h, node=v, draws=draws)
        plan.table[v] = NodeRec(depth, EXPANDED, src, pos)
        reach = -neg_reach
        req = plan.decisions[pos].request
        order += 1
        heapq.heappush(heap, (-reach * h, order, 2 * v + 1, depth + 1, req, cut, accepts + 1))
        order += 1
        heapq.heappush(heap, (-reach * (1.0 - h), order, 2 * v + 2, depth + 1, src, cut_index, accepts))
    return plan
