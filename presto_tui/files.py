"""Files a person names: read only what can be read to its end."""

from __future__ import annotations

import stat
from pathlib import Path

from presto_tui.errors import InputError, PrestoError
from presto_tui.safetext import visible


def readable_file(path: Path, what: str, *, pipes: bool = False,
                  error: type[PrestoError] = InputError) -> Path:
    """`path` if it names a regular file, else `error` with the reason.  A FIFO or a device
    would hang or never end; `pipes` lets through a pipe a shell made (`<(...)`), which ends
    when its writer does."""
    shown = visible(str(path), keep_newlines=False)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise error(f"{shown}: no such {what}") from None
    except OSError as e:
        raise error(f"{shown}: cannot read {what} ({e.strerror})") from None
    if stat.S_ISDIR(mode):
        raise error(f"{shown}: is a directory, not a {what}")
    if not (stat.S_ISREG(mode) or (pipes and stat.S_ISFIFO(mode))):
        raise error(f"{shown}: not a regular file (a pipe or device cannot be a {what})")
    return path
