"""A kernel's steps on the engine loop (sequential or a PreSTO round): submit the whole batch, wait for all of it."""

from __future__ import annotations

import time
from dataclasses import replace

from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.prefetch.kernel import ChainState, Pending, build_kernel
from presto_tui.runtime.session.driver import Driver, ExtendTag, RoundTag, Tag
from presto_tui.runtime.session.events import Event, InFlight, ModelCall, RoundDone
from presto_tui.runtime.session.metrics import transition


class RoundDriver(Driver):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernel = build_kernel(self.params, self.classifier, self.family)
        self.chain: ChainState | None = None
        self.pending: Pending | None = None
        self.proposals: list[Proposal | None] = []
        self._batch_t0 = 0.0
        self._plan_s = 0.0
        self._block_start = self.state

    def begin_block(self, state: SeqState) -> None:
        self._block_start = state
        self.chain = ChainState(state, self.block)
        self._plan()

    def _plan(self) -> None:
        assert self.chain is not None
        if self.holding(self.chain.k):  # a barrier: wait here (release plans on)
            self.held = True
            return
        self.chain = replace(self.chain, stop=self.stop_in_block())  # no round walks past the barrier
        t0 = time.perf_counter()
        self.pending = self.kernel.plan(self.chain)
        self._plan_s = time.perf_counter() - t0
        self.proposals = [None] * len(self.pending.requests)
        self._batch_t0 = self.clock()
        self._submit.extend((RoundTag(i), r) for i, r in enumerate(self.pending.requests))

    def on_delivered(self, tag: Tag, handle: int, proposal: Proposal) -> None:
        assert isinstance(tag, RoundTag)
        self.proposals[tag.position] = proposal

    def advance_block(self) -> None:
        if self.pending is None or any(p is None for p in self.proposals):
            return
        wall = self.clock() - self._batch_t0
        pending, proposals = self.pending, self.proposals
        t0 = time.perf_counter()
        chain, tree = self.kernel.finish(pending, proposals)  # type: ignore[arg-type]
        finish_s = time.perf_counter() - t0
        self.pending = None
        self.emit(ModelCall(self.block, chain.round - 1, "propose", len(proposals),
                                   sum(len(p.tokens) for p in proposals if p is not None), wall, self._batch_t0,
                                   self.clock()))
        self.steps_event()
        self.emit(RoundDone(self.block, chain.round - 1, pending.chain.k, chain.k, self.params.steps, tree,
                                   wall, {"plan": self._plan_s, "finish": finish_s}, self.clock()))
        for i, (step, after) in enumerate(zip(tree.steps, tree.states_after_steps())):
            self.emit(transition(self.block, pending.chain.k + i, step.accepted, after, self._block_start,
                                        self.params.alpha, self.engine.eos_id))
        self.chain, self.state = chain, chain.state
        if chain.k < self.params.steps:
            self._plan()
        else:
            self.end_block(chain.state)

    def resume(self, state: SeqState) -> None:
        assert self.chain is not None
        self.state = state
        self.chain = replace(self.chain, state=state)
        self._plan()

    def progress_event(self) -> Event | None:
        if self.pending is None:
            return None
        handles = [h for h, tag in self._owned.items() if not isinstance(tag, ExtendTag)]
        decoded = sum(self.engine.progress(h) for h in handles)
        decoded += sum(len(p.tokens) for p in self.proposals if p is not None)
        return InFlight(len(self.pending.requests), decoded, sum(r.n_new for r in self.pending.requests))
