"""The streaming rule (DESIGN.md sec 7): speculation that never waits for a round.

With decision-keyed inputs, the request sequential PowerMH makes at decision d
from state x is a function of (d, x's tokens before the cut): its seed, its
temperature and its horizon are fixed by d.  So proposals can be computed at
any time and in any order; the chain stays exact as long as the walker, at
decision k holding state x, uses only the proposal of exactly that request.

`StreamChain` holds one chain's block:
- the walker takes decisions strictly in order, each as soon as the proposal
  its own state asks for has finished, with the unchanged MH rule;
- the scheduler keeps up to N requests live, chosen by their predicted chance
  of being needed.  It expands a speculation tree from the walker's state
  best-first by reach probability (eqs. 14/17/19 made continuous): a decision
  whose proposal has finished branches with its exact acceptance probability
  A; one still decoding with the epsilon-class classifier's h+, its accept
  branch counting only for later requests cut before its own cut (the rest of
  that state is still being decoded).  A request is wanted with the summed
  reach of the tree nodes that ask for it, i.e. the model's probability that
  the walker will need it;
- a live request that no state the walker can still reach would ask for is
  aborted: its decision is behind the walker, or (uniform cuts) its prefix
  differs from the walker's state at a position no later decision can cut.

Nothing here calls the engine: the session's engine loop submits, aborts and
delivers, and this object only answers what to submit and what to abort.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from presto_tui.runtime.core.classifier import CertaintyClassifier, node_features
from presto_tui.runtime.core.mh import Score, accepts
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import DecisionInputs, decision_inputs
from presto_tui.runtime.core.types import Proposal, Request, SeqState
from presto_tui.runtime.prefetch.tree import (
    ABORTED,
    EXPANDED,
    LEAF,
    LIVE,
    ROOT,
    DecisionRec,
    NodeRec,
    RequestRec,
    Step,
    TableTree,
)
from presto_tui.runtime.samplers.families import SamplerFamily

MIN_REACH = 1e-4  # speculation below this predicted reach is not worth a slot
EPOCH_NODES = 400  # an epoch's recorded tree: at most this many nodes (the path always)
# An epoch also ends after this many decisions without an accept (a long run of rejects), so that
# its recorded tree, and the screen drawing it, stay small whatever K is.
EPOCH_DECISIONS = 256

PLANNED, RUNNING, FINISHED, ABANDONED = "planned", "live", "finished", "aborted"


class Want:
    """What the walker asks for at decision d from a state whose tokens before `cut` are `prefix`.

    A dictionary key looked up thousands of times per scheduling pass: its hash (over the
    whole prefix) is computed once.
    """

    __slots__ = ("_hash", "cut", "d", "prefix")

    def __init__(self, d: int, cut: int, prefix: tuple[int, ...]):
        self.d, self.cut, self.prefix = d, cut, prefix
        self._hash = hash((d, cut, prefix))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Want) and self._hash == other._hash and self.d == other.d
                and self.cut == other.cut and self.prefix == other.prefix)

    def __repr__(self) -> str:
        return f"Want(d={self.d}, cut={self.cut}, prefix=<{len(self.prefix)} tokens>)"


@dataclass(eq=False)
class Group:
    """The requests of one Want (MultiTryMH: one per candidate) and what became of them."""

    want: Want
    requests: tuple[Request, ...]
    id: int  # session-unique, for events and traces
    status: str = PLANNED
    handles: list[int | None] = field(default_factory=list)
    proposals: list[Proposal | None] = field(default_factory=list)
    selected: int | None = None  # MultiTryMH's J, drawn once when all candidates have finished
    decoded: int = 0  # tokens decoded before an abort

    @property
    def finished(self) -> bool:
        return self.status == FINISHED

    @property
    def size(self) -> int:
        return len(self.requests)


@dataclass(frozen=True)
class Epoch:
    """Decisions walked from one state, up to the accept that moved it (or the block's end)."""

    k0: int
    root: SeqState
    walked: list[Walked]
    stop_reason: str  # "accepted", "cap" (the block's end) or "length" (EPOCH_DECISIONS rejects)


@dataclass(frozen=True)
class Walked:
    """One decision the walker took."""

    k: int
    group: Group
    cut: int
    score: Score
    accepted: bool
    before: SeqState
    after: SeqState


def _merge(profile: Sequence[tuple[int, float]]) -> tuple[tuple[tuple[int, float], ...], float]:
    """Reach shares by ceiling, equal ceilings summed, shares below MIN_REACH dropped; and their total."""
    by: dict[int, float] = {}
    for ceiling, m in profile:
        by[ceiling] = by.get(ceiling, 0.0) + m
    merged = tuple((c, m) for c, m in sorted(by.items(), reverse=True) if m >= MIN_REACH)
    return merged, sum(m for _, m in merged)


class StreamChain:
    """Walker and scheduler of one chain's block (decision inputs; see the module docstring)."""

    def __init__(self, params: SamplerParams, family: SamplerFamily, classifier: CertaintyClassifier,
                 block: int, state: SeqState, ids: Callable[[], int] | None = None):
        self.params, self.family, self.classifier = params, family, classifier
        self.block = block
        self.T = state.T
        self.K = params.steps
        self.k = 0
        self.state = state
        self.groups: dict[Want, Group] = {}
        self._ids = ids or itertools.count().__next__
        self._inputs: dict[int, DecisionInputs] = {}
        self._cuts: dict[int, int] = {}  # state-independent cut laws: decision -> cut
        self._h: dict[tuple[int, int], float] = {}  # (depth ahead of the walker, cut) -> h+
        # Groups finished so far: an expansion that found fewer wants than free slots (the tree above
        # MIN_REACH exhausted) is repeated only once `refill_at` more have finished (each adds a
        # branch), or the walker's state has moved.
        self._news = 0
        self._exhausted_at: int | None = None
        self._root_wants: dict[int, Want] = {}  # decision -> what the walker's state asks for
        self._frozen_k, self._frozen_min = -1, [0]
        # (group id, id(state)) -> (A, J, accept state, state): the finished part of the speculation
        # tree, kept between scheduling passes until the walker's state moves.  Holding the state
        # keeps its id from being reused for another object.
        self._A: dict[tuple[int, int], tuple[float, int, SeqState, SeqState]] = {}
        self.epoch_start = (0, state)  # (k, state) where the current epoch began
        self.epoch_walked: list[Walked] = []
        self.closed: list[Epoch] = []  # epochs the walk ended, for the driver to record

    # -- decisions ---------------------------------------------------------------------
    def inputs(self, d: int) -> DecisionInputs:
        if d not in self._inputs:
            self._inputs[d] = decision_inputs(self.params.seed, self.block, d)
        return self._inputs[d]

    def want_at(self, d: int, state: SeqState) -> Want:
        """The request group decision d asks for from `state`."""
        if state is self.state:  # the walker's own state: every scheduling pass asks
            if d not in self._root_wants:
                self._root_wants[d] = self._want_at(d, state)
            return self._root_wants[d]
        return self._want_at(d, state)

    def _want_at(self, d: int, state: SeqState) -> Want:
        law = self.family.law
        cut = law.cut(self.inputs(d).cut_u, state) if law.state_dependent else self._cut(d)
        return Want(d, cut, state.tokens[:cut])

    def _cut(self, d: int) -> int:
        """A state-independent law's cut of decision d (PowerMH, MultiTryMH)."""
        if d not in self._cuts:
            self._cuts[d] = self.family.law.cut(self.inputs(d).cut_u, self.state)
        return self._cuts[d]

    def _group(self, want: Want, state: SeqState) -> Group:
        g = self.groups.get(want)
        if g is None:
            prefix = state.prefix(want.cut)
            reqs = tuple(Request(prefix, self.T - want.cut, seed, tau, self.family.score_taus)
                         for seed, tau in self.family.draws(self.inputs(want.d)))
            g = self.groups[want] = Group(want, reqs, self._ids(), handles=[None] * len(reqs),
                                          proposals=[None] * len(reqs))
        return g

    def _selected(self, g: Group) -> int:
        if g.selected is None:
            g.selected = self.family.select(self.inputs(g.want.d), g.proposals)  # type: ignore[arg-type]
        return g.selected

    def _score(self, g: Group, state: SeqState) -> tuple[Score, int]:
        J = self._selected(g)
        return self.family.score(state, g.want.cut, self.inputs(g.want.d), g.proposals, J), J  # type: ignore[arg-type]

    def _accept(self, g: Group, state: SeqState) -> tuple[float, int, SeqState]:
        """(A, J, the state after accepting) of finished group g from a complete `state`."""
        key = (g.id, id(state))
        if key not in self._A:
            sc, J = self._score(g, state)
            acc = state.with_suffix(g.want.cut, g.proposals[J])  # type: ignore[arg-type]
            self._A[key] = (sc.accept_prob, J, acc, state)
        A, J, acc, _ = self._A[key]
        return A, J, acc

    def _h_pred(self, d: int, cut: int) -> float:
        key = (d - self.k, cut)
        if key not in self._h:
            self._h[key] = self.classifier.branch_prob(node_features(cut, self.T, d - self.k, 0, self.T))
        return self._h[key]

    # -- the walker -------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.k >= self.K

    def walk(self) -> list[Walked]:
        """Take every decision whose proposal is available, in order."""
        out = []
        while self.k < self.K:
            want = self.want_at(self.k, self.state)
            g = self.groups.get(want)
            if g is None or not g.finished:
                break
            sc, J = self._score(g, self.state)
            accepted = accepts(self.inputs(self.k).accept_u, sc)
            after = self.state.with_suffix(want.cut, g.proposals[J]) if accepted else self.state  # type: ignore[arg-type]
            w = Walked(self.k, g, want.cut, sc, accepted, self.state, after)
            out.append(w)
            self.epoch_walked.append(w)
            self.state, self.k = after, self.k + 1
            long = len(self.epoch_walked) >= EPOCH_DECISIONS
            if accepted or self.k >= self.K or long:  # the state moved (or the block ended): a new epoch
                (k0, root) = self.epoch_start
                reason = "cap" if self.k >= self.K else "accepted" if accepted else "length"
                self.closed.append(Epoch(k0, root, self.epoch_walked, reason))
                self.epoch_start, self.epoch_walked = (self.k, self.state), []
                self._A.clear()  # scores against the old state's branches are of no more use
                self._root_wants.clear()
                self._exhausted_at = None  # a new root: a new tree
        return out

    # -- the scheduler ------------------------------------------------------------------------
    def plan(self, budget: int, refill_at: int = 1) -> tuple[list[Group], list[Group]]:
        """(groups to submit, groups to abort) so that about `budget` requests are live.

        Aborts are decided at every call (cheap); the speculation tree is expanded only when
        at least `refill_at` slots are free, or the walker's own request is not live.
        """
        aborts = [g for g in self.groups.values() if g.status == RUNNING and not self._reachable(g.want)]
        live = sum(g.size for g in self.groups.values() if g.status == RUNNING and g not in aborts)
        mine = self.groups.get(self.want_at(self.k, self.state))
        covered = mine is not None and mine.status in (RUNNING, FINISHED)
        exhausted = self._exhausted_at is not None and self._news - self._exhausted_at < refill_at
        if covered and (budget - live < refill_at or exhausted):
            return [], aborts
        wanted = self._expand(budget - live)
        fresh = sum(1 for w in wanted if (g := self.groups.get(w)) is None or g.status in (PLANNED, ABANDONED))
        self._exhausted_at = self._news if fresh <= budget - live else None
        submit = []
        for want, _ in sorted(wanted.items(), key=lambda kv: -kv[1]):
            g = self.groups.get(want)
            if g is not None and g.status == ABANDONED:  # wanted again: aborted only if unreachable,
                g.status = PLANNED  # so this should not happen; never leave the walker waiting for it
                g.proposals, g.decoded = [None] * g.size, 0
            if g is not None and g.status != PLANNED:
                continue
            g = self._group(want, self._state_for(want))
            if live + g.size > budget and want.d != self.k:
                continue  # the walker's own request goes even over budget
            submit.append(g)
            live += g.size
            if live >= budget:
                break
        self._forget_behind()
        return submit, aborts

    def _state_for(self, want: Want) -> SeqState:
        """A state with the want's prefix (only its tokens before the cut are used)."""
        return SeqState(self.state.prompt, want.prefix)

    def _expand(self, free: int) -> dict[Want, float]:
        """Best-first over the speculation tree: the summed reach of the nodes asking for each Want.

        A node is a decision and a state known in full, with its reach split by how much of the
        state it really covers: a decision whose proposal is still decoding branches with the
        classifier's h+ (eq. 14), and its accept branch holds the same state only up to that
        decision's cut (the rest is the proposal being decoded).  Rather than a node of its own
        (which could ask for nothing the reject branch does not), that branch is kept as a share
        of the node's reach that counts only for requests cut at or before it: a `profile` of
        (ceiling, reach) pairs.  A finished proposal branches with its exact acceptance
        probability.  The expansion stops once it has seen enough wants that could take a free
        slot (best first, so those are the best).
        """
        wanted: dict[Want, float] = {}
        if free <= 0:  # no slot to fill: only the walker's own want may go over the budget
            return {self.want_at(self.k, self.state): 1.0}
        order = itertools.count()
        T, K = self.T, self.K
        Profile = tuple[tuple[int, float], ...]
        heap: list[tuple[float, int, int, SeqState, Profile]] = [(-1.0, next(order), self.k, self.state, ((T, 1.0),))]
        fresh = 0  # wants seen that nothing computes yet
        push, pop, groups = heapq.heappush, heapq.heappop, self.groups
        while heap and fresh <= free:
            neg, _, d, st, profile = pop(heap)
            if -neg < MIN_REACH:
                break
            if d >= K:
                continue
            want = self.want_at(d, st)
            if len(profile) == 1:  # most nodes: the whole reach covers the state
                reach = profile[0][1] if profile[0][0] >= want.cut else 0.0
            else:
                reach = sum(m for ceiling, m in profile if ceiling >= want.cut)
            if reach < MIN_REACH:
                continue
            g = groups.get(want)
            seen = wanted.get(want)
            if seen is None:  # a want two nodes ask for (same prefix) takes one slot
                fresh += g is None or g.status in (PLANNED, ABANDONED)
            wanted[want] = reach if seen is None else seen + reach
            if g is not None and g.status == FINISHED:
                # only the share of the node that holds this prefix reaches this proposal
                A, _, acc = self._accept(g, st)
                rest = tuple((c, m) for c, m in profile if c < want.cut)
                if A > 0.0:
                    push(heap, (-reach * A, next(order), d + 1, acc, ((T, reach * A),)))
                keep = ((T, reach * (1.0 - A)),) + rest if A < 1.0 else rest
                if keep:
                    merged, total = _merge(keep)
                    push(heap, (-total, next(order), d + 1, st, merged))
                continue
            h = self._h_pred(d, want.cut)
            split = []
            for ceiling, m in profile:
                if ceiling >= want.cut:
                    split += [(ceiling, m * (1.0 - h)), (want.cut, m * h)]  # rejected / accepted, unseen
                else:
                    split.append((ceiling, m))
            merged, total = _merge(split)
            push(heap, (-total, next(order), d + 1, st, merged))
        return wanted

    def _reachable(self, want: Want) -> bool:
        """False only if no state the walker can still reach asks for `want`."""
        if want.d < self.k:
            return False
        if want.d == self.k:
            return want == self.want_at(self.k, self.state)
        if self.family.law.state_dependent:
            return True  # later cuts depend on states not known yet
        # positions before every cut of decisions k..d-1 can no longer change
        n = min(self._frozen(want.d), want.cut)
        return self.state.tokens[:n] == want.prefix[:n]

    def _frozen(self, d: int) -> int:
        """min(cut_k, ..., cut_{d-1}) for a state-independent law: before it no accept can change a token."""
        if self._frozen_k != self.k:
            self._frozen_k, self._frozen_min = self.k, [self.T]
        mins = self._frozen_min  # mins[i] = min of the cuts of decisions k..k+i-1
        while len(mins) <= d - self.k:
            mins.append(min(mins[-1], self._cut(self.k + len(mins) - 1)))
        return mins[d - self.k]

    def _forget_behind(self) -> None:
        """Drop what no state can ask for again (the current epoch's groups stay for its record)."""
        horizon = self.epoch_start[0]
        for want in [w for w, g in self.groups.items() if w.d < horizon and g.status != RUNNING]:
            del self.groups[want]

    # -- the engine loop's reports ---------------------------------------------------------------
    def issued(self, g: Group, j: int, handle: int) -> None:
        g.status = RUNNING

    def delivered(self, g: Group, j: int, proposal: Proposal) -> bool:
        """A candidate finished; True when its whole group has."""
        g.proposals[j] = proposal
        g.handles[j] = None
        if all(p is not None for p in g.proposals):
            g.status = FINISHED
            self._news += 1
            return True
        return False

    @property
    def live_requests(self) -> int:
        return sum(g.size for g in self.groups.values() if g.status == RUNNING)

    # -- what an epoch looked like --------------------------------------------------------------
    def epoch_tree(self, k0: int, root: SeqState, walked: list[Walked], progress: Callable[[Group], int],
                   stop_reason: str) -> TableTree:
        """The speculation tree of an epoch (decisions walked from one state), as a TableTree.

        Nodes: the walked path, then every node whose request finished (expanded with its
        exact A) and the live or aborted requests at its children, by reach, up to EPOCH_NODES.
        """
        decisions: list[DecisionRec] = []
        requests: list[RequestRec] = []
        req_index: dict[tuple[int, int], int] = {}  # (group id, candidate) -> request index
        scores: dict[tuple[int, int], Score] = {}
        table: dict[int, NodeRec] = {}
        walked_at = {w.k: w for w in walked}

        def request_ids(g: Group, parent: int) -> list[int]:
            out = []
            for j, req in enumerate(g.requests):
                key = (g.id, j)
                if key not in req_index:
                    prop = g.proposals[j] if g.finished else None
                    done = None if g.finished else (g.decoded if g.status == ABANDONED else progress(g))
                    req_index[key] = len(requests)
                    requests.append(RequestRec(
                        len(decisions), g.want.cut, req.seed, prop or Proposal.tokens_only(()), req.tau,
                        parent, done))
                out.append(req_index[key])
            return out

        # Best-first by reach; a node gets its id when it is recorded.  The walked path is always
        # recorded (whatever its reach); other nodes only while the table has room.
        order = itertools.count()
        # -reach, order, parent id, accept child?, on the walked path?, decision, state, state source
        heap: list[tuple[float, int, int, bool, bool, int, SeqState, int]] = [
            (-1.0, next(order), -1, False, True, k0, root, ROOT)]
        path_ids: list[int] = []
        while heap:
            neg, _, parent, accept, on_path, d, st, src = heapq.heappop(heap)
            if len(table) >= EPOCH_NODES and not on_path:
                continue
            v = len(table)
            depth = d - k0
            if on_path:
                path_ids.append(v)
            want = self.want_at(d, st) if d < self.K else None
            g = self.groups.get(want) if want is not None else None
            if want is None or g is None or g.status == PLANNED:
                table[v] = NodeRec(depth, LEAF, src, None, parent, accept)
                continue
            inp = self.inputs(d)
            ids = request_ids(g, src)
            pos = len(decisions)
            status = {FINISHED: EXPANDED, RUNNING: LIVE, ABANDONED: ABORTED}[g.status]
            J = self._selected(g) if g.finished else 0
            decisions.append(DecisionRec(d, depth, want.cut, inp.cut_u, inp.seed, inp.accept_u,
                                         ids[J], None, v, tuple(ids) if self.family.multiple else ()))
            table[v] = NodeRec(depth, status, src, pos, parent, accept)
            if status != EXPANDED:
                continue
            on_walk = walked_at.get(d) if on_path else None
            sc = on_walk.score if on_walk is not None else self._score(g, st)[0]
            scores[(pos, src)] = sc
            reach = -neg
            acc = st.with_suffix(want.cut, g.proposals[J])  # type: ignore[arg-type]
            for child_accept, p, cst, csrc in ((True, sc.accept_prob, acc, ids[J]),
                                               (False, 1.0 - sc.accept_prob, st, src)):
                child_on_path = on_walk is not None and on_walk.accepted == child_accept
                if child_on_path or (p > 0.0 and reach * p >= MIN_REACH):
                    heapq.heappush(heap, (-reach * p, next(order), v, child_accept, child_on_path, d + 1, cst,
                                          csrc))
        steps = []
        for node, w in zip(path_ids, walked):
            rec = table[node]
            assert rec.decision is not None
            steps.append(Step(node, rec.decision, rec.src, w.accepted))
        node = path_ids[len(walked)]
        return TableTree(
            rule="stream", inputs="decision", T=self.T, k0=k0, depth_cap=self.K - k0, root=root,
            decisions=tuple(decisions), requests=tuple(requests), scores=scores, steps=tuple(steps),
            stop_node=node, stop_reason=stop_reason, walked=tuple(w.after for w in walked), table=table)
