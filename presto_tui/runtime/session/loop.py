"""One engine loop for any number of chains (DESIGN.md sec 7).

`run_chains` owns the engine while it runs: before every engine step it asks
each chain what to submit and what to abort, then steps the engine once and
hands each finished proposal to the chain that asked for it.  A chain is a
`Driver`: `RoundDriver` runs a kernel (sequential or a PreSTO round rule) and
waits for its whole batch; `StreamDriver` runs the streaming rule.  Both share
the session's outer loop (start, one extension call per block, end).

Cancellation is checked before every engine step, so Ctrl-C in the app or an
Escape stops within one step; every open session then ends `cancelled` and
its live requests are aborted.  An engine failure ends every open session
with an `error` event before it propagates.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections.abc import Callable, Iterator, Sequence

from presto_tui import __version__
from presto_tui.errors import EngineError, InputError, PrestoError, describe
from presto_tui.runtime.core.classifier import DEFAULT_CLASSIFIER, CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import extension_seed
from presto_tui.runtime.core.types import Proposal, Request, SeqState, cut_at_eos
from presto_tui.runtime.prefetch.kernel import ChainState, Pending, build_kernel
from presto_tui.runtime.prefetch.stream import ABANDONED, Epoch, Group, StreamChain
from presto_tui.runtime.prefetch.tree import LEAF
from presto_tui.runtime.samplers.families import sampler_family
from presto_tui.runtime.session.events import (
    BlockStart,
    DecisionWalked,
    Event,
    InFlight,
    LiveTree,
    ModelCall,
    RequestEvent,
    RoundDone,
    SessionEnd,
    SessionError,
    SessionStart,
)

SNAPSHOT_EVERY_S = 0.1  # transient progress events: at most ten a second per chain


class InternalError(PrestoError):
    kind = "internal"


def display_text(engine: Engine, tokens: Sequence[int]) -> str:
    return engine.decode(cut_at_eos(tokens, engine.eos_id))


def check_context(engine: Engine, prompt_len: int, params: SamplerParams) -> None:
    if engine.max_len and prompt_len + params.max_new_tokens > engine.max_len:
        raise InputError(f"prompt ({prompt_len} tokens) plus horizon ({params.max_new_tokens}) exceeds "
                         f"the model's context of {engine.max_len} tokens")


class Driver:
    """One chain: a session's events around blocks of MH transitions (alg. 1 and 2's outer loop)."""

    def __init__(self, engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], *, prompt: str = "",
                 classifier: CertaintyClassifier | None = None, state: SeqState | None = None):
        params.validate()
        self.engine, self.params, self.prompt, self.classifier = engine, params, prompt, classifier
        self.prompt_ids = tuple(prompt_ids)
        self.family = sampler_family(params)
        self.state = SeqState(self.prompt_ids)
        self._given = state  # a block's start state given (tests): no extension for the first block
        self.block = 0
        self.done = False
        self._out: list[Event] = []
        self._submit: list[tuple[object, Request]] = []
        self._abort: list[int] = []
        self._owned: dict[int, object] = {}  # handle -> what it was submitted for
        self._t0 = engine.clock()
        self._extension: tuple[float, int | None] | None = None  # (submitted at, handle)
        self._last_snapshot = 0.0

    def clock(self) -> float:
        return self.engine.clock() - self._t0

    # -- the loop's side --------------------------------------------------------------------
    def start(self) -> list[Event]:
        e = self.engine
        self._out.append(SessionStart(uuid.uuid4().hex[:12], __version__, e.name, e.model, self.params.to_dict(),
                                      self.prompt, self.prompt_ids, time.time(), dict(e.info)))
        check_context(e, len(self.prompt_ids), self.params)
        if self._given is not None:
            self.state = self._given
            self.begin_block(self._given)
        else:
            self._extend()
        return self.flush()

    def to_submit(self) -> list[tuple[object, Request]]:
        out, self._submit = self._submit, []
        return out

    def to_abort(self) -> list[int]:
        out, self._abort = self._abort, []
        return out

    def submitted(self, tag: object, handle: int) -> None:
        self._owned[handle] = tag
        if tag == "extend":
            assert self._extension is not None
            self._extension = (self._extension[0], handle)
        else:
            self.on_submitted(tag, handle)

    def delivered(self, handle: int, proposal: Proposal) -> None:
        tag = self._owned.pop(handle)
        if tag == "extend":
            assert self._extension is not None
            wall = self.engine.clock() - self._extension[0] - self._t0
            self._extension = None
            self._out.append(ModelCall(self.block, -1, "extend", 1, len(proposal.tokens), wall))
            L = self.state.T
            self.state = self.state.extended(proposal)
            self._out.append(BlockStart(self.block, L, self.state.T, proposal.tokens))
            self.begin_block(self.state)
        else:
            self.on_delivered(tag, handle, proposal)

    def aborted(self, handle: int, decoded: int) -> None:
        self.on_aborted(self._owned.pop(handle), handle, decoded)

    def handles(self) -> list[int]:
        return list(self._owned)

    def advance(self) -> list[Event]:
        if not self.done and self._extension is None:
            self.advance_block()
        return self.flush()

    def flush(self) -> list[Event]:
        out, self._out = self._out, []
        return out

    def snapshot(self, now: float) -> Event | None:
        """A transient progress event, at most every SNAPSHOT_EVERY_S of wall time."""
        if now - self._last_snapshot < SNAPSHOT_EVERY_S or self.done:
            return None
        self._last_snapshot = now
        return self.progress_event()

    def cancel(self) -> list[Event]:
        """End the session as cancelled at the last finished step; the loop aborts its requests."""
        if not self.done:
            self.done = True
            self._out.append(SessionEnd("cancelled", self.state.tokens, display_text(self.engine, self.state.tokens)))
        return self.flush()

    def fail(self, exc: BaseException) -> list[Event]:
        if not self.done:
            self.done = True
            kind, message = describe(exc)
            self._out.append(SessionError(message, kind))
        return self.flush()

    # -- blocks -----------------------------------------------------------------------------
    def _extend(self) -> None:
        req = Request(self.state.prefix(self.state.T), self.params.block, extension_seed(self.params.seed, self.block),
                      self.params.proposal_tau, self.family.score_taus)
        self._extension = (self.clock(), None)
        self._submit.append(("extend", req))

    def end_block(self, state: SeqState) -> None:
        """The block's K transitions are done: extend for the next block, or end the session."""
        self.state = state
        self.block += 1
        if self.block < self.params.n_blocks:
            self._extend()
        else:
            self.done = True
            self._out.append(SessionEnd("done", state.tokens, display_text(self.engine, state.tokens)))

    def begin_block(self, state: SeqState) -> None:
        raise NotImplementedError

    def advance_block(self) -> None:
        raise NotImplementedError

    def on_submitted(self, tag: object, handle: int) -> None:
        pass

    def on_delivered(self, tag: object, handle: int, proposal: Proposal) -> None:
        raise NotImplementedError

    def on_aborted(self, tag: object, handle: int, decoded: int) -> None:
        pass

    def progress_event(self) -> Event | None:
        return None


