"""What every engine shares: `generate` written on top of the engine loop (submit, step)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from presto_tui.errors import EngineError
from presto_tui.runtime.core.types import Proposal, Request


class LoopEngine:
    """`generate` for engines that implement submit/step: submit all, step until all finished."""

    def generate(self, requests: Sequence[Request]) -> list[Proposal]:
        """One batch to completion; needs the engine to itself (an engine loop owns it otherwise)."""
        if self.live:  # type: ignore[attr-defined]
            raise EngineError("generate() on an engine that an engine loop is using")
        handles = [self.submit(r) for r in requests]  # type: ignore[attr-defined]
        want = set(handles)
        got: dict[int, Proposal] = {}
        try:
            while want - got.keys():
                if not self.live:  # type: ignore[attr-defined]
                    raise EngineError("the engine lost a request before it finished")
                for h, prop in self.step():  # type: ignore[attr-defined]
                    if h in want:
                        got[h] = prop
        except BaseException:
            for h in want - got.keys():
                self.abort(h)  # type: ignore[attr-defined]
            raise
        return [got[h] for h in handles]

    def clock(self) -> float:
        return time.perf_counter()

    def prefix_cache_stats(self) -> dict:
        return {}

    def kv_peak(self) -> float | None:
        return None  # no KV pool (vLLM reads its own)

    def drop_caches(self) -> None:
        return None  # nothing kept beyond what live requests hold (vLLM's KV pool is its own, preallocated)
