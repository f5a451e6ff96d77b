"""The values the samplers work on: requests, proposals and the chain's state.

An engine receives suffix requests (prefix token ids, number of new tokens,
seed, temperature) and returns, for every sampled token, log q_tau and log p0
taken from the same logits, plus the full-vocabulary entropy of p0.  Proposals
always run to the requested horizon: EOS does not stop them (paper appendix
B.1), so every state of a block has the same length T.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    """One suffix to sample: `n_new` tokens after `prefix` from q_tau with `seed`.

    Two requests with equal fields must yield equal proposals, alone or in any
    batch: the exactness of PreSTO rests on it (paper prop. 1, assumption A2).
    """

    prefix: tuple[int, ...]
    n_new: int
    seed: int
    tau: float
    # Extra temperatures at which to report log q of each sampled token, from the same
    # logits (MultiTryMH's mixture proposal); never a second scoring pass.
    score_taus: tuple[float, ...] = ()
    # Stop after EOS (the baselines, appendix E.8); MH proposals always run to the horizon (B.1).
    # Stopping early never changes the tokens before EOS: a request draws one uniform per token.
    stop_eos: bool = False

    def until_eos(self, proposal: Proposal, eos_id: int | None) -> Proposal:
        """`proposal` as a stop-at-EOS request returns it (an engine that decoded past EOS cuts here)."""
        if not self.stop_eos or eos_id is None or eos_id not in proposal.tokens:
            return proposal
        return proposal.head(proposal.tokens.index(eos_id) + 1)


@dataclass(frozen=True)
class Proposal:
    """The sampled tokens of one request and their per-token quantities."""

    tokens: tuple[int, ...]
    logq: tuple[float, ...]  # log q_tau(token | context)
    logp: tuple[float, ...]  # log p0(token | context)
    entropy: tuple[float, ...]  # H(p0(. | context)), natural log
    logq_at: tuple[tuple[float, ...], ...] = ()  # log q at each of the request's score_taus

    def __post_init__(self):
        n = len(self.tokens)
        if not (len(self.logq) == len(self.logp) == len(self.entropy) == n):
            raise ValueError("proposal arrays differ in length")
        if any(len(a) != n for a in self.logq_at):
            raise ValueError("proposal arrays differ in length")

    def head(self, n: int) -> Proposal:
        """The first n tokens and their values."""
        return Proposal(self.tokens[:n], self.logq[:n], self.logp[:n], self.entropy[:n],
                        tuple(a[:n] for a in self.logq_at))

    @classmethod
    def tokens_only(cls, tokens: tuple[int, ...]) -> Proposal:
        """A proposal read from a trace, which records tokens but not per-token values (NaN)."""
        nan = (math.nan,) * len(tokens)
        return cls(tokens, nan, nan, nan)


@dataclass(frozen=True)
class SeqState:
    """A chain state: prompt ids plus T generated tokens with their log-probs.

    Positions are 0-based over the generated tokens; a cut c keeps tokens[:c]
    and regenerates tokens[c:] (the paper's x_{0:c} and y_{c+1:T}).
    """

    prompt: tuple[int, ...]
    tokens: tuple[int, ...] = ()
    logq: tuple[float, ...] = ()
    logp: tuple[float, ...] = ()
    entropy: tuple[float, ...] = ()
    logq_at: tuple[tuple[float, ...], ...] = ()  # per score temperature (MultiTryMH)

    @property
    def T(self) -> int:
        return len(self.tokens)

    @classmethod
    def tokens_only(cls, prompt: tuple[int, ...], tokens: tuple[int, ...]) -> SeqState:
        """A state read from a trace: tokens without per-token values (NaN)."""
        nan = (math.nan,) * len(tokens)
        return cls(prompt, tokens, nan, nan, nan)

    def prefix(self, cut: int) -> tuple[int, ...]:
        """Token ids the model conditions on when resampling from `cut`."""
        return self.prompt + self.tokens[:cut]

    def with_suffix(self, cut: int, proposal: Proposal) -> SeqState:
        """The candidate y = (x_{0:c}, new suffix)."""
        return SeqState(
            self.prompt,
            self.tokens[:cut] + proposal.tokens,
            self.logq[:cut] + proposal.logq,
            self.logp[:cut] + proposal.logp,
            self.entropy[:cut] + proposal.entropy,
            self._join_logq_at(cut, proposal),
        )

    def _join_logq_at(self, cut: int, proposal: Proposal) -> tuple[tuple[float, ...], ...]:
        if not proposal.logq_at or (cut and len(self.logq_at) != len(proposal.logq_at)):
            return ()
        heads = self.logq_at or tuple(() for _ in proposal.logq_at)
        return tuple(a[:cut] + b for a, b in zip(heads, proposal.logq_at))

    def extended(self, proposal: Proposal) -> SeqState:
        return self.with_suffix(self.T, proposal)

    def agrees_before(self, other: SeqState, cut: int) -> bool:
        """True iff both states hold the same tokens on positions < cut."""
        return self.tokens[:cut] == other.tokens[:cut]


def cut_at_eos(tokens: Sequence[int], eos_id: int | None) -> tuple[int, ...]:
    """The tokens a person reads: up to the first EOS (the chain itself always runs to T)."""
    toks = tuple(tokens)
    return toks[: toks.index(eos_id)] if eos_id is not None and eos_id in toks else toks


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """The text up to the first occurrence of any stop string (the stop itself dropped: OpenAI's rule
    and lm-eval's `until`), and whether one was found."""
    ends = [i for s in stops if s and (i := text.find(s)) >= 0]
    return (text[:min(ends)], True) if ends else (text, False)