class RoundDriver(Driver):
    """A kernel's steps (sequential or a PreSTO round): submit the whole batch, wait for all of it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernel = build_kernel(self.params, self.classifier)
        self.chain: ChainState | None = None
        self.pending: Pending | None = None
        self.proposals: list[Proposal | None] = []
        self._batch_t0 = 0.0
        self._plan_s = 0.0

    def begin_block(self, state: SeqState) -> None:
        self.chain = ChainState(state, self.block)
        self._plan()

    def _plan(self) -> None:
        assert self.chain is not None
        t0 = time.perf_counter()
        self.pending = self.kernel.plan(self.chain)
        self._plan_s = time.perf_counter() - t0
        self.proposals = [None] * len(self.pending.requests)
        self._batch_t0 = self.clock()
        self._submit.extend(enumerate(self.pending.requests))

    def on_delivered(self, tag: object, handle: int, proposal: Proposal) -> None:
        assert isinstance(tag, int)  # the request's position in the round
        self.proposals[tag] = proposal

    def advance_block(self) -> None:
        if self.pending is None or any(p is None for p in self.proposals):
            return
        wall = self.clock() - self._batch_t0
        pending, proposals = self.pending, self.proposals
        t0 = time.perf_counter()
        chain, tree = self.kernel.finish(pending, proposals)  # type: ignore[arg-type]
        finish_s = time.perf_counter() - t0
        self.pending = None
        self._out.append(ModelCall(self.block, chain.round - 1, "propose", len(proposals),
                                   sum(len(p.tokens) for p in proposals if p is not None), wall))
        self._out.append(RoundDone(self.block, chain.round - 1, pending.chain.k, chain.k, self.params.steps, tree,
                                   wall, {"plan": self._plan_s, "finish": finish_s}, self.clock()))
        self.chain, self.state = chain, chain.state
        if chain.k < self.params.steps:
            self._plan()
        else:
            self.end_block(chain.state)

    def progress_event(self) -> Event | None:
        if self.pending is None:
            return None
        handles = [h for h, tag in self._owned.items() if tag != "extend"]
        decoded = sum(self.engine.progress(h) for h in handles)
        decoded += sum(len(p.tokens) for p in self.proposals if p is not None)
        return InFlight(len(self.pending.requests), decoded, sum(r.n_new for r in self.pending.requests))


def _group_tag(tag: object) -> tuple[Group, int]:
    """A streaming request's tag: (its group, which candidate)."""
    assert isinstance(tag, tuple) and isinstance(tag[0], Group)
    return tag[0], tag[1]


