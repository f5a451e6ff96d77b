"""The streaming rule on the engine loop: a `StreamBlock` per block, a speculation policy across blocks."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from presto_tui.runtime.core.classifier import DEFAULT_CLASSIFIER
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.prefetch.stream import Epoch, Group, StreamBlock, speculation_policy
from presto_tui.runtime.prefetch.stream.requests import RequestBook
from presto_tui.runtime.session.cost import PRIOR_SLOPE
from presto_tui.runtime.session.driver import EXTEND, Driver, GroupTag, Tag
from presto_tui.runtime.session.events import DecisionWalked, Event, LiveTree, RequestEvent, RequestKind, RoundDone
from presto_tui.runtime.session.metrics import transition


class StreamDriver(Driver):
    def __init__(self, *args, ids: Callable[[], int] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.blk: StreamBlock | None = None
        self._ids = ids or itertools.count().__next__
        self.policy = speculation_policy(self.params.budget, self.params.budget_policy, self._step_cost)
        self._epoch_t0 = 0.0
        self._epochs = 0
        self._sched_s = 0.0
        self._dirty = False  # something changed since the policy last planned

    def _step_cost(self) -> tuple[float, float, int]:
        """(a, b, live now): the engine loop's learned step cost, shared by every chain on it."""
        a, b = self.cost.line() if self.cost is not None else (1.0, PRIOR_SLOPE)
        return a, b, self.engine.live

    def _decoded(self, g: Group) -> tuple[int, ...]:
        h = g.handles[0]
        return self.engine.partial(h) if h is not None else ()

    def begin_block(self, state: SeqState) -> None:
        self.blk = StreamBlock(self.params, self.family, self.classifier or DEFAULT_CLASSIFIER, self.block, state,
                               self.policy, book=RequestBook(self._ids), decoded=self._decoded)
        self._epoch_t0 = self.clock()
        self._schedule()

    def _schedule(self) -> None:
        blk = self.blk
        assert blk is not None
        t0 = time.perf_counter()
        plan = blk.plan()
        self._sched_s += time.perf_counter() - t0
        for g in plan.abort:
            self._abort.extend(h for h in g.handles if h is not None)
        for g in plan.submit:
            self._submit.extend((GroupTag(g, j), req) for j, req in enumerate(g.requests))
        self._dirty = False

    def on_submitted(self, tag: Tag, handle: int) -> None:
        assert isinstance(tag, GroupTag) and self.blk is not None
        if self.blk.issued(tag.group, tag.candidate, handle):
            self._request_event(RequestKind.ISSUED, tag.group, 0)

    def on_delivered(self, tag: Tag, handle: int, proposal: Proposal) -> None:
        assert isinstance(tag, GroupTag)
        g = tag.group
        if self.blk is not None and self.blk.delivered(g, tag.candidate, proposal):
            self._request_event(RequestKind.FINISHED, g, sum(len(p.tokens) for p in g.proposals if p is not None))
        self._dirty = True

    def on_aborted(self, tag: Tag, handle: int, decoded: int) -> None:
        assert isinstance(tag, GroupTag)
        if self.blk is not None and self.blk.aborted(tag.group, tag.candidate, decoded):
            self._request_event(RequestKind.ABORTED, tag.group, sum(tag.group.decoded))
        self._dirty = True

    def _request_event(self, kind: RequestKind, g: Group, tokens: int) -> None:
        blk = self.blk
        live = blk.book.live if blk is not None else 0
        purpose = "extend" if blk is not None and g.want.d >= blk.decisions.K else "propose"
        self._out.append(RequestEvent(kind, self.block, g.id, g.want.d, g.want.cut, g.size, tokens, self.clock(),
                                      live, purpose))

    def advance_block(self) -> None:
        blk = self.blk
        if blk is None:
            return
        t0 = time.perf_counter()
        walked = blk.walk()
        self._sched_s += time.perf_counter() - t0
        for w in walked:
            self._out.append(DecisionWalked(self.block, w.k, w.cut, w.group.id, w.accepted, w.score.accept_prob,
                                            w.score.eps_class, self.clock()))
            self._out.append(transition(self.block, w.k, w.accepted, w.after, blk.decisions.start,
                                        self.params.alpha, self.engine.eos_id))
        while blk.recorder.closed:
            self._record_epoch(blk.recorder.closed.pop(0))
        self.state = blk.state
        if blk.done:
            self._end_stream_block(blk)
        elif walked or self._dirty:
            self._schedule()

    def _end_stream_block(self, blk: StreamBlock) -> None:
        """Abort what is still decoding (here, not by the loop, so that its `aborted` events count as
        waste, carry this block's number and come before the session's end), except the next block's
        extension if it was speculated from the state the block ended in."""
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
        if self.block >= self.params.n_blocks:
            self._end("done")
        elif ext is not None and ext.finished:
            self.extended(ext.proposals[0], "extend-ahead", 0.0)  # type: ignore[arg-type]
        elif keep is not None:  # still decoding: wait for it as this block's extension
            self._owned[keep] = EXTEND
            self._extension, self._extension_purpose = (self.clock(), keep), "extend-ahead"
        else:
            self._extend()

    def _record_epoch(self, epoch: Epoch) -> None:
        blk = self.blk
        assert blk is not None
        t0 = time.perf_counter()
        tree = blk.recorder.tree(epoch, self._group_progress)
        tree_s = time.perf_counter() - t0
        now = self.clock()
        self._out.append(RoundDone(self.block, self._epochs, epoch.k0, epoch.k0 + len(epoch.walked),
                                   self.params.steps, tree, now - self._epoch_t0,
                                   {"schedule": self._sched_s, "tree": tree_s}, now))
        self._epochs += 1
        self._epoch_t0, self._sched_s = now, 0.0

    def _group_progress(self, g: Group, j: int) -> int:
        h = g.handles[j]
        return self.engine.progress(h) if h is not None else 0

    def progress_event(self) -> Event | None:
        blk = self.blk
        if blk is None:
            return None
        k0, _ = blk.recorder.epoch_start
        return LiveTree(self.block, k0, blk.k, blk.recorder.in_progress(self._group_progress))
