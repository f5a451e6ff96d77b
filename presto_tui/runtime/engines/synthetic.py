"""A small deterministic language model for tests and demos (`--backend synthetic`).

Its next-token logits are a fixed pseudo-random function of the last `order`
tokens of the context, so every quantity the samplers use is exact and cheap,
and with a handful of tokens and a short horizon the whole sequence space can
be enumerated (the law tests do).  It is not a model of language: the words
are there so that a demo reads like text.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from presto_tui.runtime.core.types import Proposal, Request

DEMO_WORDS = (
    "<eos>", "the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree",
    "and", "then", "slept", "quietly", "happily", "because", "it", "was", "warm",
    "red", "small", "big", "home", ",", ".",
)


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


class SyntheticEngine:
    """The `Backend` protocol over a `SyntheticLM`; one numpy generator per request seed."""

    name = "synthetic"
    max_len = None  # no context limit

    def __init__(self, lm: SyntheticLM | None = None, words: Sequence[str] | None = None):
        self.lm = lm or SyntheticLM()
        self.eos_id = self.lm.eos_id
        if words is None:
            words = DEMO_WORDS if self.lm.vocab_size == len(DEMO_WORDS) else [
                f"t{i}" for i in range(self.lm.vocab_size)
            ]
        self.words = tuple(words)
        self.model = f"synthetic-v{self.lm.vocab_size}-o{self.lm.order}-s{self.lm.seed}"

    def generate(self, requests: Sequence[Request]) -> list[Proposal]:
        return [self._one(r) for r in requests]

    def _one(self, req: Request) -> Proposal:
        # Inverse-CDF sampling with one uniform per token from the request's own
        # generator: the same request gives the same tokens in any batch.
        rng = np.random.default_rng(req.seed)
        ctx = list(req.prefix)
        toks, lq, lp, ent = [], [], [], []
        extra: list[list[float]] = [[] for _ in req.score_taus]
        for _ in range(req.n_new):
            logp, logq, h = self.lm.log_probs(ctx, req.tau)
            cdf = np.cumsum(np.exp(logq))
            tok = int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(cdf) - 1))
            toks.append(tok)
            lq.append(float(logq[tok]))
            lp.append(float(logp[tok]))
            ent.append(h)
            for tau, out in zip(req.score_taus, extra):
                out.append(float(self.lm.log_probs(ctx, tau)[1][tok]))
            ctx.append(tok)
        return Proposal(tuple(toks), tuple(lq), tuple(lp), tuple(ent), tuple(tuple(e) for e in extra))

    def prefix_cache_stats(self) -> dict:
        return {}

    @property
    def info(self) -> dict:
        return {"engine": "synthetic", "eos_id": self.eos_id, "vocab_size": self.lm.vocab_size, "order": self.lm.order,
                "seed": self.lm.seed, "sharpness": self.lm.sharpness}

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
