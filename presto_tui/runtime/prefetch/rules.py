"""Traversal rules: which requests a prefetch round issues (paper sec 3.2-3.3, docs/randomness.md).

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
  when identical requests cost one.  The rules then differ in which states may
  use a request (`may_use`: Condition 1, or the spine's content check).

`traversal_rule(prefetch, inputs, classifier)` chooses the rule object once;
the round kernel only calls its `plan` and `may_use`.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from presto_tui.runtime.core.classifier import CertaintyClassifier, node_features
from presto_tui.runtime.core.randomness import DecisionInputs
from presto_tui.runtime.prefetch.tree import ROOT, DecisionRec, NodeRec, NodeStatus, RoundTree
from presto_tui.runtime.samplers.families import SamplerFamily

CutOf = Callable[[DecisionInputs], int]
# Node inputs are keyed by a node's place in the tree, 2i+1 / 2i+2 from the root's 0: a Python int
# that grows as 2^depth, used only as a randomness key, never as a node id or in a trace.
InputsAt = Callable[[int], DecisionInputs]


@dataclass
class Plan:
    """What a rule decided before any proposal exists: decisions, distinct requests, nodes."""

    family: SamplerFamily
    decisions: list[DecisionRec] = field(default_factory=list)
    requests: list[tuple[int, int, float]] = field(default_factory=list)  # decision pos, seed, tau
    table: dict[int, NodeRec] = field(default_factory=dict)  # node inputs: the nodes touched
    _by_key: dict[tuple, int] = field(default_factory=dict)

    def add_decision(self, *, index, depth, cut, inputs: DecisionInputs, issue: bool,
                     h_pred=None, node=None) -> int:
        """Record a decision; issue (or share) its requests when `issue`. Returns its position."""
        pos = len(self.decisions)
        issued = []
        if issue:
            for seed, tau in self.family.draws(inputs):
                key = (cut, seed, tau)
                if key not in self._by_key:
                    self._by_key[key] = len(self.requests)
                    self.requests.append((pos, seed, tau))
                issued.append(self._by_key[key])
        candidates = tuple(issued) if self.family.multiple else ()  # MultiTryMH, even with 1 try
        self.decisions.append(DecisionRec(index, depth, cut, inputs.cut_u, inputs.seed, inputs.accept_u,
                                          issued[0] if issued else None, h_pred, node, candidates))
        return pos

    def request_of(self, pos: int) -> int:
        """The (selected) request of an issued decision."""
        req = self.decisions[pos].request
        assert req is not None, "decision was not issued"
        return req

    @property
    def n_requests(self) -> int:
        return len(self.requests)


def plan_levels(*, family: SamplerFamily, T: int, k0: int, depth_cap: int, budget: int,
                inputs_at: Callable[[int], DecisionInputs], cut_of: CutOf,
                classifier: CertaintyClassifier | None = None) -> Plan:
    """Decision inputs: one request per depth, depths 0..min(budget, depth_cap)-1."""
    plan = Plan(family)
    for j in range(min(budget // family.requests_per_decision, depth_cap)):
        inp = inputs_at(k0 + j)
        cut = cut_of(inp)
        # With shared requests the rules need no prediction to choose; the
        # predictive rule still records h+ as seen from the all-reject path.
        h = classifier.branch_prob(node_features(cut, T, j, 0, T)) if classifier else None
        plan.add_decision(index=k0 + j, depth=j, cut=cut, inputs=inp, issue=True, h_pred=h)
    return plan


def plan_bfs(*, family: SamplerFamily, T: int, k0: int, depth_cap: int, budget: int,
             inputs_at: Callable[[int], DecisionInputs], cut_of: CutOf) -> Plan:
    """Paper sec 3.2: BFS from the root, Condition 1, deferral keeping the drawn cut.

    As in the paper's implementation, the reject child of a deferred node is
    enqueued too; what BFS places below it is issued but unreachable.
    """
    plan = Plan(family)
    cost = family.requests_per_decision
    # parent id, accept child?, randomness key, depth, state source, cut index, below a deferral
    queue = deque([(-1, False, 0, 0, ROOT, T, False)])
    while queue:
        parent, accept, key, depth, src, cut_index, unreachable = queue.popleft()
        v = len(plan.table)  # ids in BFS order
        if plan.n_requests + cost > budget or depth >= depth_cap:
            plan.table[v] = NodeRec(depth, NodeStatus.LEAF, src, None, parent, accept)
            continue
        inp = inputs_at(key)
        cut = cut_of(inp)
        feasible = cut <= cut_index  # Condition 1
        pos = plan.add_decision(index=k0 + depth, depth=depth, cut=cut, inputs=inp,
                                issue=feasible, node=v)
        if feasible:
            status = NodeStatus.UNREACHABLE if unreachable else NodeStatus.EXPANDED
            plan.table[v] = NodeRec(depth, status, src, pos, parent, accept)
            queue.append((v, True, 2 * key + 1, depth + 1, plan.request_of(pos), cut, unreachable))
            queue.append((v, False, 2 * key + 2, depth + 1, src, cut_index, unreachable))
        else:
            plan.table[v] = NodeRec(depth, NodeStatus.DEFERRED, src, pos, parent, accept)
            queue.append((v, False, 2 * key + 2, depth + 1, src, cut_index, True))
    return plan


def plan_predictive(*, family: SamplerFamily, T: int, k0: int, depth_cap: int, budget: int,
                    inputs_at: Callable[[int], DecisionInputs], cut_of: CutOf,
                    classifier: CertaintyClassifier) -> Plan:
    """Paper sec 3.3 / appendix C: maximise the predicted transition count (eq. 17).

    Reach weights strictly decrease along every path (0 < h+ < 1), so the
    `budget` candidates of largest reach form an ancestor-closed set, and a
    best-first expansion finds the optimum of eq. 19 while drawing cuts only
    for the nodes it pops.  A popped node whose request violates Condition 1
    is not a candidate: it keeps its drawn inputs (deferred) and its subtree
    is left out.
    """
    plan = Plan(family)
    cost = family.requests_per_decision
    order = 0  # ties: first pushed first, so ancestors precede descendants
    # -reach, order, parent id, accept child?, randomness key, depth, src, cut index, accepts
    heap: list[tuple[float, int, int, bool, int, int, int, int, int]] = [(-1.0, order, -1, False, 0, 0, ROOT, T, 0)]
    while heap:
        neg_reach, _, parent, accept, key, depth, src, cut_index, accepts = heapq.heappop(heap)
        v = len(plan.table)  # ids in the order popped
        if plan.n_requests + cost > budget or depth >= depth_cap:
            plan.table[v] = NodeRec(depth, NodeStatus.LEAF, src, None, parent, accept)
            continue
        inp = inputs_at(key)
        cut = cut_of(inp)
        if cut > cut_index:
            pos = plan.add_decision(index=k0 + depth, depth=depth, cut=cut, inputs=inp,
                                    issue=False, node=v)
            plan.table[v] = NodeRec(depth, NodeStatus.DEFERRED, src, pos, parent, accept)
            continue
        h = classifier.branch_prob(node_features(cut, cut_index, depth, accepts, T))
        pos = plan.add_decision(index=k0 + depth, depth=depth, cut=cut, inputs=inp,
                                issue=True, h_pred=h, node=v)
        plan.table[v] = NodeRec(depth, NodeStatus.EXPANDED, src, pos, parent, accept)
        reach = -neg_reach
        req = plan.request_of(pos)
        order += 1
        heapq.heappush(heap, (-reach * h, order, v, True, 2 * key + 1, depth + 1, req, cut, accepts + 1))
        order += 1
        heapq.heappush(heap, (-reach * (1.0 - h), order, v, False, 2 * key + 2, depth + 1, src, cut_index, accepts))
    return plan


# -- the rules as objects ----------------------------------------------------------------------

class TraversalRule(Protocol):
    """Which requests a round issues and, with decision inputs, which states may use them."""

    @property
    def name(self) -> str: ...

    @property
    def levels(self) -> bool:
        """Decision inputs: the round is a `LevelTree`, one request per depth."""
        ...

    @property
    def quirk(self) -> bool:
        """The paper's BFS quirk in a `LevelTree`'s shape."""
        ...

    def plan(self, *, family: SamplerFamily, T: int, k0: int, depth_cap: int, budget: int,
             inputs_at: InputsAt, cut_of: CutOf) -> Plan: ...

    def may_use(self, tree: RoundTree, src: int, cut: int) -> bool:
        """Decision inputs: may the state held by source `src` use the request cut at `cut`?"""
        ...


@dataclass(frozen=True)
class CutLevels:
    """`bfs` and `predictive` with decision inputs: a state uses a request iff Condition 1
    holds (cut <= the state's cut index); the predictive rule only records h+."""

    name: str
    classifier: CertaintyClassifier | None = None
    levels: ClassVar[bool] = True

    @property
    def quirk(self) -> bool:
        return self.name == "bfs"

    def plan(self, **kw) -> Plan:
        return plan_levels(**kw, classifier=self.classifier)

    def may_use(self, tree: RoundTree, src: int, cut: int) -> bool:
        return cut <= tree.cut_index(src)


@dataclass(frozen=True)
class SpineLevels:
    """`spine`: a state uses a request iff it agrees with the root on the positions before
    the cut, the prefix the request was generated from (docs/randomness.md#rounds-under-decision-inputs)."""

    name: ClassVar[str] = "spine"
    levels: ClassVar[bool] = True
    quirk: ClassVar[bool] = False

    def plan(self, **kw) -> Plan:
        return plan_levels(**kw)

    def may_use(self, tree: RoundTree, src: int, cut: int) -> bool:
        return src == ROOT or tree.state_of(src).agrees_before(tree.root, cut)


class _NodeRule:
    """Node inputs: the plan places every request in the round's table."""

    levels: ClassVar[bool] = False
    quirk: ClassVar[bool] = False

    def may_use(self, tree: RoundTree, src: int, cut: int) -> bool:
        raise TypeError("a node-input rule's requests are placed by its plan")


@dataclass(frozen=True)
class NodeBFS(_NodeRule):
    """The paper's BFS with node inputs (sec 3.2)."""

    name: ClassVar[str] = "bfs"

    def plan(self, **kw) -> Plan:
        return plan_bfs(**kw)


@dataclass(frozen=True)
class NodePredictive(_NodeRule):
    """The paper's predictive rule with node inputs (sec 3.3)."""

    classifier: CertaintyClassifier
    name: ClassVar[str] = "predictive"

    def plan(self, **kw) -> Plan:
        return plan_predictive(**kw, classifier=self.classifier)


def traversal_rule(prefetch: str, inputs: str, classifier: CertaintyClassifier) -> TraversalRule:
    """The rule `--prefetch` and `--inputs` select (the streaming rule has its own driver)."""
    if inputs == "decision":
        if prefetch == "spine":
            return SpineLevels()
        if prefetch in ("bfs", "predictive"):
            return CutLevels(prefetch, classifier if prefetch == "predictive" else None)
    elif prefetch == "bfs":
        return NodeBFS()
    elif prefetch == "predictive":
        return NodePredictive(classifier)
    raise ValueError(f"no round rule for --prefetch {prefetch} --inputs {inputs}")
