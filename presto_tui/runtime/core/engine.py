"""What the samplers need from an engine (docs/extending.md#3-an-engine): the protocol, no implementation.

Engines live in `runtime.engines`; the sampling core only ever sees this
protocol, so it imports no engine (an import-linter contract holds it).

Two ways to use an engine, the second underneath the first:
- `generate(requests)`: one batch, all proposals back (a PreSTO round);
- `submit` / `abort` / `step`: an engine loop.  `step()` advances every live
  request by (about) one token and hands back those that finished; requests
  can join and leave between steps (continuous batching), which is what the
  streaming rule and many chains on one engine need.
`clock()` is the time the engine's work is measured in: wall time on real
engines, a deterministic cost per step on the synthetic one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from presto_tui.runtime.core.types import Proposal, Request


@runtime_checkable
class Engine(Protocol):
    name: str  # e.g. "synthetic", "vllm"
    model: str  # what a person would call the model
    eos_id: int | None
    @property
    def max_len(self) -> int | None:
        """Prompt + horizon must fit; None: unbounded."""
        ...

    @property
    def info(self) -> dict: ...  # engine, device, dtype, eos_id, ... (recorded in traces)

    def generate(self, requests: Sequence[Request]) -> list[Proposal]:
        """One proposal per request; the same request gives the same proposal in any batch."""
        ...

    def submit(self, request: Request) -> int:
        """Start a request; returns its handle."""
        ...

    def abort(self, handle: int) -> int:
        """Stop a live request (no-op if it has finished); returns the tokens it had decoded."""
        ...

    def step(self) -> list[tuple[int, Proposal]]:
        """Advance every live request; (handle, proposal) of each that finished."""
        ...

    def progress(self, handle: int) -> int:
        """Tokens a live request has decoded so far (an estimate where the engine hides it)."""
        ...

    def partial(self, handle: int) -> tuple[int, ...]:
        """The tokens a live request has decoded so far (empty where the engine shows none before
        the end); the streaming rule requests later decisions cut inside them."""
        ...

    @property
    def live(self) -> int:
        """Requests submitted and not yet finished or aborted."""
        ...

    def clock(self) -> float: ...

    def prefix_cache_stats(self) -> dict:
        """Cumulative prefix-token queries and hits ({} if the engine keeps none)."""
        ...

    def drop_caches(self) -> None:
        """Let go of what the engine keeps only to be faster next time (the synthetic model's memo of
        computed logits), so that its memory can go back to the system: the server calls it, in the
        thread that owns the engine, as a large request has ended and as it lets the request go.  Nothing
        to do for most engines (`LoopEngine`'s does nothing; the server skips an engine without it)."""
        ...

    def kv_peak(self) -> float | None:
        """The largest fraction of the KV-cache pool in use after any engine step since the last call
        (paper D.2's peak KV-pool use); each call starts a new window.  None: the engine has no
        KV pool to read (synthetic, transformers)."""
        ...

    def encode_prompt(self, text: str, history: Sequence[tuple[str, str]] = ()) -> list[int]:
        """Prompt ids (through the chat template); `history` holds earlier (user, assistant) turns."""
        ...

    def decode(self, token_ids: Sequence[int]) -> str: ...

    def token_pieces(self, token_ids: Sequence[int]) -> list[str]: ...
