"""One prefetch round as a binary tree that unfolds lazily (paper sec 3.2, appendix C.1).

Every node is reached from the root by a path of accept (left, paper fig. 2)
and reject edges.  Node ids are small integers whatever the depth: the root
is 0, and a tree numbers its other nodes itself (a table tree in the order
its builder recorded them; a level tree gives the realized path the ids
1..n and numbers the other nodes as they are first looked at).  Ids are
never computed from a path (2i+1 / 2i+2 would grow as 2^depth, and a long
run of rejects made ids no JSON writer can hold).  Every state a round can
reach is either its root or `root.with_suffix(cut_r, proposal_r)` for one of
its requests r (the last proposal accepted on the path), so a node is fully
described by its status, the state source it holds (`ROOT` or a request
index) and the decision made at it.

Two layouts, two types behind one read interface (`RoundTree`):
- `TableTree` (node inputs, sequential steps): a table of the nodes the rule
  touched, at most a few per request;
- `LevelTree` (decision inputs): every node at depth j makes decision k0+j
  with one shared request, so the binary tree can be exponentially large while
  its content is one request per level scored against each distinct state.  A
  node's status is derived on demand by walking its path; nothing of size
  2^depth is ever built.

Trees are frozen: a kernel plans, scores and walks, then builds the tree once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import ClassVar

from presto_tui.runtime.core.mh import ACCEPT, REJECT, Score
from presto_tui.runtime.core.randomness import DecisionInputs
from presto_tui.runtime.core.types import Proposal, SeqState

ROOT = -1  # state source of the round's root state



class NodeStatus(StrEnum):
    """What a round did at a node: the one spelling of node statuses, in the tree, the trace (whose
    `table` rows hold the values) and the views.  A str, so a trace's strings read unchanged."""

    EXPANDED = "expanded"  # its accept child's request was issued and is reachable
    DEFERRED = "deferred"  # its request was infeasible; the decision waits for a later round
    LEAF = "leaf"  # not expanded in this round (budget, depth cap)
    UNREACHABLE = "unreachable"  # issued, but below the reject child of a deferred node (BFS)
    LIVE = "live"  # streaming: its request was still decoding when the tree was recorded
    ABORTED = "aborted"  # streaming: its request was aborted (no reachable state needed it any more)


@dataclass(frozen=True)
class DecisionRec:
    """The random inputs and request of one MH decision considered in a round."""

    index: int  # decision index within the block: it moves x^(index) to x^(index+1)
    depth: int
    cut: int
    cut_u: float  # the uniform the cut was drawn from
    seed: int
    accept_u: float
    request: int | None  # index into RoundTree.requests; None when not issued
    h_pred: float | None = None  # predicted accept-branch probability (predictive rule)
    node: int | None = None  # its node in the explicit layout
    candidates: tuple[int, ...] = ()  # MultiTryMH: every candidate's request; `request` is the selected one

    @property
    def inputs(self) -> DecisionInputs:
        return DecisionInputs(self.cut_u, self.seed, self.accept_u)


@dataclass(frozen=True)
class RequestRec:
    """A distinct request sent to the engine and the suffix it returned."""

    decision: int  # position in RoundTree.decisions
    cut: int
    seed: int
    proposal: Proposal  # no tokens while the request is live or after it was aborted
    tau: float = 0.0  # the temperature it was sampled at
    parent: int = -1  # the state its prefix was taken from: ROOT, or a request whose proposal it extends
    done: int | None = None  # streaming: tokens decoded by a request that has not finished


@dataclass(frozen=True)
class NodeRec:
    """A node of the explicit layout."""

    depth: int
    status: NodeStatus
    src: int
    decision: int | None  # position in RoundTree.decisions; None for untouched leaves
    parent: int = -1  # its parent's id (-1: the root)
    accept: bool = False  # it is its parent's accept child


@dataclass(frozen=True)
class Step:
    """One realized MH transition of the round's walk."""

    node: int
    decision: int  # position in RoundTree.decisions
    src: int  # the state the decision was scored against
    accepted: bool


