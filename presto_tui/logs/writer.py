"""Write session traces: one JSON line per event, flushed as soon as it is written.

A trace is therefore always readable up to the last event that finished;
`close(reason)` appends an end event for a session that was interrupted, so
Ctrl-C leaves a trace that replays up to the last finished round.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import orjson

from presto_tui import __version__
from presto_tui.errors import InputError, OutputError
from presto_tui.files import make_folders, output_path
from presto_tui.logs.schema import encode, header
from presto_tui.runtime.session.events import TRANSIENT, Event, SessionEnd, SessionError, SessionStart
from presto_tui.runtime.session.summary import SessionSummary
from presto_tui.runtime.session.vocab import Vocab
from presto_tui.safetext import visible

K = TypeVar("K", bound=Hashable)

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
    """Appends events of one or more sessions to a new trace file.

    Sessions of chains that run at once interleave; every event line names its
    session ("sid").  Transient events (progress for a person) are not written.
    A failed write (a full disk) raises OutputError once; everything written
    before it stays readable, and `close` never raises after it.  An event that
    cannot be encoded (a bug) costs only that event: a `gap` line takes its place,
    naming what was lost, `gaps` collects the messages, and the session goes on
    to its end, so one bad event never loses the end of a session.
    """

    def __init__(self, path: str | Path, *, command: str, backend: str, model: str, params: dict,
                 pieces: Callable[[Sequence[int]], list[str]], engine: dict | None = None, append: bool = False):
        self.path = Path(path)
        make_folders(self.path.parent, "trace", error=OutputError)  # the one rule for every output (files.py)
        try:
            # 'x': never overwrite (and so never corrupt) an existing trace; `append` (a resumed run): after
            # its last whole line (a line cut off mid-write would break the first appended one)
            self._f = open(self.path, "r+b" if append else "xb")  # noqa: SIM115 - open for the writer's lifetime
            if append:
                self._f.truncate(_whole_lines(self._f))
                self._f.seek(0, os.SEEK_END)
        except FileExistsError:
            raise
        except OSError as e:
            raise OutputError(f"{visible(str(self.path), keep_newlines=False)}: cannot write trace "
                              f"({e.strerror})") from None
        self._vocab = Vocab(pieces)
        self._open: dict[str, SessionSummary] = {}  # sessions started and not ended, by id
        self._last: str | None = None
        self._broken = False
        self.gaps: list[str] = []  # events that could not be encoded
        if not append:
            self._line(header(__version__, command, backend, model, params, engine, time.time()))

    def _line(self, obj: dict) -> None:
        self._raw(orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE))

    def _raw(self, data: bytes) -> None:
        if self._broken:
            raise OutputError(f"{visible(str(self.path), keep_newlines=False)}: the trace could not be written")
        try:
            self._f.write(data)
            self._f.flush()
        except OSError as e:
            self._broken = True
            raise OutputError(f"{visible(str(self.path), keep_newlines=False)}: cannot write trace "
                              f"({e.strerror or e})") from None

    def write(self, ev: Event, sid: str | None = None) -> None:
        """Record `ev` of session `sid` (default: the session started last)."""
        if isinstance(ev, TRANSIENT):
            return
        if isinstance(ev, SessionStart):
            sid = ev.session_id
            self._open[sid] = SessionSummary()
            self._last = sid
        sid = sid or self._last
        new = self._vocab.new_pieces(ev)
        if new:
            self._line({"type": "vocab", "pieces": {str(i): p for i, p in new.items()}})
        try:
            line = encode(ev)
            if sid is not None and not isinstance(ev, SessionStart):
                line["sid"] = sid
            data = orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
        except Exception as e:  # a bug in an event or its encoding: lose that event, not the session
            if isinstance(ev, SessionStart):
                raise
            what = f"{type(ev).__name__} event of session {sid}: {type(e).__name__}: {e}"
            self.gaps.append(what)
            self._line({"type": "gap", "sid": sid, "event": type(ev).__name__, "reason": f"{type(e).__name__}: {e}"})
        else:
            self._raw(data)
        if sid in self._open:
            self._open[sid].update(ev)
            if isinstance(ev, (SessionEnd, SessionError)):
                del self._open[sid]

    @property
    def broken(self) -> bool:
        """A write failed (the file holds everything before it)."""
        return self._broken

    def end_open_session(self, reason: str, text_of: Callable[[Sequence[int]], str]) -> None:
        """End every session cut short (Ctrl-C) with an end event at its last finished step."""
        if self._broken:
            return
        for sid in list(self._open):
            tokens = self._open[sid].tokens
            self.write(SessionEnd(reason, tokens, text_of(tokens)), sid)

    def close(self) -> None:
        if self._f.closed:
            return
        with contextlib.suppress(OSError):  # already reported by the write that failed
            self._f.flush()
            os.fsync(self._f.fileno())
        with contextlib.suppress(OSError):
            self._f.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _whole_lines(f) -> int:
    """The length of a file's whole lines: up to its last newline."""
    end = f.seek(0, os.SEEK_END)
    pos, chunk = end, 1 << 16
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        data = f.read(pos - start)
        nl = data.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        pos = start
    return 0


def append_trace(path: Path, command: str, engine, params, known: Collection[str] = ()):
    """A resumed run's trace: the first run's, its sessions cut short by the kill ended `cancelled` at
    their last finished round (as Ctrl-C ends them), the new sessions after them; (writer, the sessions
    it held but `known`, those the run log holds, which are passed over unread)."""
    from presto_tui.logs.reader import read_trace

    trace = read_trace(path, skip=known)  # (a half-written last line is dropped: the writer cuts it off)
    writer = TraceWriter(path, command=command, backend=engine.name, model=engine.model, params=params.to_dict(),
                         pieces=engine.token_pieces, engine=dict(engine.info), append=True)
    for s in trace.sessions:
        if not s.ended:
            tokens = s.summary().tokens
            writer.write(SessionEnd("cancelled", tokens, trace.text(tokens)), s.start.session_id)
    return writer, trace


def recorded(events: Iterable[tuple[K, Event]], trace: TraceWriter | None) -> Iterator[tuple[K, Event]]:
    """Pass (chain, event) pairs through, writing each to `trace` under its chain's session id
    (chains interleave, so the writer's "session started last" is not theirs)."""
    sids: dict[K, str] = {}
    for key, ev in events:
        if isinstance(ev, SessionStart):
            sids[key] = ev.session_id
        if trace is not None:
            trace.write(ev, sids.get(key))
        yield key, ev


def trace_path(trace: Path | None, no_trace: bool, command: str) -> Path | None:
    """Where a command's trace goes (checked before any work), or None with --no-trace."""
    if no_trace:
        if trace is not None:
            raise InputError("--trace and --no-trace contradict each other")
        return None
    return output_path(trace or default_trace_path(command))


def open_trace(path: Path | None, command: str, engine, params) -> TraceWriter | None:
    """The trace of a command's sessions on `engine` (None: no trace)."""
    if path is None:
        return None
    try:
        return TraceWriter(path, command=command, backend=engine.name, model=engine.model,
                           params=params.to_dict(), pieces=engine.token_pieces, engine=dict(engine.info))
    except FileExistsError:  # (the writer reports any other failure as an OutputError itself)
        raise InputError(f"{visible(str(path), keep_newlines=False)}: trace file exists already; "
                         "choose another --trace path") from None
