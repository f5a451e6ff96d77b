"""The exact part of the streaming rule: MH decisions strictly in order (paper alg. 1, lines 4-7).

The walker at decision k holding state x uses only the proposal of the request
sequential PowerMH would make there (same decision, same tokens before the
cut), scores it against x with the unchanged rule and accepts with the
decision's own uniform, so the chain is sequential PowerMH's, token for token
(prop. 1's coupling).  Which requests exist, and when, is the policy's affair.
"""

from __future__ import annotations

from dataclasses import dataclass

from presto_tui.runtime.core.mh import Score, accepts
from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.prefetch.stream.decisions import Decisions, Want
from presto_tui.runtime.prefetch.stream.requests import Group, RequestBook
from presto_tui.runtime.samplers.families import SamplerFamily


@dataclass(frozen=True)
class Walked:
    """One decision the walker took."""

    k: int
    group: Group
    cut: int
    score: Score
    accepted: bool
    after: SeqState


class Scorer:
    """A finished group scored against a state, and the state accepting it gives; cached until
    the walker's state moves (the speculation tree asks for the same pairs every pass)."""

    def __init__(self, decisions: Decisions, family: SamplerFamily):
        self.decisions, self.family = decisions, family
        # (group id, id(state)) -> (A, J, accept state, state); holding the state keeps its id
        # from being reused for another object
        self._cache: dict[tuple[int, int], tuple[float, int, SeqState, SeqState]] = {}

    def selected(self, g: Group) -> int:
        """MultiTryMH's J, drawn once from the candidates alone."""
        if g.selected is None:
            g.selected = self.family.select(self.decisions.inputs(g.want.d), g.proposals)  # type: ignore[arg-type]
        return g.selected

    def score(self, g: Group, state: SeqState) -> tuple[Score, int]:
        J = self.selected(g)
        inp = self.decisions.inputs(g.want.d)
        return self.family.score(state, g.want.cut, inp, g.proposals, J), J  # type: ignore[arg-type]

    def accept(self, g: Group, state: SeqState) -> tuple[float, int, SeqState]:
        """(A, J, the state after accepting) of finished group g from a complete `state`."""
        key = (g.id, id(state))
        if key not in self._cache:
            sc, J = self.score(g, state)
            acc = state.with_suffix(g.want.cut, g.proposals[J])  # type: ignore[arg-type]
            self._cache[key] = (sc.accept_prob, J, acc, state)
        A, J, acc, _ = self._cache[key]
        return A, J, acc

    def clear(self) -> None:
        self._cache.clear()


class Walker:
    """`partial`: the block's extension is still decoding; `state` holds the tokens that exist so far
    (without their per-token values), the walker takes no decision until `begin` gives it the whole
    state, and only wants cut within what exists can be asked for."""

    def __init__(self, decisions: Decisions, scorer: Scorer, state: SeqState, partial: bool = False):
        self.decisions, self.scorer = decisions, scorer
        self.state = state
        self.partial = partial
        self.k = 0
        # a barrier (runtime/session/population.py): take no decision from this one on until it is lifted
        # (speculation past it goes on; None: none)
        self.stop: int | None = None
        self._wants: dict[int, Want] = {}  # decision -> what the walker's own state asks for

    @property
    def done(self) -> bool:
        return self.k >= self.decisions.K

    def grown(self, state: SeqState) -> None:
        """More of the block's extension exists (the walker's state is still partial)."""
        self.state = state
        self._wants.clear()

    def begin(self, state: SeqState) -> None:
        """The block's extension has arrived: `state` is the whole state its first decision starts from."""
        self.state, self.partial = state, False
        self._wants.clear()
        self.scorer.clear()

    @property
    def at_stop(self) -> bool:
        """Waiting at its barrier with the whole state."""
        return self.stop is not None and self.k == self.stop and not self.partial

    def own(self) -> Want | None:
        """What the walker's state asks for at its decision (None while the state is partial and the cut lies
        beyond the tokens that exist)."""
        if self.done or (self.partial and self.decisions.cut(self.k, self.state) > self.state.T):
            return None
        return self.want_at(self.k)

    def want_at(self, d: int, state: SeqState | None = None) -> Want:
        """What decision d asks for from `state` (default: the walker's; memoised, every pass asks)."""
        if state is None or state is self.state:
            if d not in self._wants:
                self._wants[d] = self.decisions.want_at(d, self.state)
            return self._wants[d]
        return self.decisions.want_at(d, state)

    def walk(self, book: RequestBook) -> list[Walked]:
        """Take every decision whose proposal is available, in order."""
        out: list[Walked] = []
        K = self.decisions.K if self.stop is None else min(self.decisions.K, self.stop)
        while self.k < K and not self.partial:
            want = self.want_at(self.k)
            g = book.get(want)
            if g is None or not g.finished:
                break
            sc, J = self.scorer.score(g, self.state)
            accepted = accepts(self.decisions.inputs(self.k).accept_u, sc)
            after = self.state.with_suffix(want.cut, g.proposals[J]) if accepted else self.state  # type: ignore[arg-type]
            out.append(Walked(self.k, g, want.cut, sc, accepted, after))
            self.k += 1
            if accepted:  # the state moved: what was asked of the old one is of no more use
                self.state = after
                self._wants.clear()
                self.scorer.clear()
        return out
