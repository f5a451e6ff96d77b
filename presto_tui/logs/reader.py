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
- `on_bad_lines` (pandas' name): `error` (the default) stops at the first bad
  line; `warn` and `skip` read a damaged trace anyway, skipping each bad line
  (the header excepted) with a warning naming it (`warn`: one per line, with
  what is wrong; `skip`: one for all).  The session a skipped line belonged to
  (by its "sid", as far as the line still shows it; else every session open
  there) gets a `Damaged` mark in its place: it reads as damaged, never as a
  shorter session.  Lines of a session whose start was skipped are skipped too.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from presto_tui.errors import TraceError
from presto_tui.files import readable_file
from presto_tui.logs.schema import SchemaError, UnknownEvent, check_header, decode, gap_of, vocab_of
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.method import MethodKind
from presto_tui.runtime.session.events import (
    Choice,
    Damaged,
    Event,
    MemberEvent,
    RoundDone,
    Sample,
    SessionEnd,
    SessionError,
    SessionStart,
    Transition,
)
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


ON_BAD_LINES = ("error", "warn", "skip")
_SID = re.compile(rb'"sid":"([^"\\]{1,200})"')


_START_ID = re.compile(rb'^\{"type":"session_start","session_id":"([^"\\]{1,200})"')


def read_trace(path: str | Path, on_bad_lines: str = "error", *, skip: Collection[str] = ()) -> Trace:
    """Read and validate a whole trace; raise TraceError on the first bad line, or with `on_bad_lines`
    warn or skip, skip each bad line and mark the session it broke (see the module docstring).
    `skip`: session ids whose lines are passed over unread (a resumed run knows them from its run log:
    reading a trace of many GB costs minutes, finding a line's session a byte search)."""
    if on_bad_lines not in ON_BAD_LINES:
        raise ValueError(f"on_bad_lines must be one of {ON_BAD_LINES}")
    path = readable_file(Path(path), "trace file", error=TraceError)
    shown = visible(str(path), keep_newlines=False)
    r = _Reading(shown)
    try:
        for n, raw, complete in _lines(path, shown):
            if not raw.strip():
                if complete:
                    continue
                break
            if skip and complete and _skipped(raw, skip):
                continue
            try:
                r.line(n, raw, complete)
            except _Truncated:
                break
            except TraceError as e:
                if on_bad_lines == "error" or r.head is None:
                    raise
                r.skip(n, raw, str(e).removeprefix(f"{shown}:{n}: "), on_bad_lines == "warn")
    except OSError as e:
        raise TraceError(f"{shown}: cannot read ({e.strerror})") from None
    if r.head is None:
        raise TraceError(f"{shown}:1: empty file, not a presto-tui trace")
    return r.trace(path)


def _skipped(raw: bytes, skip: Collection[str]) -> bool:
    """Whether a whole line is one of the sessions `skip` names (its start, or an event with its sid)."""
    m = _START_ID.match(raw) if raw.startswith(b'{"type":"session_start"') else _SID.search(raw)
    return m is not None and m.group(1).decode("utf-8", "replace") in skip


class _Truncated(Exception):
    """The final line was cut off mid-write: everything before it reads."""


class _Reading:
    """One trace as it is read, line by line."""

    def __init__(self, shown: str):
        self.shown = shown
        self.head: dict | None = None
        self.sessions: list[SessionTrace] = []
        self.by_id: dict[str, SessionTrace] = {}
        self.vocab: dict[int, str] = {}
        self.warnings: list[str] = []
        self.skipped: list[int] = []
        self.lost: dict[str, list[int]] = {}  # lines of sessions whose start was skipped, by session id
        self.foreign: list[int] = []  # lines of a method's own records, its method not installed here
        self.members: dict[str, dict[int, bool]] = {}  # per session id: its members' chains, whether ended

    def line(self, n: int, raw: bytes, complete: bool) -> None:
        shown = self.shown
        try:
            obj = _parse(shown, n, raw)
        except TraceError:
            if not complete and self.head is not None:  # cut off mid-write: keep what came before
                self.warnings.append(f"{shown}:{n}: truncated final line ignored")
                raise _Truncated from None
            raise
        try:
            if self.head is None:
                self.head = check_header(obj)
                return
            if isinstance(obj, dict) and obj.get("type") == "vocab":
                self.vocab.update(vocab_of(obj))
                return
            if isinstance(obj, dict) and obj.get("type") == "gap":
                self.warnings.append(f"{shown}:{n}: {gap_of(obj)}")
                return
            ev = decode(obj)
            sid = obj.get("sid") if isinstance(obj, dict) else None
        except UnknownEvent as e:
            if not self.absent():
                raise TraceError(f"{shown}:{n}: {e}") from None
            self.foreign.append(n)  # a record of a method not installed here: said once, at the end
            return
        except SchemaError as e:
            raise TraceError(f"{shown}:{n}: {e}") from None
        except RecursionError:
            raise TraceError(f"{shown}:{n}: nested too deeply") from None
        if isinstance(ev, SessionStart):
            if ev.session_id in self.by_id:
                raise TraceError(f"{shown}:{n}: a second session_start for session {ev.session_id[:20]!r}")
            self.sessions.append(SessionTrace(ev, [ev], n, n))
            self.by_id[ev.session_id] = self.sessions[-1]
            return
        if sid is not None:
            if not isinstance(sid, str) or sid not in self.by_id:
                raise TraceError(f"{shown}:{n}: {type(ev).__name__} event before any session_start of "
                                 f"its session {visible(str(sid)[:20])!r}")
            sess = self.by_id[sid]
        elif self.sessions:
            sess = self.sessions[-1]
        else:
            raise TraceError(f"{shown}:{n}: {type(ev).__name__} event before any session_start")
        if sess.ended:
            raise TraceError(f"{shown}:{n}: event after its session ended")
        if isinstance(ev, MemberEvent):
            self.member_line(n, sess, ev)
        sess.events.append(ev)
        sess.last_line = n

    def member_line(self, n: int, sess: SessionTrace, ev: MemberEvent) -> None:
        """A member's chain reads as a session's does: its start first and once, nothing after its end."""
        ended = self.members.setdefault(sess.start.session_id, {})  # member -> whether its chain has ended
        who, inner = f"{self.shown}:{n}: member {ev.member + 1}'s", ev.event
        if isinstance(inner, SessionStart):
            if ev.member in ended:
                raise TraceError(f"{who} second session_start")
        elif ev.member not in ended:
            raise TraceError(f"{who} {type(inner).__name__} event before its session_start")
        elif ended[ev.member]:
            raise TraceError(f"{who} event after its chain ended")
        ended[ev.member] = isinstance(inner, (SessionEnd, SessionError))

    def absent(self) -> list[str]:
        """The methods this trace's sessions name that are not installed here (read with stand-ins)."""
        names = [self.head["params"].get("sampler")] if self.head is not None else []
        names += [s.start.params.get("sampler") for s in self.sessions]
        return list(dict.fromkeys(n for n in names if registry.recorded(n)))

    def skip(self, n: int, raw: bytes, why: str, say: bool) -> None:
        """Skip line n (what is wrong with it: `why`) and mark the session it belonged to."""
        self.skipped.append(n)
        if say:
            self.warnings.append(f"{self.shown}:{n}: skipped ({why})")
        m = _SID.search(raw)
        sid = m.group(1).decode("utf-8", "replace") if m else None
        if sid is not None and sid not in self.by_id:  # its start was lost (or this line was it)
            self.lost.setdefault(sid, []).append(n)
            return
        if sid is not None:
            hit = [self.by_id[sid]]
        elif b'"type":"session_start"' in raw or b'"type":"vocab"' in raw:
            return  # a start's other lines say which session was lost; token text is no session's
        else:  # a line that no longer says whose: every session open here may have lost it
            hit = [s for s in self.sessions if not s.ended]
        for s in hit:
            if not s.ended:
                s.events.append(Damaged((n,)))

    def trace(self, path: Path) -> Trace:
        shown, warnings = self.shown, list(self.warnings)
        for name in self.absent():
            mine = [s for s in self.sessions if s.start.params.get("sampler") == name]
            chain = any(isinstance(e, (Transition, RoundDone)) for s in mine for e in s.events)
            one_shot = any(isinstance(e, (Sample, Choice)) for s in mine for e in s.events)
            stand = registry.stand_in(name, MethodKind.ONE_SHOT if one_shot and not chain else MethodKind.CHAIN)
            hint = stand.install_hint() if isinstance(stand, registry.Absent) else ""
            own = f"{len(self.foreign)} line(s) of its own records were skipped" if self.foreign else \
                "it wrote no records of its own"
            warnings.append(f"{shown}: method {name!r} is not installed here: its sessions show their generic records "
                            f"(transitions, round trees, samples, the answer); {own}; {hint}")
        if self.skipped:
            first = ", ".join(map(str, self.skipped[:10])) + (", ..." if len(self.skipped) > 10 else "")
            warnings.append(f"{shown}: {len(self.skipped)} bad line(s) skipped: {first}")
        for sid, lines in self.lost.items():
            warnings.append(f"{shown}: the lines of session {visible(sid[:20])!r} ({', '.join(map(str, lines[:5]))}"
                            f"{', ...' if len(lines) > 5 else ''}) were skipped: its session_start could not be read")
        for i, s in enumerate(self.sessions):
            damaged = [ln for e in s.events if isinstance(e, Damaged) for ln in e.lines]
            if damaged:
                warnings.append(f"{shown}: session {i + 1} is damaged: line(s) {', '.join(map(str, damaged[:10]))} "
                                "skipped; its numbers are those of what could be read")
            elif not s.ended:
                warnings.append(f"{shown}: session {i + 1} was cut short (no session_end): it shows up to its last "
                                "finished round")
        assert self.head is not None
        return Trace(path, self.head, self.sessions, self.vocab, warnings)
