"""Read traces as untrusted input: validate every line, report `file:line: what is wrong`.

- Regular files only: a FIFO or a device would hang or never end.
- JSON only (orjson); nothing is evaluated or unpickled; every line passes the
  schema's gate (`schema.decode`), whose output every consumer can show.
- A truncated final line (a session cut off mid-write) is dropped with a
  warning; everything before it reads normally.  A session without an end
  event (the writer was killed) is kept and marked cut short.
- A `gap` line (an event the writer could not encode) is skipped with a
  warning naming what is missing.
- Lines longer than `MAX_LINE` bytes are refused without being parsed.
- Events of several sessions may interleave (many chains on one engine):
  schema 1.1 lines carry their session's id.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from presto_tui.errors import TraceError
from presto_tui.files import readable_file
from presto_tui.logs.schema import SchemaError, check_header, decode, gap_of, vocab_of
from presto_tui.runtime.session.events import Event, RoundDone, SessionEnd, SessionError, SessionStart
from presto_tui.runtime.session.summary import SessionSummary, summarize
from presto_tui.safetext import visible

MAX_LINE = 8 * 2**20  # the largest real round line (T=1024, N=64) is well under 1 MiB


@dataclass
class SessionTrace:
    start: SessionStart
    events: list[Event] = field(default_factory=list)  # from its SessionStart on
    first_line: int = 0
    last_line: int = 0  # of its last event: sessions whose lines interleave ran at once

    @property
    def rounds(self) -> list[RoundDone]:
        return [e for e in self.events if isinstance(e, RoundDone)]

    @property
    def ended(self) -> bool:
        return isinstance(self.events[-1], (SessionEnd, SessionError))

    def summary(self) -> SessionSummary:
        return summarize(self.events)


@dataclass
class Trace:
    path: Path
    header: dict
    sessions: list[SessionTrace]
    vocab: dict[int, str]
    warnings: list[str]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.vocab.get(i, f"<{i}>") for i in ids]

    def text(self, ids: Sequence[int]) -> str:
        return "".join(self.pieces(ids))


def _lines(path: Path, shown: str) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, complete) with the size limit enforced before parsing."""
    with open(path, "rb") as f:
        n = 0
        while True:
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_LINE:
                raise TraceError(f"{shown}:{n}: line longer than {MAX_LINE // 2**20} MiB, refused")
            yield n, raw, raw.endswith(b"\n")


def _parse(shown: str, n: int, raw: bytes) -> object:
    if b"\x00" in raw:
        raise TraceError(f"{shown}:{n}: binary data, not a JSON line")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        msg = str(e).split(":")[0]
        if _cut_short(raw, e.pos):
            raise TraceError(f"{shown}:{n}: line {n} is cut short: it ends inside its JSON object "
                             f"({msg})") from None
        raise TraceError(f"{shown}:{n}: line {n} is damaged: not valid JSON at column {e.colno} ({msg})") from None


def _cut_short(raw: bytes, pos: int) -> bool:
    """Whether JSON that failed at `pos` is a valid line's beginning: the parser ran out of line
    inside a value (a string, a number, a list, an object, or a word such as `fals`)."""
    tail = raw[pos:].rstrip(b"\r\n")
    return not tail or any(w.startswith(tail) for w in (b"true", b"false", b"null"))


def read_trace(path: str | Path) -> Trace:
    """Read and validate a whole trace; raise TraceError on the first bad line."""
    path = readable_file(Path(path), "trace file", error=TraceError)
    shown = visible(str(path), keep_newlines=False)
    head: dict | None = None
    sessions: list[SessionTrace] = []
    by_id: dict[str, SessionTrace] = {}
    vocab: dict[int, str] = {}
    warnings: list[str] = []
    try:
        for n, raw, complete in _lines(path, shown):
            if not raw.strip():
                if complete:
                    continue
                break
            try:
                obj = _parse(shown, n, raw)
            except TraceError:
                if not complete and head is not None:  # cut off mid-write: keep what came before
                    warnings.append(f"{shown}:{n}: truncated final line ignored")
                    break
                raise
            try:
                if head is None:
                    head = check_header(obj)
                    continue
                if isinstance(obj, dict) and obj.get("type") == "vocab":
                    vocab.update(vocab_of(obj))
                    continue
                if isinstance(obj, dict) and obj.get("type") == "gap":
                    warnings.append(f"{shown}:{n}: {gap_of(obj)}")
                    continue
                ev = decode(obj)
                sid = obj.get("sid") if isinstance(obj, dict) else None
            except SchemaError as e:
                raise TraceError(f"{shown}:{n}: {e}") from None
            except RecursionError:
                raise TraceError(f"{shown}:{n}: nested too deeply") from None
            if isinstance(ev, SessionStart):
                if ev.session_id in by_id:
                    raise TraceError(f"{shown}:{n}: a second session_start for session {ev.session_id[:20]!r}")
                sessions.append(SessionTrace(ev, [ev], n, n))
                by_id[ev.session_id] = sessions[-1]
                continue
            if sid is not None:
                if not isinstance(sid, str) or sid not in by_id:
                    raise TraceError(f"{shown}:{n}: {type(ev).__name__} event before any session_start of "
                                     f"its session {visible(str(sid)[:20])!r}")
                sess = by_id[sid]
            elif sessions:
                sess = sessions[-1]
            else:
                raise TraceError(f"{shown}:{n}: {type(ev).__name__} event before any session_start")
            if sess.ended:
                raise TraceError(f"{shown}:{n}: event after its session ended")
            sess.events.append(ev)
            sess.last_line = n
    except OSError as e:
        raise TraceError(f"{shown}: cannot read ({e.strerror})") from None
    if head is None:
        raise TraceError(f"{shown}:1: empty file, not a presto-tui trace")
    for i, s in enumerate(sessions):
        if not s.ended:
            warnings.append(f"{shown}: session {i + 1} was cut short (no session_end): it shows up to its last "
                            "finished round")
    return Trace(path, head, sessions, vocab, warnings)
