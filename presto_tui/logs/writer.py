"""Write session traces: one JSON line per event, flushed as soon as it is written.

A trace is therefore always readable up to the last event that finished;
`close(reason)` appends an end event for a session that was interrupted, so
Ctrl-C leaves a trace that replays up to the last finished round.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import orjson

from presto_tui import __version__
from presto_tui.logs.schema import encode, header
from presto_tui.runtime.session.events import Event, SessionEnd, SessionError, SessionStart
from presto_tui.runtime.session.summary import SessionSummary
from presto_tui.runtime.session.vocab import Vocab

DEFAULT_DIR = Path("sessions")


def default_trace_path(command: str, directory: Path = DEFAULT_DIR) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = directory / f"{stamp}-{command}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{stamp}-{command}-{n}.jsonl"
    return path


class TraceWriter:
    """Appends events of one or more sessions to a new trace file."""

    def __init__(self, path: str | Path, *, command: str, backend: str, model: str, params: dict,
                 pieces: Callable[[Sequence[int]], list[str]], engine: dict | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # 'x': never overwrite (and so never corrupt) an existing trace
        self._f = open(self.path, "xb")  # noqa: SIM115 - open for the writer's lifetime
        self._vocab = Vocab(pieces)
        self._open: SessionSummary | None = None  # the session being written, if any
        self._line(header(__version__, command, backend, model, params, engine, time.time()))

    def _line(self, obj: dict) -> None:
        self._f.write(orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE))
        self._f.flush()

    def write(self, ev: Event) -> None:
        new = self._vocab.new_pieces(ev)
        if new:
            self._line({"type": "vocab", "pieces": {str(i): p for i, p in new.items()}})
        self._line(encode(ev))
        if isinstance(ev, SessionStart):
            self._open = SessionSummary()
        if self._open is not None:
            self._open.update(ev)
            if isinstance(ev, (SessionEnd, SessionError)):
                self._open = None

    def end_open_session(self, reason: str, text_of: Callable[[Sequence[int]], str]) -> None:
        """Close a session cut short (Ctrl-C) with an end event at its last finished round."""
        if self._open is not None:
            tokens = self._open.tokens
            self.write(SessionEnd(reason, tokens, text_of(tokens)))

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
