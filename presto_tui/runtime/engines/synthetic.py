"""A small deterministic language model for tests and demos (`--backend synthetic`).

Its next-token logits are a fixed pseudo-random function of the last `order`
tokens of the context, so every quantity the samplers use is exact and cheap,
and with a handful of tokens and a short horizon the whole sequence space can
be enumerated (the law tests do).  It is not a model of language: the words
are there so that a demo reads like text.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from presto_tui.runtime.core.types import Proposal, Request
from presto_tui.runtime.engines.base import LoopEngine

DEMO_WORDS = (
    "<eos>", "the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree",
    "and", "then", "slept", "quietly", "happily", "because", "it", "was", "warm",
    "red", "small", "big", "home", ",", ".",
)


MAX_RESPONSES = 200_000  # the most responses power_law enumerates


@dataclass(frozen=True)
class ResponseLaw:
    """A law over every response of n tokens from a vocabulary of V, in lexicographic order: the
    response y has index sum_i y_i V^(n-1-i)."""

    vocab: int
    n: int
    probs: np.ndarray  # pi_alpha, summing to 1
    logp0: np.ndarray  # log p0(y | prompt) of each response

    def index(self, tokens: Sequence[int]) -> int | None:
        """The response's index, or None for tokens that are not a response of n tokens."""
        if len(tokens) != self.n or any(not 0 <= t < self.vocab for t in tokens):
            return None
        i = 0
        for t in tokens:
            i = i * self.vocab + int(t)
        return i


def _log_softmax(z: np.ndarray) -> np.ndarray:
    m = z.max()
    return z - (m + np.log(np.exp(z - m).sum()))


class SyntheticLM:
    """Logits z(context) = sharpness * N(0, 1)^V, seeded by (seed, last `order` tokens)."""

    def __init__(self, vocab_size: int = len(DEMO_WORDS), order: int = 2, seed: int = 0,
                 sharpness: float = 2.0, eos_id: int | None = 0):
        if vocab_size < 2:
            raise ValueError("vocab_size must be >= 2")
        self.vocab_size = vocab_size
        self.order = order
        self.seed = seed
        self.sharpness = sharpness
        self.eos_id = eos_id
        self._logits = lru_cache(maxsize=1 << 16)(self._logits_uncached)
        self._log_probs = lru_cache(maxsize=1 << 16)(self._log_probs_uncached)

    def forget(self) -> None:
        """Empty the memo (it refills as contexts come again)."""
        self._logits.cache_clear()
        self._log_probs.cache_clear()

    def _logits_uncached(self, key: tuple[int, ...]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, len(key), *key])
        return self.sharpness * rng.standard_normal(self.vocab_size)

    def logits(self, context: Sequence[int]) -> np.ndarray:
        key = tuple(context[-self.order:]) if self.order else ()
        return self._logits(key)

    def log_probs(self, context: Sequence[int], tau: float) -> tuple[np.ndarray, np.ndarray, float]:
        """(log p0, log q_tau, entropy of p0) of the next token, from one set of logits."""
        return self._log_probs(tuple(context[-self.order:]) if self.order else (), tau)

    def _log_probs_uncached(self, key: tuple[int, ...], tau: float) -> tuple[np.ndarray, np.ndarray, float]:
        z = self._logits(key)
        logp = _log_softmax(z)
        logq = _log_softmax(z / tau)
        entropy = float(-(np.exp(logp) * logp).sum())
        return logp, logq, entropy


@dataclass
class _Live:
    request: Request
    rng: np.random.Generator
    ctx: list[int]
    toks: list[int] = field(default_factory=list)
    lq: list[float] = field(default_factory=list)
    lp: list[float] = field(default_factory=list)
    ent: list[float] = field(default_factory=list)
    extra: list[list[float]] = field(default_factory=list)


