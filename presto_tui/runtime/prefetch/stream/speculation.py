"""The speculation tree: how likely the walker is to need each request (eqs. 14/17/19 made continuous).

Expanded best-first by reach from the walker's state.  A node is a decision d
and a state; what it asks for is d's want from that state.  Its children:
- a finished proposal branches with its exact acceptance probability A
  (accept: the state after the move; reject: the same state);
- a proposal still decoding (or not issued) branches with the epsilon-class
  classifier's h+ (eq. 14), or with the learned probability that it moves the
  state (`moves.MoveRates`, h+ its prior).  Its accept branch holds the node's state only up
  to the decision's cut; the rest is still being decoded.  How that branch is
  modelled is a `DecodingBranch` object: `AtCut` keeps it as a share of the
  node's reach that counts only for requests cut at or before the cut (a
  `profile` of (ceiling, reach) pairs); `InProposal` also follows the tokens
  the proposal has decoded so far, so that a later decision cut inside them
  can be requested before the proposal finishes (the prefix exists already).
- at the block's end (d = K) a `BlockEnd` object says what the state asks
  for: nothing (`NoExtension`), or the next block's extension (`NextBlock`).

A request is wanted with the summed reach of the nodes asking for it: the
model's probability that the walker will need it.  Shares below MIN_REACH are
not worth a slot and are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from presto_tui.runtime.core.classifier import CertaintyClassifier, node_features
from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.prefetch.bestfirst import best_first
from presto_tui.runtime.prefetch.stream.decisions import Decisions, Want
from presto_tui.runtime.prefetch.stream.moves import MoveRates
from presto_tui.runtime.prefetch.stream.requests import Group, RequestBook
from presto_tui.runtime.prefetch.stream.walker import Scorer, Walker

MIN_REACH = 1e-4  # speculation below this predicted reach is not worth a slot

Profile = tuple[tuple[int, float], ...]  # (ceiling, reach): a share counts for requests cut at or before its ceiling


@dataclass(frozen=True)
class Node:
    d: int
    state: SeqState  # exact: tokens and records of the whole state; else tokens up to the profile's ceilings
    profile: Profile
    exact: bool = True


def merge(profile: list[tuple[int, float]]) -> tuple[Profile, float]:
    """Reach shares by ceiling, equal ceilings summed, shares below MIN_REACH dropped; and their total."""
    by: dict[int, float] = {}
    for ceiling, m in profile:
        by[ceiling] = by.get(ceiling, 0.0) + m
    merged = tuple((c, m) for c, m in sorted(by.items(), reverse=True) if m >= MIN_REACH)
    return merged, sum(m for _, m in merged)


class DecodingBranch(Protocol):
    """The accept branch of a decision whose proposal is not known in full."""

    def accept(self, node: Node, g: Group | None, cut: int, share: float) -> Node | None:
        """A node of its own for the branch (reach `share`), or None to keep it as a share at `cut`."""
        ...


class AtCut:
    """The branch is a share of the node's reach, for requests cut at or before the cut."""

    def accept(self, node: Node, g: Group | None, cut: int, share: float) -> Node | None:
        return None


class InProposal:
    """Follow the tokens a single-request proposal has decoded so far: the accept branch holds
    them, so a later decision cut inside them can be requested at once (its prefix exists)."""

    def __init__(self, decoded: Callable[[Group], tuple[int, ...]]):
        self.decoded = decoded

    def accept(self, node: Node, g: Group | None, cut: int, share: float) -> Node | None:
        if g is None or g.size != 1:
            return None
        tokens = g.proposals[0].tokens if g.finished else self.decoded(g)  # type: ignore[union-attr]
        if not tokens:
            return None
        st = SeqState(node.state.prompt, node.state.tokens[:cut] + tokens)
        return Node(node.d + 1, st, ((cut + len(tokens), share),), exact=False)


class BlockEnd(Protocol):
    def want(self, node: Node, reach: float) -> Want | None: ...


class NoExtension:
    def want(self, node: Node, reach: float) -> Want | None:
        return None


class NextBlock:
    """At the block's end, an exact state asks for the next block's extension."""

    def __init__(self, decisions: Decisions):
        self.decisions = decisions

    def want(self, node: Node, reach: float) -> Want | None:
        if not node.exact or self.decisions.next_block is None:
            return None
        return self.decisions.want_at(self.decisions.K, node.state)


