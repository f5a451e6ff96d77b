"""What the samplers need from an engine (DESIGN.md sec 5): the protocol, no implementation.

Engines live in `runtime.engines`; the sampling core only ever sees this
protocol, so it imports no engine (an import-linter contract holds it).
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

    def prefix_cache_stats(self) -> dict:
        """Cumulative prefix-token queries and hits ({} if the engine keeps none)."""
        ...

    def encode_prompt(self, text: str, history: Sequence[tuple[str, str]] = ()) -> list[int]:
        """Prompt ids (through the chat template); `history` holds earlier (user, assistant) turns."""
        ...

    def decode(self, token_ids: Sequence[int]) -> str: ...

    def token_pieces(self, token_ids: Sequence[int]) -> list[str]: ...
