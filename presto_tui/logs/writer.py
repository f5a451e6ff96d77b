"""Write session traces: one JSON line per event, flushed as soon as it is written.

A trace is therefore always readable up to the last event that finished;
`close(reason)` appends an end event for a session that was interrupted, so
Ctrl-C leaves a trace that replays up to the last finished round.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Sequence

import orjson

from presto_tui import __version__
from presto_tui.logs.schema import encode, header
from presto_tui.runtime.events import (
    BlockStart, Event, RoundDone, SessionEnd, SessionError, SessionStart,
)

DEFAULT_DIR = Path("sessions")


def default_trace_path(command: str, directory: Path = DEFAULT_DIR) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = directory / f"{stamp}-{command}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{stamp}-{command}-{n}.jsonl"
    return path


def event_token_ids(ev: Event) -> list[int]:
    if isinstance(ev, SessionStart):
        return list(ev.prompt_ids)
    if isinstance(ev, BlockStart):
        return list(ev.tokens)
    if isinstance(ev, RoundDone):
        ids = list(ev.tree.root.prompt) + list(ev.tree.root.tokens)
        for r in ev.tree.requests:
            ids += r.proposal.tokens
        return ids
    if isinstance(ev, SessionEnd):
        return list(ev.tokens)
    return []


class TraceWriter:
    """Appends events of one or more sessions to a new trace file."""

    def __init__(self, path: str | Path, *, command: str, backend: str, model: str, params: dict,
                 pieces: Callable[[Sequence[int]], list[str]], engine: dict | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # 'x': never overwrite (and so never corrupt) an existing trace
        self._f = open(self.path, "xb")
        self._pieces = pieces
        self._seen: set[int] = set()
        self._open_session: SessionStart | None = None
        self._last_tokens: tuple[int, ...] = ()
        self._line(header(__version__, command, backend, model, params, engine, time.time()))

    def _line(self, obj: dict) -> None:
        self._f.write(orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE))
        self._f.flush()

    def write(self, ev: Event) -> None:
        new = sorted({i for i in event_token_ids(ev) if i not in self._seen})
        if new:
            self._line({"type": "vocab", "pieces": {str(i): p for i, p in zip(new, self._pieces(new))}})
            self._seen.update(new)
        self._line(encode(ev))
        if isinstance(ev, SessionStart):
            self._open_session, self._last_tokens = ev, ()
        elif isinstance(ev, BlockStart):
            self._last_tokens = self._last_tokens + tuple(ev.tokens)
        elif isinstance(ev, RoundDone):
            self._last_tokens = ev.tree.final_state.tokens
        elif isinstance(ev, (SessionEnd, SessionError)):
            self._open_session = None

    def end_open_session(self, reason: str, text_of: Callable[[Sequence[int]], str]) -> None:
        """Close a session cut short (Ctrl-C) with an end event at its last finished round."""
        if self._open_session is not None:
            self.write(SessionEnd(reason, self._last_tokens, text_of(self._last_tokens)))

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