@dataclass(frozen=True)
class NodeView:
    """What a consumer sees of one node."""

    id: int
    depth: int
    accept: bool | None  # it is its parent's accept child (None: the root)
    status: NodeStatus
    src: int  # the state this node holds
    pos: int | None  # position of its decision in RoundTree.decisions
    decision: DecisionRec | None
    score: Score | None  # its decision scored against its state, when expanded
    reach: float  # probability that the walk reaches this node (exact A along the path)
    rounded: bool  # inside the epsilon-rounded subtree (paper sec 3.3)
    on_path: bool  # on the realized path (including the node where the walk stopped)


def _follow(reach: float, rounded: bool, sc: Score, accept: bool) -> tuple[float, bool]:
    """Reach probability and epsilon-rounded membership after one edge (sec 3.3)."""
    reach *= sc.accept_prob if accept else 1.0 - sc.accept_prob
    return reach, rounded and sc.eps_class != (REJECT if accept else ACCEPT)


Path = tuple[bool, ...]  # accept (True) / reject (False) edges from the root


@dataclass(frozen=True)
class RoundTree:
    """The read interface both layouts share; `node(i)` is the one way to look at a node."""

    rule: str  # "none" (sequential), "bfs", "predictive", "spine"
    inputs: str  # "decision" or "node"
    T: int
    k0: int  # transitions done in the block before the round
    depth_cap: int  # K - k0
    root: SeqState
    decisions: tuple[DecisionRec, ...]
    requests: tuple[RequestRec, ...]
    scores: dict[tuple[int, int], Score]  # (decision position, state source) -> score
    steps: tuple[Step, ...] = ()
    stop_node: int = 0
    stop_reason: str = NodeStatus.LEAF  # LEAF or DEFERRED (a NodeStatus), or "cap" (block finished)
    # The chain's exact state after each step, as the walk built it (see kernel.walk); empty
    # for trees read from a trace, whose states are rebuilt from their sources (same tokens).
    walked: tuple[SeqState, ...] = ()
    _states: dict[int, SeqState] = field(default_factory=dict, repr=False, compare=False)

    lazy: ClassVar[bool] = False  # may be astronomically large: show it by reach, unfolded on demand

    # -- states ------------------------------------------------------------
    def state_of(self, src: int) -> SeqState:
        """The state a node holding `src` has: the root, or the state request src was made from
        (the root for every rule but streaming) with src's suffix."""
        if src == ROOT:
            return self.root
        if src not in self._states:
            r = self.requests[src]
            self._states[src] = self.state_of(r.parent).with_suffix(r.cut, r.proposal)
        return self._states[src]

    def cut_index(self, src: int) -> int:
        """Condition 1's cut index of a node holding `src` (root: T)."""
        return self.T if src == ROOT else self.requests[src].cut

    def _src_after(self, step: Step) -> int:
        req = self.decisions[step.decision].request
        return req if step.accepted and req is not None else step.src

    @property
    def final_state(self) -> SeqState:
        return self.states_after_steps()[-1] if self.steps else self.root

    def states_after_steps(self) -> list[SeqState]:
        if self.walked:
            return list(self.walked)
        return [self.state_of(self._src_after(s)) for s in self.steps]

    @property
    def transitions(self) -> int:
        return len(self.steps)

    @cached_property
    def path_nodes(self) -> frozenset[int]:
        """Ids of the nodes on the realized path, including the one where the walk stopped."""
        return frozenset(s.node for s in self.steps) | {self.stop_node}

    # -- nodes (each layout) ---------------------------------------------------
    def node_at(self, path: Path) -> NodeView | None:
        """The node reached from the root by `path`, or None if the round's tree does not contain it."""
        raise NotImplementedError

    def path_of(self, i: int) -> Path | None:
        """The edges from the root down to node i (None: no such node id)."""
        raise NotImplementedError

    def id_of(self, path: Path) -> int | None:
        """The id of the node at `path` (None where the layout holds no such node)."""
        raise NotImplementedError

    def node(self, i: int) -> NodeView | None:
        """The node with id i, or None if the round's tree does not contain it."""
        path = self.path_of(i) if i >= 0 else None
        return None if path is None else self.node_at(path)

    def child(self, i: int, accept: bool) -> int | None:
        """The id of node i's accept (or reject) child, if the tree has that node."""
        path = self.path_of(i)
        v = self.node_at(path + (accept,)) if path is not None else None
        return v.id if v is not None else None

    def parent_of(self, i: int) -> int | None:
        path = self.path_of(i)
        return self.id_of(path[:-1]) if path else None

    def count_nodes(self) -> int:
        """Number of nodes in the full prefetched tree (can be astronomically large)."""
        raise NotImplementedError

    def scored_nodes(self) -> Iterator[tuple[int, int, int, int]]:
        """(decision position, state source, depth, accepts on the way) of every scored node,
        once per distinct (decision, state) pair: the classifier's training examples."""
        raise NotImplementedError

    # -- shared walks over nodes -------------------------------------------------
    def children(self, i: int) -> list[NodeView]:
        """Accept child first, then reject child (those the tree has)."""
        path = self.path_of(i)
        if path is None:
            return []
        return [v for v in (self.node_at(path + (True,)), self.node_at(path + (False,))) if v is not None]

    def iter_nodes(self, keep: Callable[[NodeView], bool] = lambda v: True,
                   limit: int = 10_000) -> Iterator[NodeView]:
        """Depth-first walk from the root, descending only into nodes `keep` accepts."""
        stack = [self.node(0)]
        seen = 0
        while stack and seen < limit:
            v = stack.pop()
            if v is None or not (v.id == 0 or keep(v)):
                continue
            seen += 1
            yield v
            stack.extend(reversed(self.children(v.id)))


