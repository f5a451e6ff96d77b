"""Where presto-tui's own messages and progress go: the terminal, also while an engine's own output
(vLLM's, torch's, transformers' warnings, progress bars and C++ notices) is diverted to its log.

Every front-end writes its messages to `term()` and its progress through `SessionProgress`;
the command line diverts the engine's output (`divert_engine_output`) and restores the
terminal when a command ends.  Nothing here is specific to one command.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

_TERMINAL: dict[str, Any] = {"stream": None, "saved_fd": None, "log": None}


def term():
    """Where presto-tui's own messages and progress go (the terminal's stderr), also while the
    engine's own output is diverted to its log file."""
    return _TERMINAL["stream"] or sys.stderr


def diverted() -> bool:
    return _TERMINAL["log"] is not None


def engine_log_path() -> Path:
    from presto_tui.api.engine import cache_dir

    return cache_dir() / "engine.log"


def divert_engine_output(verbose: bool = False) -> None:
    """Send what vLLM, torch and transformers print to a log file instead of the terminal, unless
    `verbose`.  It goes to file descriptor 2 and Python's stderr alike, so both are pointed at the
    log; presto-tui writes to `term()`."""
    if verbose or _TERMINAL["saved_fd"] is not None:
        return
    path = engine_log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = open(path, "a", buffering=1)  # noqa: SIM115 - open until the command ends
    except OSError:
        return  # nowhere to put it: leave the terminal as it is
    log.write(f"\n--- presto-tui {' '.join(sys.argv[1:2])} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    sys.stderr.flush()
    saved = os.dup(2)
    # presto-tui's own messages keep going where sys.stderr goes: the terminal, or whatever
    # captured it (a test harness) when that is not file descriptor 2 itself
    on_fd2 = _fileno(sys.stderr) == 2
    stream = os.fdopen(os.dup(saved), "w", buffering=1) if on_fd2 else sys.stderr
    _TERMINAL.update(stream=stream, saved_fd=saved, log=log, own=on_fd2)
    os.dup2(log.fileno(), 2)


def restore_terminal() -> None:
    saved = _TERMINAL["saved_fd"]
    if saved is None:
        return
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    for key in ("stream", "log") if _TERMINAL.get("own") else ("log",):
        with contextlib.suppress(OSError):
            _TERMINAL[key].close()
    _TERMINAL.update(stream=None, saved_fd=None, log=None, own=False)


def _fileno(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


class SessionProgress:
    """Progress on stderr.  On a terminal a Rich bar; anywhere else (a log file, a pipe, `--json`'s
    stderr) one plain line per finished session, so that a run of many minutes is never silent there.
    Both say the sessions done (in all, and per method where `per` names the methods' totals), the time
    so far and an ETA from the run's own pace: the mean time of the sessions this process finished
    (a resumed run's earlier sessions count as done, not in the pace)."""

    def __init__(self, total: int, command: str = "bench", err: Any = None, every_s: float = 0.0,
                 per: dict[str, int] | None = None, done: dict[str, int] | int = 0) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.err = err or Console(file=term(), highlight=False)
        self.per = dict(per or {})
        self.per_done = {m: 0 for m in self.per}
        if isinstance(done, dict):
            for m, n in done.items():
                self.per_done[m] = self.per_done.get(m, 0) + n
            done = sum(done.values())
        self.total, self.done, self.what, self.command = total, done, "", command
        self.first = done  # finished before this process (a resumed run): not in the pace
        self.every_s, self._last_line = every_s, -math.inf  # plain lines: at most one every `every_s` seconds
        self.t0 = time.perf_counter()
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), console=self.err,
                            transient=True) if self.err.is_terminal else None
        self.task = self.bar.add_task("sessions", total=total, completed=done, eta="") \
            if self.bar is not None else None

    def __enter__(self) -> SessionProgress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def doing(self, what: str) -> None:
        """What the sessions from now on run (shown until the next call)."""
        self.what = what
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=self._described())

    def eta_s(self) -> float | None:
        """Seconds left at the run's own pace so far (None before its first session ends)."""
        ran = self.done - self.first
        if ran <= 0:
            return None
        return (time.perf_counter() - self.t0) / ran * max(0, self.total - self.done)

    def methods(self) -> str:
        """Sessions done per method: `powermh 3/10, bon:4 2/10` (empty without methods)."""
        return ", ".join(f"{m} {self.per_done.get(m, 0)}/{t}" for m, t in self.per.items())

    def _described(self) -> str:
        return "; ".join(x for x in (self.what, self.methods()) if x)

    def advance(self, method: str | None = None) -> None:
        """One more session finished (of `method`, one of `per`'s, where given)."""
        self.done += 1
        if method is not None:
            self.per_done[method] = self.per_done.get(method, 0) + 1
        eta = self.eta_s()
        left = "" if eta is None else f"about {duration(eta)} left"
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, advance=1, eta=left, description=self._described())
        elif self.done == self.total or time.perf_counter() - self._last_line >= self.every_s:
            self._last_line = time.perf_counter()
            per = self.methods()
            print(f"{self.command}: {self.done}/{self.total} sessions, {self.what + ', ' if self.what else ''}"
                  f"{time.perf_counter() - self.t0:.0f} s" + (f", {left}" if left else "")
                  + (f" | {per}" if per else ""), file=self.err.file, flush=True)


def duration(s: float) -> str:
    """A time left in words a person plans by: `40 s`, `12 min`, `3 h 05 min`."""
    s = max(0.0, s)
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    h, m = divmod(round(s / 60), 60)
    return f"{h} h {m:02d} min"
