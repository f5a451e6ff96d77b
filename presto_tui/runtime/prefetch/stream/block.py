"""One chain's block under the streaming rule: its parts, composed (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.prefetch.stream.decisions import Decisions, Want
from presto_tui.runtime.prefetch.stream.moves import MoveRates
from presto_tui.runtime.prefetch.stream.policy import SpeculationPolicy
from presto_tui.runtime.prefetch.stream.recorder import EpochRecorder
from presto_tui.runtime.prefetch.stream.requests import Group, RequestBook
from presto_tui.runtime.prefetch.stream.speculation import (
    AtCut,
    InProposal,
    NextBlock,
    NoExtension,
    SpeculationTree,
)
from presto_tui.runtime.prefetch.stream.walker import Scorer, Walked, Walker
from presto_tui.runtime.samplers.families import SamplerFamily

Decoded = Callable[[Group], tuple[int, ...]]  # the tokens a live group's request has decoded so far


@dataclass(frozen=True)
class Schedule:
    """A policy's plan applied to the block: groups to submit and to abort, and the wants the policy
    saw and refused, with why (for how long each waited so: the critical path's causes)."""

    submit: tuple[Group, ...] = ()
    abort: tuple[Group, ...] = ()
    refused: tuple[tuple[Want, str], ...] = ()
    expanded: bool = False


class StreamBlock:
    """Decisions, requests, walker, speculation tree and recorder of one block; the policy
    (kept across blocks by the driver) plans over them.

    `extension`: the block begins while its own extension (a live or planned group of `T - L`
    tokens after `state`) still decodes, treated as a proposal in flight: wants cut within the
    tokens it has decoded so far are asked for at once, the walker waits for it (`extended`).  It
    needs a state-independent cut law (the cuts must be known before the state is)."""

    def __init__(self, params: SamplerParams, family: SamplerFamily, classifier: CertaintyClassifier,
                 block: int, state: SeqState, policy: SpeculationPolicy, *, book: RequestBook | None = None,
                 decoded: Decoded | None = None, extension: Group | None = None,
                 moves: MoveRates | None = None):
        self.params, self.policy = params, policy
        self.pending, self._before, self._decoded = extension, state, decoded
        if extension is not None:
            assert not family.law.state_dependent and decoded is not None
            n = extension.requests[0].n_new  # a stand-in of the block's length: all the law reads of it
            state = SeqState.tokens_only(state.prompt, state.tokens + (0,) * n)
        self.decisions = Decisions(params, family, block, state)
        self.book = book or RequestBook()
        self.scorer = Scorer(self.decisions, family)
        self.walker = Walker(self.decisions, self.scorer, self._before, partial=extension is not None)
        if extension is not None:
            self.book.adopt(extension)
        # Speculating inside a proposal needs a state-independent cut law (the cut of a later
        # decision must not depend on tokens still being decoded) and one request per decision.
        inside = (decoded is not None and "proposal" in params.speculate and not family.law.state_dependent
                  and family.requests_per_decision == 1)
        self.tree = SpeculationTree(
            self.decisions, self.walker, self.book, self.scorer, classifier,
            decoding=InProposal(decoded) if inside and decoded is not None else AtCut(),
            block_end=NextBlock(self.decisions) if "block" in params.speculate else NoExtension(), moves=moves)
        self.recorder = EpochRecorder(self.decisions, self.book, self.scorer, self._before)
        self.inside = inside
        self._frozen_k, self._frozen_min = -1, [0]

    # -- the driver's side ------------------------------------------------------------------
    @property
    def state(self) -> SeqState:
        return self.walker.state

    @property
    def k(self) -> int:
        return self.walker.k

    @property
    def done(self) -> bool:
        return self.walker.done

    @property
    def growing(self) -> bool:
        """The speculation tree follows tokens still decoding (inside proposals, or the block's own
        extension): it can change with every engine step, not only when a request finishes."""
        return self.inside or self.pending is not None

    def extended(self, proposal: Proposal) -> SeqState:
        """The block's own extension arrived: from now on the walker holds the whole state."""
        state = self._before.extended(proposal)
        self.pending = None
        self.decisions.begin(state)
        self.walker.begin(state)
        self.recorder.begin(state)
        return state

    def replace(self, state: SeqState) -> None:
        """At a barrier, the chain's state is another (a tempering swap, a resampling): the walker goes on
        from it at the decision it stopped at.  What was asked for the old state stays in the book (the
        policy aborts what no reachable state asks for); the walker only ever uses the proposal of the
        request its own state makes, so the chain is the sequential one's from the new state."""
        self.walker.begin(state)
        self.recorder.restart(self.walker.k, state)
        self._frozen_k = -1

    def plan(self) -> Schedule:
        """The policy's plan, applied: its wants become planned groups of the book (the policy only reads)."""
        g = self.pending
        if g is not None and self._decoded is not None and g.live:  # the extension so far
            tokens = self._before.tokens + self._decoded(g)
            if len(tokens) != self.walker.state.T:
                self.walker.grown(SeqState.tokens_only(self._before.prompt, tokens))
        plan = self.policy.plan(self)
        if not plan.expanded:
            return Schedule((), plan.abort)
        submit = tuple(self.book.plan(w, self.decisions.requests) for w in plan.submit)
        self.forget_behind()
        return Schedule(submit, plan.abort, plan.refused, expanded=True)

    def walk(self) -> list[Walked]:
        before = self.walker.state
        walked = self.walker.walk(self.book)
        self.recorder.observe(walked)
        moves = self.tree.moves
        if moves is not None:
            for w in walked:  # an accept that reproduces the tokens after the cut leaves the state as it was
                moves.observe(w.cut / self.decisions.T, w.after.tokens[w.cut:] != before.tokens[w.cut:])
                before = w.after
        return walked

    def issued(self, g: Group, j: int, handle: int) -> bool:
        return self.book.issued(g, j, handle)

    def delivered(self, g: Group, j: int, proposal: Proposal) -> bool:
        return self.book.delivered(g, j, proposal)

    def aborted(self, g: Group, j: int, decoded: int) -> bool:
        return self.book.aborted(g, j, decoded)

    def extension(self) -> Group | None:
        """The next block's extension for the state the block ended in, if it was speculated."""
        return self.book.get(self.decisions.want_at(self.decisions.K, self.walker.state))

    # -- what the policies ask ----------------------------------------------------------------
    def reachable(self, want: Want) -> bool:
        """False only if no state the walker can still reach asks for `want`."""
        k = self.walker.k
        if want.d < k:
            return False
        if want.d == k:
            own = self.walker.own()
            return own is None or want == own  # (None: the state is partial, its want not known yet)
        if self.decisions.state_dependent:
            return True  # later cuts depend on states not known yet
        # positions before every cut of decisions k..d-1 can no longer change (those of a partial state
        # that exist so far)
        n = min(self._frozen(want.d), want.cut, self.walker.state.T)
        return self.walker.state.tokens[:n] == want.prefix[:n]

    def _frozen(self, d: int) -> int:
        """min(cut_k, ..., cut_{d-1}) for a state-independent law: before it no accept can change a token."""
        k = self.walker.k
        if self._frozen_k != k:
            self._frozen_k, self._frozen_min = k, [self.decisions.T]
        mins = self._frozen_min  # mins[i] = min of the cuts of decisions k..k+i-1
        while len(mins) <= d - k:
            mins.append(min(mins[-1], self.decisions.cut(k + len(mins) - 1, self.walker.state)))
        return mins[d - k]

    def forget_behind(self) -> None:
        """Drop what no state can ask for again (the current epoch's groups stay for its record)."""
        self.book.forget(self.recorder.epoch_start[0])