@dataclass(frozen=True)
class TableTree(RoundTree):
    """Node inputs and sequential steps: the nodes the rule touched, in a table keyed by id
    (the root is 0; each record names its parent and which child it is)."""

    table: dict[int, NodeRec] = field(default_factory=dict)

    @cached_property
    def _kids(self) -> dict[tuple[int, bool], int]:
        return {(r.parent, r.accept): v for v, r in self.table.items() if v != 0}

    def path_of(self, i: int) -> Path | None:
        if i not in self.table:
            return None
        bits = []
        while i != 0:
            rec = self.table[i]
            bits.append(rec.accept)
            i = rec.parent
        return tuple(reversed(bits))

    def id_of(self, path: Path) -> int | None:
        v: int | None = 0
        for accept in path:
            v = self._kids.get((v, accept))  # type: ignore[arg-type]
            if v is None:
                return None
        return v

    def node_at(self, path: Path) -> NodeView | None:
        i = self.id_of(path) if 0 in self.table else None
        if i is None:
            return None
        rec = self.table[i]
        reach, rounded = self._reach(path)
        dec = sc = None
        if rec.decision is not None:
            dec = self.decisions[rec.decision]
            if rec.status in (NodeStatus.EXPANDED, NodeStatus.UNREACHABLE):
                sc = self.scores.get((rec.decision, rec.src))
        return NodeView(i, rec.depth, path[-1] if path else None, rec.status, rec.src, rec.decision, dec, sc,
                        reach, rounded, i in self.path_nodes)

    def _reach(self, path: Path) -> tuple[float, bool]:
        reach, rounded = 1.0, True
        node = 0
        for accept in path:
            rec = self.table[node]
            sc = (self.scores.get((rec.decision, rec.src))
                  if rec.status == NodeStatus.EXPANDED and rec.decision is not None else None)
            if sc is None:
                return 0.0, False
            reach, rounded = _follow(reach, rounded, sc, accept)
            node = self._kids[(node, accept)]
        return reach, rounded

    def count_nodes(self) -> int:
        return len(self.table)

    def scored_nodes(self) -> Iterator[tuple[int, int, int, int]]:
        for v, rec in self.table.items():
            if (rec.status == NodeStatus.EXPANDED and rec.decision is not None
                    and (rec.decision, rec.src) in self.scores):
                yield rec.decision, rec.src, rec.depth, sum(self.path_of(v) or ())


