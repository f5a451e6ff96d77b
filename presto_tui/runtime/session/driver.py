"""A chain on the engine loop: the protocol every way of spending the model implements.

The engine loop (`loop.py`) asks each driver, before every engine step, what
to submit and what to abort, steps the engine once, hands each finished
proposal to the driver that asked for it, and collects the events the driver
emitted.  `Driver` implements a session's outer part (start, one extension
per block, end) for the MH chains; `RoundDriver` (rounds.py) runs a kernel,
sequential or a PreSTO round rule, `StreamDriver` (streaming.py) the streaming
rule.  What a request was submitted for travels with it as a typed tag.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from presto_tui import __version__
from presto_tui.errors import InputError, describe
from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import extension_seed
from presto_tui.runtime.core.types import Proposal, Request, SeqState, cut_at_eos
from presto_tui.runtime.prefetch.stream import Group
from presto_tui.runtime.prefetch.stream.shared import SharedBudget
from presto_tui.runtime.samplers.families import SamplerFamily, sampler_family
from presto_tui.runtime.session.cost import StepCost
from presto_tui.runtime.session.events import (
    BlockStart,
    EngineCost,
    EngineSteps,
    Event,
    ModelCall,
    SessionEnd,
    SessionError,
    SessionStart,
)

SNAPSHOT_EVERY_S = 0.1  # transient progress events: at most ten a second per chain


@dataclass(frozen=True)
class ExtendTag:
    """The request that extends the state by a block (alg. 1, line 2)."""


@dataclass(frozen=True)
class RoundTag:
    position: int  # the request's position in its round


@dataclass(frozen=True, eq=False)
class GroupTag:
    group: Group  # a streaming request group
    candidate: int


Tag = ExtendTag | RoundTag | GroupTag
EXTEND = ExtendTag()


def display_text(engine: Engine, tokens: Sequence[int]) -> str:
    """The response a user gets from `tokens`: up to and excluding EOS, decoded."""
    return engine.decode(cut_at_eos(tokens, engine.eos_id))


def check_context(engine: Engine, prompt_len: int, params: SamplerParams) -> None:
    """Refuse (InputError, one line) a prompt that leaves no room for n new tokens in the model's context."""
    if engine.max_len and prompt_len + params.max_new_tokens > engine.max_len:
        raise InputError(f"prompt ({prompt_len} tokens) plus horizon ({params.max_new_tokens}) exceeds "
                         f"the model's context of {engine.max_len} tokens")


