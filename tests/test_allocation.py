"""The predictive rule's selection is the optimum of eq. 17 (paper appendix C.4).

Oracles: the dynamic program of eq. 19, and brute force over every
ancestor-closed selection of candidate nodes; both on small random trees.
"""

from __future__ import annotations

import itertools
import random
from functools import cache

import pytest

from presto_tui.runtime.core.classifier import CertaintyClassifier, node_features
from presto_tui.runtime.core.cutlaw import uniform_cut
from presto_tui.runtime.core.randomness import DecisionInputs
from presto_tui.runtime.methods.powermh import PowerMHFamily as PowerMH
from presto_tui.runtime.prefetch.rules import plan_predictive
from presto_tui.runtime.prefetch.tree import NodeStatus

FAMILY = PowerMH(alpha=4.0, tau=0.25, epsilon=0.01)


class RandomTree:
    """Random cut inputs per node id and a random classifier over several features."""

    def __init__(self, seed: int, T: int, depth_cap: int):
        self.rng = random.Random(seed)
        self.T, self.depth_cap = T, depth_cap
        self._inputs: dict[int, DecisionInputs] = {}
        feats = ("cut_fraction", "cut_index_fraction", "depth", "accepts")
        self.clf = CertaintyClassifier(
            features=feats,
            coef=tuple(tuple(self.rng.uniform(-3, 3) for _ in feats) for _ in range(3)),
            intercept=tuple(self.rng.uniform(-1, 1) for _ in range(3)),
            mean=(0.0,) * len(feats), scale=(1.0,) * len(feats))

    def inputs_at(self, node: int) -> DecisionInputs:
        if node not in self._inputs:
            self._inputs[node] = DecisionInputs(self.rng.random(), node, self.rng.random())
        return self._inputs[node]

    def cut(self, node: int) -> int:
        return uniform_cut(self.inputs_at(node).cut_u, self.T)

    def h(self, node: int, cut_index: int, depth: int, accepts: int) -> float:
        return self.clf.branch_prob(node_features(self.cut(node), cut_index, depth, accepts, self.T))

    def candidate(self, node: int, cut_index: int, depth: int) -> bool:
        return depth < self.depth_cap and self.cut(node) <= cut_index

    def dp(self, budget: int) -> float:
        """V(v0, N) by eq. 19."""

        @cache
        def V(v: int, b: int, cut_index: int, depth: int, accepts: int) -> float:
            if b == 0 or not self.candidate(v, cut_index, depth):
                return 0.0
            h = self.h(v, cut_index, depth, accepts)
            c = self.cut(v)
            return 1.0 + max(
                h * V(2 * v + 1, m, c, depth + 1, accepts + 1)
                + (1 - h) * V(2 * v + 2, b - 1 - m, cut_index, depth + 1, accepts)
                for m in range(b))

        return V(0, budget, self.T, 0, 0)

    def brute_force(self, budget: int) -> float:
        """Max over ancestor-closed candidate sets of size <= N of the sum of reach weights."""
        cands = {}  # node -> reach

        def collect(v, reach, cut_index, depth, accepts):
            if depth >= budget or not self.candidate(v, cut_index, depth):
                return
            cands[v] = reach
            h = self.h(v, cut_index, depth, accepts)
            collect(2 * v + 1, reach * h, self.cut(v), depth + 1, accepts + 1)
            collect(2 * v + 2, reach * (1 - h), cut_index, depth + 1, accepts)

        collect(0, 1.0, self.T, 0, 0)
        best = 0.0
        nodes = sorted(cands)
        for size in range(1, budget + 1):
            for sel in itertools.combinations(nodes, size):
                s = set(sel)
                if all(v == 0 or (v - 1) // 2 in s for v in s):
                    best = max(best, sum(cands[v] for v in s))
        return best

    def greedy(self, budget: int) -> float:
        plan = plan_predictive(family=FAMILY, T=self.T, k0=0, depth_cap=self.depth_cap, budget=budget,
                               inputs_at=self.inputs_at, cut_of=lambda i: uniform_cut(i.cut_u, self.T),
                               classifier=self.clf)
        h_at = {rec_node: plan.decisions[rec.decision].h_pred
                for rec_node, rec in plan.table.items() if rec.status == NodeStatus.EXPANDED}
        total = 0.0
        for v in h_at:  # reach weight: product of predicted branch probabilities on the path
            reach, node = 1.0, v
            while node != 0:
                rec = plan.table[node]
                reach *= h_at[rec.parent] if rec.accept else 1 - h_at[rec.parent]
                node = rec.parent
            total += reach
        assert plan.n_requests == len(h_at) <= budget
        return total


@pytest.mark.parametrize("seed", range(40))
def test_dp_equals_brute_force_and_best_first(seed):
    rng = random.Random(seed)
    T = rng.choice([3, 5, 10, 50])
    depth_cap = rng.choice([2, 3, 10])
    budget = rng.randint(1, 4)
    tree = RandomTree(seed, T, depth_cap)
    dp = tree.dp(budget)
    assert dp == pytest.approx(tree.brute_force(budget), rel=1e-12, abs=1e-12)
    assert tree.greedy(budget) == pytest.approx(dp, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(15))
def test_best_first_equals_dp_at_larger_budgets(seed):
    tree = RandomTree(1000 + seed, T=64, depth_cap=12)
    for budget in (6, 9):
        assert tree.greedy(budget) == pytest.approx(tree.dp(budget), rel=1e-12)


def test_selection_is_ancestor_closed_and_feasible():
    tree = RandomTree(3, T=40, depth_cap=20)
    plan = plan_predictive(family=FAMILY, T=40, k0=0, depth_cap=20, budget=12, inputs_at=tree.inputs_at,
                           cut_of=lambda i: uniform_cut(i.cut_u, 40), classifier=tree.clf)
    expanded = {v for v, r in plan.table.items() if r.status == NodeStatus.EXPANDED}
    assert len(expanded) == 12
    for v in expanded - {0}:
        assert plan.table[v].parent in expanded
        if plan.table[v].accept:  # accept child: Condition 1 against the parent's cut
            parent = plan.table[plan.table[v].parent]
            assert plan.decisions[plan.table[v].decision].cut <= plan.decisions[parent.decision].cut
