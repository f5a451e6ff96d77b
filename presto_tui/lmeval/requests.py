"""lm-eval's generation requests as presto-tui sessions (this module imports no lm-eval).

A `generate_until` request is (context, gen_kwargs).  Our chains generate a fixed
n tokens and ignore EOS by design, so:

- `max_gen_toks` is n (`-n` / `max_new_tokens` overrides every request's; a request
  without one gets presto-tui's default n);
- `until` (stop strings) is applied to the answer text: cut at the first occurrence
  of any of them, the stop itself not returned, as lm-eval's own models do; the
  answer was already cut at EOS by the session;
- the sampling settings lm-eval may pass (`temperature`, `do_sample`, `top_p`, ...)
  have no meaning here: the method's law is set by alpha and tau.  They are named
  once in a warning and otherwise ignored.

Every request runs with its own seed (`request_seed`), a function of the methods'
seed, the context and how many identical requests came before it in the batch
(lm-eval's `repeats`), so items are independent draws, a task's repeats differ, and
every method meets the same seed on the same item, whatever the order or --limit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from presto_tui.api.params import LIMITS, ParamError, SamplerParams
from presto_tui.errors import InputError

KNOWN_KWARGS = ("until", "max_gen_toks")


@dataclass(frozen=True)
class Ask:
    """One generation request, checked."""

    context: str
    until: tuple[str, ...]
    max_gen_toks: int | None  # None: the task set none
    ignored: tuple[str, ...] = ()  # lm-eval's settings that do not apply to power sampling


def read_ask(context: Any, gen_kwargs: Any, where: str = "request") -> Ask:
    """Check one request's arguments; InputError (one line) names what is wrong."""
    if not isinstance(context, str):
        raise InputError(f"{where}: the context should be text, got {type(context).__name__}")
    kwargs: Mapping[str, Any] = gen_kwargs if gen_kwargs is not None else {}
    if not isinstance(kwargs, Mapping):
        raise InputError(f"{where}: generation settings should be a mapping, got {type(gen_kwargs).__name__}")
    until = kwargs.get("until")
    if until is None:
        stops: tuple[str, ...] = ()
    elif isinstance(until, str):
        stops = (until,)
    elif isinstance(until, Sequence) and all(isinstance(s, str) for s in until):
        stops = tuple(until)
    else:
        raise InputError(f"{where}: until should be a string or a list of strings, got {until!r}")
    n = kwargs.get("max_gen_toks")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int):
            raise InputError(f"{where}: max_gen_toks should be a whole number, got {n!r}")
        LIMITS["max_new_tokens"].check(f"{where}: max_gen_toks", n)
    ignored = tuple(sorted(str(k) for k in kwargs if k not in KNOWN_KWARGS))
    return Ask(context, tuple(s for s in stops if s), n, ignored)


def request_seed(seed: int, context: str, occurrence: int) -> int:
    """The seed of a request's session: a function of the methods' seed, the context and the number of
    identical contexts before it (repeats draw afresh), not of the request's place in the batch."""
    digest = hashlib.blake2b(context.encode("utf-8"), digest_size=8).digest()
    key = (0x4C4D, int.from_bytes(digest, "big"), occurrence)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))
    return int(rng.integers(0, 2**63 - 1))


def occurrences(contexts: Sequence[str]) -> list[int]:
    """For each context, how many identical contexts came before it."""
    seen: dict[str, int] = {}
    out = []
    for c in contexts:
        out.append(seen.get(c, 0))
        seen[c] = out[-1] + 1
    return out


def ask_params(base: SamplerParams, max_gen_toks: int | None, n: int | None, where: str = "request") -> SamplerParams:
    """The session parameters of a request: `base` with n = `n` if given (the person's -n), else the
    request's max_gen_toks, else base's own n; checked (a block size that does not divide it, ...)."""
    length = n if n is not None else max_gen_toks if max_gen_toks is not None else base.max_new_tokens
    try:
        return base.with_(max_new_tokens=length).validate()
    except ParamError as e:
        source = "" if n is not None or max_gen_toks is None else f" (its max_gen_toks is {max_gen_toks})"
        raise InputError(f"{where}{source}: {e.line}") from None