@dataclass(frozen=True)
class LevelTree(RoundTree):
    """Decision inputs: one shared request per depth, nodes derived from their paths.

    Ids: the realized path's nodes are 0..len(steps) (step i sits at node i); any other
    node gets the next free id the first time someone looks at it.
    """

    quirk: bool = False  # BFS enqueues the reject child of a deferred node
    lazy: ClassVar[bool] = True
    _paths: list[Path] = field(default_factory=list, init=False, repr=False, compare=False)
    _ids: dict[Path, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _interned(self) -> tuple[list[Path], dict[Path, int]]:
        if not self._paths:
            bits = tuple(s.accepted for s in self.steps)
            for i in range(len(bits) + 1):
                self._ids[bits[:i]] = i
                self._paths.append(bits[:i])
        return self._paths, self._ids

    def path_of(self, i: int) -> Path | None:
        paths, _ = self._interned()
        return paths[i] if 0 <= i < len(paths) else None

    def id_of(self, path: Path) -> int | None:
        paths, ids = self._interned()
        if path not in ids:
            ids[path] = len(paths)
            paths.append(path)
        return ids[path]

    def _level_status(self, depth: int, src: int) -> tuple[NodeStatus, int | None]:
        if depth >= len(self.decisions):
            return NodeStatus.LEAF, None
        return (NodeStatus.EXPANDED if (depth, src) in self.scores else NodeStatus.DEFERRED), depth

    def node_at(self, path: Path) -> NodeView | None:
        src, reach, rounded, unreachable = ROOT, 1.0, True, False
        for depth, accept in enumerate(path):
            status, pos = self._level_status(depth, src)
            if status == NodeStatus.LEAF or (status == NodeStatus.DEFERRED and (accept or not self.quirk)):
                return None
            if status == NodeStatus.DEFERRED:
                unreachable, reach, rounded = True, 0.0, False
                continue
            assert pos is not None
            reach, rounded = _follow(reach, rounded, self.scores[(pos, src)], accept)
            if accept:
                src = self.decisions[pos].request  # type: ignore[assignment]
        depth = len(path)
        status, pos = self._level_status(depth, src)
        if unreachable and status == NodeStatus.EXPANDED:
            status = NodeStatus.UNREACHABLE
        sc = (self.scores.get((pos, src))
              if pos is not None and status in (NodeStatus.EXPANDED, NodeStatus.UNREACHABLE) else None)
        dec = self.decisions[pos] if pos is not None else None
        i = self.id_of(path)
        assert i is not None
        return NodeView(i, depth, path[-1] if path else None, status, src, pos, dec, sc, reach, rounded,
                        i in self.path_nodes)

    @cached_property
    def _count(self) -> int:
        # bottom-up over levels: the nodes below a node depend only on its (depth, state source)
        D = len(self.decisions)
        below: dict[int, int] = {}  # state source -> nodes in the subtree at the level below
        for depth in range(D, -1, -1):
            srcs = [ROOT] + [self.decisions[j].request for j in range(min(depth, D))]
            here: dict[int, int] = {}
            for src in srcs:
                assert src is not None
                status, pos = self._level_status(depth, src)
                n = 1
                if status == NodeStatus.EXPANDED:
                    assert pos is not None
                    req = self.decisions[pos].request
                    n += below[req] + below[src]  # type: ignore[index]
                elif status == NodeStatus.DEFERRED and self.quirk:
                    n += below[src]
                here[src] = n
            below = here
        return below[ROOT]

    def count_nodes(self) -> int:
        return self._count

    def scored_nodes(self) -> Iterator[tuple[int, int, int, int]]:
        # a (decision, state) pair has no single path here: `accepts` is 1 below an accept
        for pos, src in self.scores:
            yield pos, src, self.decisions[pos].depth, int(src != ROOT)