class SessionDriver:
    """One session on the engine loop: its events from start to end, the requests it owns.

    Subclasses say what the session does: `begin` (after its start event), `on_delivered`
    (a proposal finished), `advance_session` (after every engine step), and optionally
    `on_submitted`, `on_aborted`, `progress_event`.  They act through `submit_request` (ask the
    engine for a proposal), `emit` (record an event) and `end` (finish with a response); `state`
    holds the session's current tokens (what a cancel ends with), `clock()` the session's time.
    """

    def __init__(self, engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], *, prompt: str = "",
                 chain: int = 0, chains: int = 1, group: str = ""):
        params.validate()
        self.engine, self.params, self.prompt = engine, params, prompt
        self.prompt_ids = tuple(prompt_ids)
        self.chain_index, self.chains, self.group = chain, chains, group
        self.state = SeqState(self.prompt_ids)
        self.done = False
        self.cost: StepCost | None = None  # the engine loop's step costs, shared by its chains
        self.peers: Callable[[], int] = lambda: 1  # how many sessions share the engine now (the loop's)
        self.budget: SharedBudget | None = None  # the engine's speculation budget, shared by its chains (the loop's)
        self.started: SessionStart | None = None  # its start event, once `start` has emitted it
        self._out: list[Event] = []
        self._submit: list[tuple[Tag, Request]] = []
        self._abort: list[int] = []
        self._owned: dict[int, Tag] = {}  # engine handle -> what it was submitted for
        self._t0 = engine.clock()
        self._last_snapshot = 0.0
        # every session writes the engine's steps it was on the loop for (`EngineSteps`: an MH chain's critical
        # path reads them, the frontier counts them); a member of a population writes none of its own
        self.records_steps = True
        self._steps: list[tuple[float, float, int]] = []

    def clock(self) -> float:
        return self.engine.clock() - self._t0

    # -- the loop's side --------------------------------------------------------------------
    def start(self) -> list[Event]:
        e = self.engine
        self.started = SessionStart(uuid.uuid4().hex[:12], __version__, e.name, e.model, self.params.to_dict(),
                                    self.prompt, self.prompt_ids, time.time(), dict(e.info),
                                    self.chain_index, self.chains, self.group)
        self.emit(self.started)
        check_context(e, len(self.prompt_ids), self.params)
        self.begin()
        return self.flush()

    def to_submit(self) -> list[tuple[Tag, Request]]:
        out, self._submit = self._submit, []
        return out

    def to_abort(self) -> list[int]:
        out, self._abort = self._abort, []
        return out

    def submitted(self, tag: Tag, handle: int) -> None:
        self._owned[handle] = tag
        self.on_submitted(tag, handle)

    def delivered(self, handle: int, proposal: Proposal) -> None:
        self.on_delivered(self._owned.pop(handle), handle, proposal)

    def aborted(self, handle: int, decoded: int) -> None:
        self.on_aborted(self._owned.pop(handle), handle, decoded)

    def handles(self) -> list[int]:
        return list(self._owned)

    def stepped(self, start: float, end: float, live: int) -> None:
        """The engine made a step, from `start` to `end` on its clock, with `live` requests."""
        if self.records_steps:
            self._steps.append((start - self._t0, end - self._t0, live))

    def steps_event(self) -> None:
        """The steps made since the last `EngineSteps` event, as one (before a round or an end)."""
        if self._steps:
            start, end, live = zip(*self._steps)
            self.emit(EngineSteps(start, end, live))
            self._steps = []

    def advance(self) -> list[Event]:
        if not self.done:
            self.advance_session()
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
            self.end("cancelled")
        return self.flush()

    def fail(self, exc: BaseException) -> list[Event]:
        if not self.done:
            self.done = True
            kind, message = describe(exc)
            self.emit(SessionError(message, kind))
        return self.flush()

    # -- what a session may do (its public hooks) ----------------------------------------------
    def emit(self, event: Event) -> None:
        """Record `event` (one of the session's own, or a `Sample`, `Choice`, `ModelCall`): the loop
        collects it after the current hook returns."""
        self._out.append(event)

    def submit_request(self, request: Request, position: int = 0) -> None:
        """Ask the engine for `request`; its proposal comes back to `on_delivered` with a `RoundTag`
        whose `position` is this one."""
        self._submit.append((RoundTag(position), request))

    def end(self, reason: str = "done", tokens: Sequence[int] | None = None) -> None:
        """End the session: `done` (or `cancelled`) with `tokens` as its response (default: `state`'s)."""
        self.done = True
        self.steps_event()
        est = self.cost.estimate() if self.cost is not None else None
        if est is not None:
            self.emit(EngineCost(est.a, est.b, est.steps, est.best_n, est.best_rate))
        toks = tuple(self.state.tokens if tokens is None else tokens)
        self.emit(SessionEnd(reason, toks, display_text(self.engine, toks)))

    # -- what a session does ------------------------------------------------------------------
    def begin(self) -> None:
        raise NotImplementedError

    def advance_session(self) -> None:
        raise NotImplementedError

    def on_submitted(self, tag: Tag, handle: int) -> None:
        pass

    def on_delivered(self, tag: Tag, handle: int, proposal: Proposal) -> None:
        raise NotImplementedError

    def on_aborted(self, tag: Tag, handle: int, decoded: int) -> None:
        pass

    def progress_event(self) -> Event | None:
        return None


