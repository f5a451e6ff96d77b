"""The streaming rule on the engine loop: a `StreamBlock` per block, a speculation policy across blocks.

With `--speculate extension` (and a state-independent cut law) a block begins as soon as its
extension is issued, or, decoded ahead, when the block before it ends: the extension is a
proposal in flight (`StreamBlock`'s `extension`), so the first decisions' proposals start once
the tokens before their cuts exist; the walker waits for the whole state.  Its model call is
`extend-overlap` (or `extend-ahead`), its wall time from the block's beginning to its arrival,
and the block's first epoch runs from there, so that epochs and extensions still add up to the
session's engine time.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

from presto_tui.runtime.core.classifier import DEFAULT_CLASSIFIER
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.prefetch.stream import Epoch, Group, StreamBlock, Want, speculation_policy
from presto_tui.runtime.prefetch.stream.moves import MoveRates
from presto_tui.runtime.prefetch.stream.policy import SharedPolicy
from presto_tui.runtime.prefetch.stream.refusals import Refusals
from presto_tui.runtime.prefetch.stream.requests import RequestBook
from presto_tui.runtime.prefetch.stream.shared import Load, SharedBudget
from presto_tui.runtime.session.cost import PRIOR_SLOPE
from presto_tui.runtime.session.driver import EXTEND, Driver, GroupTag, Tag
from presto_tui.runtime.session.events import (
    BlockStart,
    DecisionWalked,
    Event,
    LiveTree,
    ModelCall,
    RequestEvent,
    RequestKind,
    RoundDone,
)
from presto_tui.runtime.session.metrics import transition


class StreamDriver(Driver):
    def __init__(self, *args, ids: Callable[[], int] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.blk: StreamBlock | None = None
        self._ids = ids or itertools.count().__next__
        self.policy = speculation_policy(self.params.budget, self.params.budget_policy, self._load, self._market)
        self._moves: MoveRates | None = None  # the chain's, across its blocks (the shared policy's)
        self._epoch_t0 = 0.0
        self._epochs = 0
        self._sched_s = 0.0
        self._dirty = False  # something changed since the policy last planned
        self._refusals = Refusals()  # how long each want waited refused (the critical path's causes)
        self._ext_times: dict[int, list[float]] = {}  # next blocks' extension groups: [issued, finished]
        # the block's own extension while it decodes: (group, issued at, the block began at, purpose)
        self._own_ext: tuple[Group, float, float, str] | None = None
        self.overlaps = "extension" in self.params.speculate and not self.family.law.state_dependent

    def _load(self) -> Load:
        """The engine loop's learned step cost and the chains on it now."""
        if self.cost is None:
            return Load(1.0, PRIOR_SLOPE, chains=self.peers())
        a, b, p = self.cost.plane()
        return Load(a, b, p, self.cost.turnover, self.peers())

    def _market(self, reaches: Sequence[float] | None) -> float:
        """Offer the engine's shared budget what this chain would keep; the price of a slot."""
        if self.budget is None:  # (not on an engine loop: the chain alone)
            self.budget = SharedBudget(self._load)
        return self.budget.offer(self, reaches)

    def _decoded(self, g: Group) -> tuple[int, ...]:
        h = g.handles[0]
        return self.engine.partial(h) if h is not None else ()

    def begin_block(self, state: SeqState, extension: Group | None = None) -> None:
        """`extension`: the block's own, still decoding (the block begins before it arrives)."""
        if self._moves is None and isinstance(self.policy, SharedPolicy):  # it learns how often decisions move
            self._moves = MoveRates(self.budget.moves if self.budget is not None else None)
        self.blk = StreamBlock(self.params, self.family, self.classifier or DEFAULT_CLASSIFIER, self.block, state,
                               self.policy, book=RequestBook(self._ids), decoded=self._decoded, extension=extension,
                               moves=self._moves)
        self.blk.walker.stop = self.stop_in_block()  # a barrier: the walker waits there (speculation goes on)
        self._epoch_t0 = self.clock()
        self._schedule()

    def _extend(self) -> None:
        """The block's extension; overlapped, the block begins with it (as a proposal in flight)."""
        if not self.overlaps:
            super()._extend()
            return
        req = self.extension_request()
        g = Group(Want(self.params.steps, self.state.T, self.state.tokens), (req,), self._ids(), handles=[None],
                  proposals=[None], decoded=[0])
        now = self.clock()
        self._own_ext = (g, now, now, "extend-overlap")
        self.begin_block(self.state, extension=g)
        self._submit.append((GroupTag(g, 0), req))

    def _own_extension_arrived(self, g: Group) -> None:
        assert self.blk is not None and self._own_ext is not None
        _, issued, began, purpose = self._own_ext
        self._own_ext = None
        now = self.clock()
        proposal = g.proposals[0]
        assert proposal is not None
        self.emit(ModelCall(self.block, -1, purpose, 1, len(proposal.tokens), now - began, issued, now))
        L = self.state.T
        self.state = self.blk.extended(proposal)
        self.emit(BlockStart(self.block, L, self.state.T, proposal.tokens, began))
        self._epoch_t0 = now  # the block's epochs from here: the extension's time is its call's

    def _schedule(self) -> None:
        blk = self.blk
        assert blk is not None
        t0 = time.perf_counter()
        # an abort an earlier pass planned that the engine has not made yet is called off where the walker can
        # reach its group again: a member waiting at a barrier speculates from its state, and the barrier may
        # hand it back one it had left (the group is still live in the book: no pass would issue it again)
        self._abort = [h for h in self._abort
                       if not (isinstance(t := self._owned.get(h), GroupTag) and blk.book.get(t.group.want) is t.group
                               and blk.reachable(t.group.want))]
        plan = blk.plan()
        if plan.expanded:
            self._refusals.passed(self.clock(), plan.refused, blk.k)
        self._sched_s += time.perf_counter() - t0
        for g in plan.abort:
            self._abort.extend(h for h in g.handles if h is not None)
        # a group planned by an earlier pass that the engine has not taken yet is planned still (a block
        # begun and a growing tree both plan within one engine step): it goes to the engine once
        queued = {id(t.group) for t, _ in self._submit if isinstance(t, GroupTag)}
        for g in plan.submit:
            if id(g) not in queued:
                self._submit.extend((GroupTag(g, j), req) for j, req in enumerate(g.requests))
        self._dirty = False

    def on_submitted(self, tag: Tag, handle: int) -> None:
        assert isinstance(tag, GroupTag) and self.blk is not None
        g = tag.group
        if self.blk.issued(g, tag.candidate, handle) and g is not self.blk.pending:  # (an extension's: its call)
            now = self.clock()
            if g.want.d >= self.blk.decisions.K:
                self._ext_times[g.id] = [now, now]
            self._request_event(RequestKind.ISSUED, g, 0, self._refusals.issued(g.want, now))

    def on_delivered(self, tag: Tag, handle: int, proposal: Proposal) -> None:
        assert isinstance(tag, GroupTag)
        g = tag.group
        if self.blk is not None and g is self.blk.pending:
            self.blk.delivered(g, tag.candidate, proposal)
            self._own_extension_arrived(g)
        elif self.blk is not None and self.blk.delivered(g, tag.candidate, proposal):
            if g.id in self._ext_times:
                self._ext_times[g.id][1] = self.clock()
            self._request_event(RequestKind.FINISHED, g, sum(len(p.tokens) for p in g.proposals if p is not None))
        self._dirty = True

    def on_aborted(self, tag: Tag, handle: int, decoded: int) -> None:
        assert isinstance(tag, GroupTag)
        if self.blk is not None and self.blk.aborted(tag.group, tag.candidate, decoded):
            self._request_event(RequestKind.ABORTED, tag.group, sum(tag.group.decoded))
        self._dirty = True

    def _request_event(self, kind: RequestKind, g: Group, tokens: int, waited: dict | None = None) -> None:
        blk = self.blk
        live = blk.book.live if blk is not None else 0
        purpose = "extend" if blk is not None and g.want.d >= blk.decisions.K else "propose"
        self.emit(RequestEvent(kind, self.block, g.id, g.want.d, g.want.cut, g.size, tokens, self.clock(),
                                      live, purpose, waited or {}))

    def advance_block(self) -> None:
        blk = self.blk
        if blk is None:
            return
        t0 = time.perf_counter()
        walked = blk.walk()
        self._sched_s += time.perf_counter() - t0
        for w in walked:
            self.emit(DecisionWalked(self.block, w.k, w.cut, w.group.id, w.accepted, w.score.accept_prob,
                                            w.score.eps_class, self.clock()))
            self.emit(transition(self.block, w.k, w.accepted, w.after, blk.decisions.start,
                                        self.params.alpha, self.engine.eos_id))
        while blk.recorder.closed:
            self._record_epoch(blk.recorder.closed.pop(0))
        if blk.pending is None:  # (while its extension decodes, the state is the one before it)
            self.state = blk.state
        if blk.done and self.holding(blk.decisions.K):  # a barrier at the block's end: wait (release ends it)
            self.held = self._held_at_end = True
        elif blk.done:
            self._end_stream_block(blk)
            return
        elif blk.walker.at_stop:
            self.held = True
        # (tokens still decoding grew: more can be asked for).  Waiting at a barrier it asks for more only where
        # its population guesses that the barrier leaves its state as it is (`speculate_held`): what it asks for
        # is the sequential chain's from that state, of use after the barrier if the guess holds, and wasted
        # (never used: the walker asks only for its own state's) if the barrier hands it another state
        if (walked or self._dirty or blk.growing) and (not self.held or self.speculate_held):
            self._schedule()

    def release(self, state: SeqState, hold: tuple[int, int] | None) -> None:
        """Go on from the barrier: the walker from `state` (what was speculated for the state it waited with
        stays of use if it is the same), the block's end with it."""
        blk = self.blk
        assert blk is not None
        self.held, self.hold = False, hold
        if state is not blk.state:
            blk.replace(state)
            self.state = state
        if self._held_at_end:
            self._held_at_end = False
            self._end_stream_block(blk)
        else:
            blk.walker.stop = self.stop_in_block()
            self._dirty = True

    def _end_stream_block(self, blk: StreamBlock) -> None:
        """Abort what is still decoding (here, not by the loop, so that its `aborted` events count as
        waste, carry this block's number and come before the session's end), except the next block's
        extension if it was speculated from the state the block ended in."""
        # what was planned for the block but not taken by the engine yet goes with it (a population's member is
        # advanced again after a barrier before the engine steps)
        self._submit = [(t, r) for t, r in self._submit if not isinstance(t, GroupTag)]
        ext = blk.extension() if blk.decisions.next_block is not None else None
        keep = ext.handles[0] if ext is not None and ext.live else None
        for h in [h for h, tag in self._owned.items() if isinstance(tag, GroupTag) and h != keep]:
            self.aborted(h, self.engine.abort(h))
        for g in blk.book.groups.values():  # extensions that finished for a state the block did not end
            if g.want.d >= blk.decisions.K and g.finished and g is not ext:  # in: dropped, their tokens waste
                self._request_event(RequestKind.ABORTED, g, sum(len(p.tokens) for p in g.proposals if p is not None))
        self.blk = None
        self.state = blk.state
        self.block += 1
        now = self.clock()
        issued, arrived = self._ext_times.get(ext.id, (now, now)) if ext is not None else (now, now)
        self._ext_times.clear()
        if self.block >= self.params.n_blocks:
            self.end("done")
        elif ext is not None and ext.finished:
            self.extended(ext.proposals[0], "extend-ahead", 0.0, issued, arrived)  # type: ignore[arg-type]
        elif keep is not None and ext is not None and self.overlaps:  # still decoding: begin with it in flight
            self._own_ext = (ext, issued, now, "extend-ahead")
            self.begin_block(self.state, extension=ext)
        elif keep is not None:  # still decoding: wait for it as this block's extension
            self._owned[keep] = EXTEND
            self._extension, self._extension_purpose = (now, keep, issued), "extend-ahead"
        else:
            self._extend()

    def _record_epoch(self, epoch: Epoch) -> None:
        blk = self.blk
        assert blk is not None
        t0 = time.perf_counter()
        tree = blk.recorder.tree(epoch, self._group_progress)
        tree_s = time.perf_counter() - t0
        now = self.clock()
        self.steps_event()
        self.emit(RoundDone(self.block, self._epochs, epoch.k0, epoch.k0 + len(epoch.walked),
                                   self.params.steps, tree, now - self._epoch_t0,
                                   {"schedule": self._sched_s, "tree": tree_s}, now))
        self._epochs += 1
        self._epoch_t0, self._sched_s = now, 0.0

    def _group_progress(self, g: Group, j: int) -> int:
        h = g.handles[j]
        return self.engine.progress(h) if h is not None else 0

    def progress_event(self) -> Event | None:
        blk = self.blk
        if blk is None or blk.pending is not None:  # (no tree to show before the block's state exists)
            return None
        k0, _ = blk.recorder.epoch_start
        return LiveTree(self.block, k0, blk.k, blk.recorder.in_progress(self._group_progress))
