"""A block's MH decisions under decision inputs: their random inputs, cuts and requests."""

from __future__ import annotations

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import DecisionInputs, decision_inputs, extension_seed
from presto_tui.runtime.core.types import Request, SeqState
from presto_tui.runtime.samplers.families import SamplerFamily


class Want:
    """What the walker asks for at decision d from a state whose tokens before `cut` are `prefix`.

    The block's end is the pseudo-decision d = K with cut T: the next block's extension,
    asked for by the whole state.  A dictionary key looked up thousands of times per
    scheduling pass: its hash (over the whole prefix) is computed once.
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


class Decisions:
    """Decision d's inputs come from the stream keyed by (seed, block, d) (paper prop. 1's
    coupling), so its request from a state is a function of that state's tokens before the cut."""

    def __init__(self, params: SamplerParams, family: SamplerFamily, block: int, state: SeqState):
        self.params, self.family, self.block = params, family, block
        self.prompt = state.prompt
        self.T, self.K = state.T, params.steps
        self._root = self.start = state  # the block's start (any state of it serves a state-independent law)
        self._inputs: dict[int, DecisionInputs] = {}
        self._cuts: dict[int, int] = {}
        self.state_dependent = family.law.state_dependent
        self.next_block = block + 1 if block + 1 < params.n_blocks else None

    def begin(self, state: SeqState) -> None:
        """The block's extension arrived after the block began (`state`: its whole start); the cuts of a
        state-independent law, drawn from a stand-in of the same length, stay what they were."""
        self.start = state

    def inputs(self, d: int) -> DecisionInputs:
        if d not in self._inputs:
            self._inputs[d] = decision_inputs(self.params.seed, self.block, d)
        return self._inputs[d]

    def cut(self, d: int, state: SeqState) -> int:
        """Decision d's cut from `state` (the same for every state unless the law depends on it)."""
        if self.state_dependent:
            return self.family.law.cut(self.inputs(d).cut_u, state)
        if d not in self._cuts:
            self._cuts[d] = self.family.law.cut(self.inputs(d).cut_u, self._root)
        return self._cuts[d]

    def want_at(self, d: int, state: SeqState) -> Want:
        """What decision d asks for from `state` (d = K: the next block's extension)."""
        if d >= self.K:
            return Want(self.K, self.T, state.tokens)
        cut = self.cut(d, state)
        return Want(d, cut, state.tokens[:cut])

    def requests(self, want: Want) -> tuple[Request, ...]:
        """The requests a want makes (MultiTryMH: one per candidate)."""
        prefix = self.prompt + want.prefix
        if want.d >= self.K:
            assert self.next_block is not None
            p = self.params
            return (Request(prefix, p.block, extension_seed(p.seed, self.next_block), p.proposal_tau,
                            self.family.score_taus),)
        return tuple(Request(prefix, self.T - want.cut, seed, tau, self.family.score_taus)
                     for seed, tau in self.family.draws(self.inputs(want.d)))