class Driver(SessionDriver):
    """An MH chain: a session's events around blocks of MH transitions (alg. 1 and 2's outer loop)."""

    def __init__(self, engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], *, prompt: str = "",
                 classifier: CertaintyClassifier | None = None, state: SeqState | None = None,
                 family: SamplerFamily | None = None, **chain):
        super().__init__(engine, params, prompt_ids, prompt=prompt, **chain)
        self.classifier = classifier
        # its decision rule: its method's, or one given (a tempering replica's, with its ladder's temperatures)
        self.family = family or sampler_family(params)
        self._given = state  # a block's start state given (tests): no extension for the first block
        self.block = 0
        self._extension: tuple[float, int | None, float] | None = None  # (waited for since, handle, issued at)
        self._extension_purpose = "extend"
        # A barrier, set by the population the chain is a member of (population.py): the chain stops after
        # hold[1] transitions of block hold[0] (0: once the block's extension is in, before its first decision;
        # K: after its last, before the next block's extension) and waits, `held`, until `release` hands it the
        # state to go on from.  Nothing of its law changes: each decision keeps its keyed inputs.
        self.hold: tuple[int, int] | None = None
        self.held = False
        # waiting there, whether it speculates on as if the barrier left its state as it is (the population's
        # guess, `Population.keeps`; the streaming rule's): its law is the same either way
        self.speculate_held = False
        self._held_at_end = False

    def begin(self) -> None:
        if self._given is not None:
            self.state = self._given
            self.begin_block(self._given)
        else:
            self._extend()

    def submitted(self, tag: Tag, handle: int) -> None:
        if isinstance(tag, ExtendTag):
            self._owned[handle] = tag
            assert self._extension is not None
            self._extension = (self._extension[0], handle, self._extension[2])
        else:
            super().submitted(tag, handle)

    def delivered(self, handle: int, proposal: Proposal) -> None:
        if isinstance(self._owned.get(handle), ExtendTag):
            del self._owned[handle]
            assert self._extension is not None
            since, _, start = self._extension
            self._extension, purpose, self._extension_purpose = None, self._extension_purpose, "extend"
            self.extended(proposal, purpose, self.clock() - since, start)
        else:
            super().delivered(handle, proposal)

    def extended(self, proposal: Proposal, purpose: str, wall: float, start: float,
                 arrived: float | None = None) -> None:
        """The block's extension is here (submitted at `start`, arrived at `arrived`, default now):
        record it and begin the block."""
        now = self.clock()
        self.emit(ModelCall(self.block, -1, purpose, 1, len(proposal.tokens), wall, start,
                                   now if arrived is None else arrived))
        L = self.state.T
        self.state = self.state.extended(proposal)
        self.emit(BlockStart(self.block, L, self.state.T, proposal.tokens, now))
        self.begin_block(self.state)

    def advance_session(self) -> None:
        if self._extension is None:
            self.advance_block()

    # -- blocks -----------------------------------------------------------------------------
    def extension_request(self) -> Request:
        return Request(self.state.prefix(self.state.T), self.params.block, extension_seed(self.params.seed, self.block),
                       self.params.proposal_tau, self.family.score_taus)

    def _extend(self) -> None:
        self._extension = (self.clock(), None, self.clock())
        self._submit.append((EXTEND, self.extension_request()))

    def end_block(self, state: SeqState) -> None:
        """The block's K transitions are done: extend for the next block, or end the session (or wait at a
        barrier there first)."""
        self.state = state
        if self.holding(self.params.steps):
            self.held = self._held_at_end = True
            return
        self.block += 1
        if self.block < self.params.n_blocks:
            self._extend()
        else:
            self.end("done")

    def begin_block(self, state: SeqState) -> None:
        raise NotImplementedError

    def advance_block(self) -> None:
        raise NotImplementedError

    # -- barriers (population.py) -------------------------------------------------------------
    def holding(self, k: int) -> bool:
        """Whether the chain's barrier is here: after k transitions of the block it is in."""
        return self.hold == (self.block, k)

    def stop_in_block(self) -> int | None:
        """The transitions of this block the chain may walk before its barrier (None: no barrier in it)."""
        return self.hold[1] if self.hold is not None and self.hold[0] == self.block else None

    def release(self, state: SeqState, hold: tuple[int, int] | None) -> None:
        """Go on from the barrier with `state` (the very state it waits with: as it was; another: a swap, a
        resampling) until the next barrier `hold` (None: to the end)."""
        self.held, self.hold = False, hold
        if self._held_at_end:
            self._held_at_end = False
            self.end_block(state)
        else:
            self.resume(state)

    def resume(self, state: SeqState) -> None:
        """Go on within the block from the barrier with `state` (the decision it stopped at is next)."""
        raise NotImplementedError


DriverFactory = Callable[..., SessionDriver]