class SpeculationTree:
    """Wants in best-first order of reach, from the walker's state (see the module docstring)."""

    def __init__(self, decisions: Decisions, walker: Walker, book: RequestBook, scorer: Scorer,
                 classifier: CertaintyClassifier, decoding: DecodingBranch | None = None,
                 block_end: BlockEnd | None = None, moves: MoveRates | None = None):
        self.decisions, self.walker, self.book, self.scorer = decisions, walker, book, scorer
        self.classifier = classifier
        self.decoding = decoding or AtCut()
        self.block_end = block_end or NoExtension()
        self.moves = moves  # learned: how often a decision moves the state (else the classifier's h+)
        self._h: dict[tuple[int, int], float] = {}  # (depth ahead of the walker, cut) -> h+
        self._version = moves.version if moves is not None else 0

    def h_pred(self, d: int, cut: int) -> float:
        """The probability that the walker takes decision d's accept branch: the classifier's h+, or, with
        `moves`, the learned probability that the decision moves the state (h+ its prior)."""
        if self.moves is not None and self.moves.version != self._version:
            self._h.clear()
            self._version = self.moves.version
        key = (d - self.walker.k, cut)
        if key not in self._h:
            T = self.decisions.T
            h = self.classifier.branch_prob(node_features(cut, T, d - self.walker.k, 0, T))
            self._h[key] = self.moves.rate(cut / T, h) if self.moves is not None else h
        return self._h[key]

    def wants(self) -> Iterator[tuple[Want, float, Group | None]]:
        """(want, reach of one node asking for it, its group or None): in about decreasing reach.
        A want asked for by several nodes comes once per node; the consumer sums."""
        st = self.walker.state
        root = (Node(self.walker.k, st, ((st.T, 1.0),), exact=False) if self.walker.partial  # the extension so far
                else Node(self.walker.k, st, ((self.decisions.T, 1.0),)))
        return best_first(root, self._visit)

    def _visit(self, _priority: float, node: Node):
        d, st, profile = node.d, node.state, node.profile
        if d >= self.decisions.K:
            reach = sum(m for ceiling, m in profile if ceiling >= self.decisions.T)
            want = self.block_end.want(node, reach) if reach >= MIN_REACH else None
            return ((want, reach, self.book.get(want)) if want is not None else None), ()
        cut = self.decisions.cut(d, st)
        reach = _reach(profile, cut)
        if reach < MIN_REACH:
            # No share of the node holds this decision's prefix.  Whatever it does changes only positions
            # at or after its cut, which no share knows: the shares pass on to the next decision unchanged,
            # and on past every later decision no share holds either.  Those are walked here, by their cuts
            # alone: a node for each would ask nothing and cost a want (its prefix copied and hashed) and
            # a trip through the queue, and while a long block's extension decodes nearly every decision
            # of the block is one (the queue's order is the same: a passed-on node keeps its reach).
            K, cut_at = self.decisions.K, self.decisions.cut
            while True:
                profile = tuple((c, m) for c, m in profile if c < cut)
                mass = sum(m for _, m in profile)
                if mass < MIN_REACH:
                    return None, ()
                top = max(c for c, _ in profile)
                d += 1
                while d < K and (cut := cut_at(d, st)) > top:  # (no share holds it: the profile stays)
                    d += 1
                if d >= K or _reach(profile, cut) >= MIN_REACH:
                    return None, ((mass, Node(d, st, profile, node.exact)),)
        want = self.walker.want_at(d, st)
        g = self.book.get(want)
        children: list[tuple[float, Node]] = []
        if g is not None and g.finished and node.exact:
            # only the share of the node that holds this prefix reaches this proposal
            A, _, acc = self.scorer.accept(g, st)
            rest = [(c, m) for c, m in profile if c < cut]
            if A > 0.0 and reach * A >= MIN_REACH:
                children.append((reach * A, Node(d + 1, acc, ((self.decisions.T, reach * A),))))
            # The reject takes the node's whole reach at ceiling T.  Strictly a share known only up to
            # c < T stays so, but keeping those ceilings measured slower (benchmarks/bench_stream.py, cost
            # policy at N=64: 4.59x against 4.81x on the CPU cost, 6.63x against 6.96x GPU-like): this
            # ranks requests, and the chain's exactness does not depend on it.
            keep = ([(self.decisions.T, reach * (1.0 - A))] if A < 1.0 else []) + rest
            if keep:
                merged, total = merge(keep)
                if merged:
                    children.append((total, Node(d + 1, st, merged)))
            return (want, reach, g), children
        h = self.h_pred(d, cut)
        own = self.decoding.accept(node, g, cut, reach * h)
        split: list[tuple[int, float]] = []
        for ceiling, m in profile:
            if ceiling >= cut:  # rejected / accepted (unseen: a share at the cut)
                split.append((ceiling, m * (1.0 - h)))
                if own is None:
                    split.append((cut, m * h))
            else:
                split.append((ceiling, m))
        merged, total = merge(split)
        if merged:
            children.append((total, Node(d + 1, st, merged, node.exact)))
        if own is not None and own.profile[0][1] >= MIN_REACH:
            children.append((own.profile[0][1], own))
        return (want, reach, g), children


def _reach(profile: Profile, cut: int) -> float:
    """The reach of the shares that hold a decision's prefix (those whose ceiling is at or past its cut)."""
    if len(profile) == 1:  # most nodes: the whole reach covers the state
        return profile[0][1] if profile[0][0] >= cut else 0.0
    return sum(m for ceiling, m in profile if ceiling >= cut)
