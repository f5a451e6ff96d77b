"""A session's whole chain (pure): every transition and the distinct states it visited.

The states come from the round trees (the state after each walked step), so
every trace has them; the diagnostics come from the `transition` events (the
log-target alpha log p0(x), the length-normalised log-likelihood, eq. 21, and
the confidence, eq. 22), which traces record from schema 1.2 on.  Transitions
are numbered 1, 2, ... over the whole session, blocks one after another.

A state is "visited" by a transition that leaves the chain in it (accepted or
not): a run of rejects visits the same state again and again, and a chain that
comes back to an earlier state (same tokens) visits it again later.

States are distinct by all their tokens, while a person reads each up to its first
EOS: states that read alike differ only after it, and `Visited.twin_from` says where
(the first position at which it differs from another state that reads the same), so
the view can show the tokens that tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from presto_tui.api.events import SeqState, Transition, cut_at_eos, first_difference
from presto_tui.views.state.reducer import SessionView


@dataclass(frozen=True)
class ChainStep:
    n: int  # transition number in the session, from 1
    block: int
    k: int  # the transition's index within its block
    accepted: bool
    state: int  # index into ChainHistory.states
    log_target: float | None  # None where the trace holds no transition events
    loglik: float | None
    confidence: float | None
    first_diff: int | None  # first generated position that differs from the block's start


@dataclass
class Visited:
    """One distinct state: its tokens, how often and when the chain was in it."""

    tokens: tuple[int, ...]
    block: int
    from_start: int  # the first generated position where it differs from its block's start (its length: nowhere)
    visits: int = 0
    first: int = 0  # transition number of the first visit
    last: int = 0
    log_target: float | None = None
    # where it first differs from another state that reads the same up to EOS (None: no other does)
    twin_from: int | None = None


@dataclass(frozen=True)
class ChainHistory:
    steps: tuple[ChainStep, ...]
    states: tuple[Visited, ...]
    diagnostics: bool  # the trace records transition events (log-target, log-likelihood)

    @property
    def accepted(self) -> int:
        return sum(s.accepted for s in self.steps)


def chain_history(session: SessionView) -> ChainHistory:
    diag = {(e.block, e.k): e for e in session.events if isinstance(e, Transition)}
    steps: list[ChainStep] = []
    states: list[Visited] = []
    index: dict[tuple[int, ...], int] = {}
    starts: dict[int, SeqState] = {}
    for rd in session.rounds:
        start = starts.setdefault(rd.block, rd.tree.root)  # a block's first round starts from its start
        for i, (walked, after) in enumerate(zip(rd.tree.steps, rd.tree.states_after_steps())):
            n = len(steps) + 1
            k = rd.k_before + i
            t = diag.get((rd.block, k))
            j = index.setdefault(after.tokens, len(states))
            if j == len(states):
                states.append(Visited(after.tokens, rd.block, first_difference(after, start), first=n))
            v = states[j]
            v.visits, v.last = v.visits + 1, n
            if t is not None:
                v.log_target = t.log_target
            steps.append(ChainStep(n, rd.block, k, walked.accepted, j, *(
                (t.log_target, t.loglik, t.confidence, t.first_diff) if t is not None else (None,) * 4)))
    read: dict[tuple[int, ...], list[Visited]] = {}  # the states by what a person reads of them
    for v in states:
        read.setdefault(cut_at_eos(v.tokens, session.start.backend_info.get("eos_id")), []).append(v)
    for alike in read.values():
        for v in alike if len(alike) > 1 else ():
            v.twin_from = min(_first_difference(v.tokens, w.tokens) for w in alike if w is not v)
    return ChainHistory(tuple(steps), tuple(states), bool(diag))


def _first_difference(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
