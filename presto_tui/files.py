"""Files a person names: read only what can be read to its end; write only where writing works."""

from __future__ import annotations

import functools
import os
import stat
import tempfile
from collections.abc import Callable
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


def check_output_path(path: Path, what: str = "trace", overwrite: bool = False) -> Path:
    """Refuse an output path that cannot be created, with the real reason, before any work.
    Traces are never overwritten (a trace is a record); results may be, if `overwrite`."""
    shown = visible(str(path), keep_newlines=False)
    if path.is_dir():
        raise InputError(f"{shown}: is a directory; give a file path for the {what}")
    if path.exists() or path.is_symlink():
        if not overwrite:
            raise InputError(f"{shown}: {what} file exists already; choose another path")
        if not path.is_file():
            raise InputError(f"{shown}: not a regular file; cannot write the {what} there")
    if path.is_file():  # results overwritten: the file itself must take writes
        _try_write(lambda: open(path, "ab").close(), f"{shown}: cannot write the {what}")
        return path
    parent = path.parent
    for p in [parent, *parent.parents]:
        if p.exists():
            where = visible(str(p), keep_newlines=False)
            if not p.is_dir():
                raise InputError(f"{shown}: {where} is not a directory")
            if not os.access(p, os.W_OK | os.X_OK):
                raise InputError(f"{shown}: cannot write in {where} (permission denied)")
            # the permission bits do not tell everything (root, a read-only file system, /proc):
            # make and remove a file where the output will go
            _try_write(functools.partial(_probe_dir, p), f"{shown}: cannot write in {where}")
            break
    return path


def _probe_dir(folder: Path) -> None:
    fd, name = tempfile.mkstemp(prefix=".presto-tui-", dir=folder)
    os.close(fd)
    os.unlink(name)


def _try_write(probe: Callable[[], object], message: str) -> None:
    try:
        probe()
    except OSError as e:
        raise InputError(f"{message} ({e.strerror or e})") from None
