"""What a person sees of the streaming rule: one recorded tree per epoch.

An epoch is the decisions walked from one state up to the accept that moves it
(a reject changes nothing a reader can see, an accept changes the text), or to
the block's end, or EPOCH_DECISIONS decisions without an accept (a long run of
rejects, cut so that a recorded tree and the screen drawing it stay small
whatever K is).  Its tree is the speculation the scheduler worked on from that
state: the walked path, every node whose proposal finished (with its exact A),
and the live or aborted requests at their children, by reach.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from presto_tui.runtime.core.mh import Score
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.prefetch.bestfirst import best_first
from presto_tui.runtime.prefetch.stream.decisions import Decisions
from presto_tui.runtime.prefetch.stream.requests import Group, RequestBook, RequestState
from presto_tui.runtime.prefetch.stream.speculation import MIN_REACH
from presto_tui.runtime.prefetch.stream.walker import Scorer, Walked
from presto_tui.runtime.prefetch.tree import ROOT, DecisionRec, NodeRec, NodeStatus, RequestRec, Step, TableTree

EPOCH_NODES = 400  # an epoch's recorded tree: at most this many nodes (the path always)
EPOCH_DECISIONS = 256  # an epoch ends after this many decisions without an accept

NODE_STATUS = {RequestState.FINISHED: NodeStatus.EXPANDED, RequestState.LIVE: NodeStatus.LIVE,
               RequestState.ABORTED: NodeStatus.ABORTED}


@dataclass(frozen=True)
class Epoch:
    k0: int
    root: SeqState
    walked: list[Walked]
    stop_reason: str  # "accepted", "cap" (the block's end) or "length" (EPOCH_DECISIONS rejects)


@dataclass(frozen=True)
class _Node:
    parent: int
    accept: bool
    on_path: bool
    d: int
    state: SeqState
    src: int


class EpochRecorder:
    def __init__(self, decisions: Decisions, book: RequestBook, scorer: Scorer, state: SeqState):
        self.decisions, self.book, self.scorer = decisions, book, scorer
        self.epoch_start = (0, state)  # (k, state) where the current epoch began
        self.epoch_walked: list[Walked] = []
        self.closed: list[Epoch] = []  # epochs the walk ended, for the driver to record

    def begin(self, state: SeqState) -> None:
        """The block's whole start state, once its extension arrived (the block began before it)."""
        self.epoch_start = (0, state)

    def restart(self, k: int, state: SeqState) -> None:
        """The chain's state was replaced at decision k (a barrier): the epoch open so far closes there (its
        tree from the old state), a new one begins from `state`."""
        if self.epoch_walked:
            k0, root = self.epoch_start
            self.closed.append(Epoch(k0, root, self.epoch_walked, "cap"))
        self.epoch_start, self.epoch_walked = (k, state), []

    def observe(self, walked: list[Walked]) -> None:
        """Close the epochs the walked decisions ended."""
        K = self.decisions.K
        for w in walked:
            self.epoch_walked.append(w)
            end = w.k + 1 >= K
            if w.accepted or end or len(self.epoch_walked) >= EPOCH_DECISIONS:
                k0, root = self.epoch_start
                reason = "cap" if end else "accepted" if w.accepted else "length"
                self.closed.append(Epoch(k0, root, self.epoch_walked, reason))
                self.epoch_start, self.epoch_walked = (w.k + 1, w.after), []

    def in_progress(self, progress: Callable[[Group, int], int]) -> TableTree:
        k0, root = self.epoch_start
        return self.tree(Epoch(k0, root, list(self.epoch_walked), NodeStatus.LEAF), progress)

    def tree(self, epoch: Epoch, progress: Callable[[Group, int], int]) -> TableTree:
        """`progress(g, j)`: tokens candidate j of a live group has decoded so far."""
        # (nodes numbered as they are recorded)
        k0, root, walked = epoch.k0, epoch.root, epoch.walked
        decisions: list[DecisionRec] = []
        requests: list[RequestRec] = []
        req_index: dict[tuple[int, int], int] = {}  # (group id, candidate) -> request index
        scores: dict[tuple[int, int], Score] = {}
        table: dict[int, NodeRec] = {}
        walked_at = {w.k: w for w in walked}
        path_ids: list[int] = []
        K = self.decisions.K

        def request_ids(g: Group, parent: int) -> list[int]:
            out = []
            for j, req in enumerate(g.requests):
                key = (g.id, j)
                if key not in req_index:
                    prop = g.proposals[j] if g.finished else None
                    done = None if g.finished else (g.decoded[j] if g.state is RequestState.ABORTED else progress(g, j))
                    req_index[key] = len(requests)
                    requests.append(RequestRec(len(decisions), g.want.cut, req.seed, prop or Proposal.tokens_only(()),
                                               req.tau, parent, done))
                out.append(req_index[key])
            return out

        def visit(reach: float, n: _Node):
            if len(table) >= EPOCH_NODES and not n.on_path:
                return None, ()
            v = len(table)
            depth = n.d - k0
            if n.on_path:
                path_ids.append(v)
            want = self.decisions.want_at(n.d, n.state) if n.d < K else None
            g = self.book.get(want) if want is not None else None
            if want is None or g is None or g.state is RequestState.PLANNED:
                table[v] = NodeRec(depth, NodeStatus.LEAF, n.src, None, n.parent, n.accept)
                return None, ()
            inp = self.decisions.inputs(n.d)
            ids = request_ids(g, n.src)
            pos = len(decisions)
            status = NODE_STATUS[g.state]
            J = self.scorer.selected(g) if g.finished else 0
            decisions.append(DecisionRec(n.d, depth, want.cut, inp.cut_u, inp.seed, inp.accept_u, ids[J], None, v,
                                         tuple(ids) if self.decisions.family.multiple else ()))
            table[v] = NodeRec(depth, status, n.src, pos, n.parent, n.accept)
            if status != NodeStatus.EXPANDED:
                return None, ()
            on_walk = walked_at.get(n.d) if n.on_path else None
            sc = on_walk.score if on_walk is not None else self.scorer.score(g, n.state)[0]
            scores[(pos, n.src)] = sc
            acc = n.state.with_suffix(want.cut, g.proposals[J])  # type: ignore[arg-type]
            children = []
            for accept, p, cst, csrc in ((True, sc.accept_prob, acc, ids[J]), (False, 1.0 - sc.accept_prob, n.state,
                                                                               n.src)):
                child_on_path = on_walk is not None and on_walk.accepted == accept
                if child_on_path or (p > 0.0 and reach * p >= MIN_REACH):
                    children.append((reach * p, _Node(v, accept, child_on_path, n.d + 1, cst, csrc)))
            return None, children

        for _ in best_first(_Node(-1, False, True, k0, root, ROOT), visit):
            pass
        steps = []
        for node, w in zip(path_ids, walked):
            rec = table[node]
            assert rec.decision is not None
            steps.append(Step(node, rec.decision, rec.src, w.accepted))
        return TableTree(
            rule="stream", inputs="decision", T=self.decisions.T, k0=k0, depth_cap=K - k0, root=root,
            decisions=tuple(decisions), requests=tuple(requests), scores=scores, steps=tuple(steps),
            stop_node=path_ids[len(walked)], stop_reason=epoch.stop_reason, walked=tuple(w.after for w in walked),
            table=table)
