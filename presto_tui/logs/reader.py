"""Read traces as untrusted input: validate every line, report `file:line: what is wrong`.

- JSON only (orjson); nothing is evaluated or unpickled.
- A truncated final line (a session cut off mid-write) is dropped with a
  warning; everything before it reads normally.
- Lines longer than `MAX_LINE` bytes are refused without being parsed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from presto_tui.errors import TraceError
from presto_tui.logs.schema import SchemaError, check_header, decode
from presto_tui.runtime.session.events import Event, RoundDone, SessionStart
from presto_tui.runtime.session.summary import SessionSummary, summarize

MAX_LINE = 8 * 2**20  # the largest real round line (T=1024, N=64) is well under 1 MiB


@dataclass
class SessionTrace:
    start: SessionStart
    events: list[Event] = field(default_factory=list)  # from its SessionStart on
    first_line: int = 0

    @property
    def rounds(self) -> list[RoundDone]:
        return [e for e in self.events if isinstance(e, RoundDone)]

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


def _lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, complete) with the size limit enforced before parsing."""
    with open(path, "rb") as f:
        n = 0
        while True:
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_LINE:
                raise TraceError(f"{path}:{n}: line longer than {MAX_LINE // 2**20} MiB, refused")
            yield n, raw, raw.endswith(b"\n")


def _parse(path: Path, n: int, raw: bytes) -> object:
    if b"\x00" in raw:
        raise TraceError(f"{path}:{n}: binary data, not a JSON line")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        msg = str(e).split(":")[0]
        raise TraceError(f"{path}:{n}: not valid JSON ({msg})") from None


def read_trace(path: str | Path) -> Trace:
    """Read and validate a whole trace; raise TraceError on the first bad line."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file")
    head: dict | None = None
    sessions: list[SessionTrace] = []
    vocab: dict[int, str] = {}
    warnings: list[str] = []
    lines = _lines(path)
    try:
        for n, raw, complete in lines:
            if not raw.strip():
                if complete:
                    continue
                break
            try:
                obj = _parse(path, n, raw)
            except TraceError:
                if not complete and head is not None:  # cut off mid-write: keep what came before
                    warnings.append(f"{path}:{n}: truncated final line ignored")
                    break
                raise
            try:
                if head is None:
                    head = check_header(obj if isinstance(obj, dict) else {})
                    continue
                if isinstance(obj, dict) and obj.get("type") == "vocab":
                    vocab.update(_vocab(obj))
                    continue
                ev = decode(obj)
            except SchemaError as e:
                raise TraceError(f"{path}:{n}: {e}") from None
            if isinstance(ev, SessionStart):
                sessions.append(SessionTrace(ev, [ev], n))
            elif not sessions:
                raise TraceError(f"{path}:{n}: {type(ev).__name__} event before any session_start")
            else:
                sessions[-1].events.append(ev)
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror})") from None
    if head is None:
        raise TraceError(f"{path}:1: empty file, not a presto-tui trace")
    return Trace(path, head, sessions, vocab, warnings)


def _vocab(obj: dict) -> dict[int, str]:
    pieces = obj.get("pieces")
    if not isinstance(pieces, dict):
        raise SchemaError("field 'pieces' should be an object")
    out = {}
    for k, v in pieces.items():
        if not (k.isdigit() and isinstance(v, str)):
            raise SchemaError(f"vocab entry {k[:20]!r} should map a token id to a string")
        out[int(k)] = v
    return out