class StreamDriver(Driver):
    """The streaming rule: a walker and a scheduler (prefetch.stream) around the engine loop."""

    def __init__(self, *args, ids: Callable[[], int] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.chain: StreamChain | None = None
        self._ids = ids or itertools.count().__next__
        self._epoch_t0 = 0.0
        self._epochs = 0
        self._sched_s = 0.0
        self._dirty = False  # something changed since the scheduler last ran
        # A scheduling pass costs O(N): refill as soon as one slot frees up to N = 16, and in
        # batches of N/16 slots above (at most 1/16 of the budget idle for a step or two).
        self._refill_at = max(1, self.params.budget // 16)

    def begin_block(self, state: SeqState) -> None:
        self.chain = StreamChain(self.params, self.family, self.classifier or DEFAULT_CLASSIFIER, self.block, state,
                                 self._ids)
        self._epoch_t0 = self.clock()
        self._schedule()

    def _schedule(self) -> None:
        chain = self.chain
        assert chain is not None
        t0 = time.perf_counter()
        submit, aborts = chain.plan(self.params.budget, self._refill_at)
        self._sched_s += time.perf_counter() - t0
        for g in aborts:
            self._abort.extend(h for h in g.handles if h is not None)
        for g in submit:
            for j, req in enumerate(g.requests):
                self._submit.append(((g, j), req))
        self._dirty = False

    def on_submitted(self, tag: object, handle: int) -> None:
        g, j = _group_tag(tag)
        first = all(h is None for h in g.handles)
        g.handles[j] = handle
        if self.chain is not None:
            self.chain.issued(g, j, handle)
        if first:
            self._request_event("issued", g, 0)

    def on_delivered(self, tag: object, handle: int, proposal: Proposal) -> None:
        g, j = _group_tag(tag)
        if self.chain is not None and self.chain.delivered(g, j, proposal):
            self._request_event("finished", g, sum(len(p.tokens) for p in g.proposals if p is not None))
        self._dirty = True

    def on_aborted(self, tag: object, handle: int, decoded: int) -> None:
        g, j = _group_tag(tag)
        g.handles[j] = None
        g.decoded += decoded
        if all(h is None for h in g.handles):
            g.status = ABANDONED
            self._request_event("aborted", g, g.decoded)
        self._dirty = True

    def _request_event(self, kind: str, g: Group, tokens: int) -> None:
        live = self.chain.live_requests if self.chain is not None else 0
        self._out.append(RequestEvent(kind, self.block, g.id, g.want.d, g.want.cut, g.size, tokens, self.clock(),
                                      live))

    def advance_block(self) -> None:
        chain = self.chain
        if chain is None:
            return
        t0 = time.perf_counter()
        walked = chain.walk()
        self._sched_s += time.perf_counter() - t0
        for w in walked:
            self._out.append(DecisionWalked(self.block, w.k, w.cut, w.group.id, w.accepted, w.score.accept_prob,
                                            w.score.eps_class, self.clock()))
            if chain.closed and chain.closed[0].walked[-1] is w:
                self._record_epoch(chain.closed.pop(0))
        self.state = chain.state
        if chain.done:
            # what is still decoding is aborted here, not by the loop, so that its `aborted` events
            # count as waste, carry this block's number and come before the session's end
            for h in [h for h, tag in self._owned.items() if tag != "extend"]:
                self.aborted(h, self.engine.abort(h))
            self.chain = None
            self.end_block(chain.state)
        elif walked or self._dirty:
            self._schedule()

    def _record_epoch(self, epoch: Epoch) -> None:
        chain = self.chain
        assert chain is not None
        t0 = time.perf_counter()
        tree = chain.epoch_tree(epoch.k0, epoch.root, epoch.walked, self._group_progress, epoch.stop_reason)
        tree_s = time.perf_counter() - t0
        now = self.clock()
        self._out.append(RoundDone(self.block, self._epochs, epoch.k0, epoch.k0 + len(epoch.walked),
                                   self.params.steps, tree, now - self._epoch_t0,
                                   {"schedule": self._sched_s, "tree": tree_s}, now))
        self._epochs += 1
        self._epoch_t0, self._sched_s = now, 0.0

    def _group_progress(self, g: Group) -> int:
        return sum(self.engine.progress(h) for h in g.handles if h is not None)

    def progress_event(self) -> Event | None:
        chain = self.chain
        if chain is None:
            return None
        k0, root = chain.epoch_start
        tree = chain.epoch_tree(k0, root, list(chain.epoch_walked), self._group_progress, LEAF)
        return LiveTree(self.block, k0, chain.k, tree)


@contextlib.contextmanager
def engine_faults():
    """What the engine raises is an engine failure (out of memory, a lost worker, a refused
    request), whatever its Python type."""
    try:
        yield
    except PrestoError:
        raise
    except Exception as e:
        raise EngineError(describe(e)[1]) from e


def make_driver(engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], *, prompt: str = "",
                classifier: CertaintyClassifier | None = None, state: SeqState | None = None) -> Driver:
    """The chain `params` select; `state`: start the first block from this state (no extension)."""
    cls = StreamDriver if params.prefetch == "stream" else RoundDriver
    return cls(engine, params, prompt_ids, prompt=prompt, classifier=classifier, state=state)


def run_chains(engine: Engine, drivers: Iterator[Driver] | Sequence[Driver], *, concurrency: int = 1,
               cancel: Callable[[], bool] | None = None, transient: bool = False) -> Iterator[tuple[int, Event]]:
    """Run chains through one engine loop, `concurrency` at a time, in the order given.

    Yields (chain index, event); events of one chain come in order, chains interleave.
    """
    source = iter(drivers)
    active: dict[int, Driver] = {}
    owner: dict[int, int] = {}  # engine handle -> chain index
    started = itertools.count()
    exhausted = False

    def refill() -> Iterator[tuple[int, Event]]:
        nonlocal exhausted
        while not exhausted and len(active) < concurrency:
            d = next(source, None)
            if d is None:
                exhausted = True
                break
            i = next(started)
            active[i] = d
            try:
                events = d.start()
            except Exception as e:
                del active[i]
                yield from ((i, ev) for ev in d.fail(e))
                raise
            yield from ((i, ev) for ev in events)

    def drop(i: int) -> None:
        for h in active[i].handles():
            engine.abort(h)
        for h in [h for h, j in owner.items() if j == i]:  # and what the chain aborted itself
            del owner[h]
        del active[i]

    try:
        yield from refill()
        while active:
            if cancel is not None and cancel():
                for i in list(active):
                    events = active[i].cancel()
                    drop(i)
                    yield from ((i, ev) for ev in events)
                return
            with engine_faults():
                for i, d in active.items():
                    for h in d.to_abort():
                        if owner.pop(h, None) is not None:
                            d.aborted(h, engine.abort(h))
                    for tag, req in d.to_submit():
                        h = engine.submit(req)
                        owner[h] = i
                        d.submitted(tag, h)
                if not engine.live:
                    raise InternalError("every chain is waiting but no request is live")
                finished = engine.step()
            for h, prop in finished:
                i = owner.pop(h, -1)
                if i in active:
                    active[i].delivered(h, prop)
            now = time.perf_counter()
            for i in list(active):
                d = active[i]
                yield from ((i, ev) for ev in d.advance())
                if transient and (snap := d.snapshot(now)) is not None:
                    yield i, snap
                if d.done:
                    drop(i)
            yield from refill()
    except BaseException as e:
        for i in list(active):
            events = active[i].fail(e) if not isinstance(e, (KeyboardInterrupt, GeneratorExit)) else []
            with contextlib.suppress(Exception):  # the engine itself may be what failed
                drop(i)
            yield from ((i, ev) for ev in events)
        raise