class SyntheticEngine(LoopEngine):
    """The `Engine` protocol over a `SyntheticLM`, stepped token by token.

    Each request samples by inverse CDF with one uniform per token from its own
    generator (seeded by the request's seed), so the same request gives the same
    tokens in any batch.  Its clock is virtual and deterministic: one step costs
    `step_s * (1 + slope * (live - 1 + prefill * taken))` with `live` requests in the batch,
    `taken` of them submitted since the step before (the cost model of
    docs/streaming.md#the-simulation-behind-the-rule; `prefill`, 0 unless given, is what a
    request's start costs a real engine, which first computes the tokens of its prefix past the
    last cached block, in live requests' worth), so tests and benchmarks can reason about time
    without a real model.
    """

    name = "synthetic"
    max_len = None  # no context limit

    def __init__(self, lm: SyntheticLM | None = None, words: Sequence[str] | None = None,
                 step_s: float = 0.01, slope: float = 0.05, prefill: float = 0.0):
        self.lm = lm or SyntheticLM()
        self.eos_id = self.lm.eos_id
        if words is None:
            words = DEMO_WORDS if self.lm.vocab_size == len(DEMO_WORDS) else [
                f"t{i}" for i in range(self.lm.vocab_size)
            ]
        self.words = tuple(words)
        self.model = (f"synthetic-v{self.lm.vocab_size}-o{self.lm.order}-s{self.lm.seed}"
                      + (f"-x{self.lm.sharpness:g}" if self.lm.sharpness != SyntheticLM().sharpness else "")
                      + ("-noeos" if self.lm.eos_id is None else ""))
        self.step_s, self.slope, self.prefill = step_s, slope, prefill
        self._live: dict[int, _Live] = {}
        self._handles = itertools.count()
        self._clock = 0.0
        self._taken = 0  # requests submitted since the last step: they start with their prefill

    # -- the engine loop ----------------------------------------------------------
    def submit(self, request: Request) -> int:
        h = next(self._handles)
        self._taken += 1
        self._live[h] = _Live(request, np.random.default_rng(request.seed), list(request.prefix),
                              extra=[[] for _ in request.score_taus])
        return h

    def abort(self, handle: int) -> int:
        live = self._live.pop(handle, None)
        return len(live.toks) if live else 0

    def progress(self, handle: int) -> int:
        live = self._live.get(handle)
        return len(live.toks) if live else 0

    def partial(self, handle: int) -> tuple[int, ...]:
        live = self._live.get(handle)
        return tuple(live.toks) if live else ()

    @property
    def live(self) -> int:
        return len(self._live)

    def clock(self) -> float:
        return self._clock

    def step(self) -> list[tuple[int, Proposal]]:
        if not self._live:
            return []
        rows = len(self._live) - 1 + self.prefill * self._taken
        self._taken = 0
        self._clock += self.step_s * (1 + self.slope * rows)
        done = []
        for h, r in list(self._live.items()):
            if len(r.toks) < r.request.n_new:
                self._sample_one(r)
            if len(r.toks) >= r.request.n_new or (r.request.stop_eos and r.toks[-1] == self.eos_id):
                del self._live[h]
                done.append((h, self.finished(r.request, Proposal(
                    tuple(r.toks), tuple(r.lq), tuple(r.lp), tuple(r.ent), tuple(tuple(e) for e in r.extra)))))
        return done

    def finished(self, request: Request, proposal: Proposal) -> Proposal:
        """A hook on each finished proposal (tests perturb records through it)."""
        return proposal

    def _sample_one(self, r: _Live) -> None:
        logp, logq, h = self.lm.log_probs(r.ctx, r.request.tau)
        cdf = np.cumsum(np.exp(logq))
        tok = int(min(np.searchsorted(cdf, r.rng.random() * cdf[-1], side="right"), len(cdf) - 1))
        r.toks.append(tok)
        r.lq.append(float(logq[tok]))
        r.lp.append(float(logp[tok]))
        r.ent.append(h)
        for tau, out in zip(r.request.score_taus, r.extra):
            out.append(float(self.lm.log_probs(r.ctx, tau)[1][tok]))
        r.ctx.append(tok)

    def drop_caches(self) -> None:
        # The memo's entries (arrays, keys, list cells: up to 2 x 65,536) are made in the engine thread as
        # a request runs, so they end up spread over the pages the request used, and keep them resident
        # after it: item 2c of benchmarks/bench_admission.py left the server 84 -> 93 MiB with the memo
        # kept, 84 -> 89 with it dropped (`serve.host.give_back_memory`).
        self.lm.forget()

    @property
    def info(self) -> dict:
        return {"engine": "synthetic", "eos_id": self.eos_id, "vocab_size": self.lm.vocab_size, "order": self.lm.order,
                "seed": self.lm.seed, "sharpness": self.lm.sharpness}

    # -- the exact law (eval --frontier) ------------------------------------------------
    def not_enumerable(self, n: int) -> str | None:
        """Why the power law over responses of n tokens cannot be enumerated here (None: it can)."""
        if self.eos_id is not None:
            # an MH chain's state runs past EOS to n tokens while the baselines stop at it: their
            # targets differ, so no one pi_alpha over responses holds for every method
            return "the synthetic model has an EOS token (give --synthetic-vocab V: a model of V tokens without one)"
        count = self.lm.vocab_size ** n
        if count > MAX_RESPONSES:
            return (f"its {self.lm.vocab_size}^{n} responses of n = {n} tokens are too many to enumerate (at most "
                    f"{MAX_RESPONSES}): lower -n or --synthetic-vocab")
        return None

    def power_law(self, prompt_ids: Sequence[int], n: int, alpha: float) -> ResponseLaw:
        """pi_alpha(y) ∝ p0(y | prompt)^alpha over every response y of n tokens, exactly, from the
        model's own conditionals: the target every power sampler here aims at (one block of n
        tokens; without EOS every method's answer is such a y)."""
        why = self.not_enumerable(n)
        if why is not None:
            raise ValueError(why)
        V, prompt = self.lm.vocab_size, list(prompt_ids)
        prefixes: list[tuple[int, ...]] = [()]
        logp = np.zeros(1)
        for _ in range(n):  # level by level: each prefix's row of log p0 over the next token
            rows = np.stack([self.lm.log_probs(prompt + list(y), 1.0)[0] for y in prefixes])
            logp = (logp[:, None] + rows).reshape(-1)
            prefixes = [y + (v,) for y in prefixes for v in range(V)]
        z = alpha * logp
        w = np.exp(z - z.max())
        return ResponseLaw(V, n, w / w.sum(), logp)

    def encode_prompt(self, text: str, history: Sequence[tuple[str, str]] = ()) -> list[int]:
        index = {w: i for i, w in enumerate(self.words)}
        ids = []
        for word in " ".join([*(u + " " + a for u, a in history), text]).split():
            if word in index:
                ids.append(index[word])
            else:  # stable, not Python's salted hash
                ids.append(1 + sum(word.encode()) % (self.lm.vocab_size - 1))
        return ids or [1 % self.lm.vocab_size]

    def token_pieces(self, token_ids: Sequence[int]) -> list[str]:
        return [" " + self.words[t] for t in token_ids]

    def decode(self, token_ids: Sequence[int]) -> str:
        return "".join(self.token_pieces(token_ids)).lstrip(" ")
