"""Files a person names: read only what can be read to its end; write only where it was meant.

One rule for every output a person names (a trace, results, a classifier, every chain's draws,
the app's exports): the path is checked with its real reason before any work (`output_path`),
and missing folders are made only inside the current folder's tree (`make_folders`): an
absolute path into a missing folder elsewhere (a typo, often) is refused in one line instead
of silently growing a tree there.
"""

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


def _shown(path: Path) -> str:
    return visible(str(path), keep_newlines=False)


def _nearest_existing(folder: Path) -> Path:
    """`folder` or the nearest of its parents that exists (the root at worst)."""
    for p in (folder, *folder.parents):
        if p.exists() or p.is_symlink():
            return p
    return Path(folder.anchor or ".")


def _missing_outside(folder: Path) -> Path | None:
    """The first missing folder on the way to `folder`, if it lies outside the current folder's tree
    (None: nothing is missing, or what is missing may be made)."""
    base = _nearest_existing(folder)
    if base == folder:
        return None
    first = folder
    while first.parent != base:
        first = first.parent
    here = Path.cwd().resolve()
    where = base.resolve() / first.name
    return None if where.is_relative_to(here) else first


def make_folders(folder: Path, what: str, error: type[PrestoError] = InputError) -> None:
    """Make `folder` and its missing parents, only inside the current folder's tree; `error` with
    the reason where that cannot be (a folder outside it, a file in the way, no permission)."""
    blocker = _nearest_existing(folder)
    if blocker.exists() and not blocker.is_dir():  # the OS would say "File exists" or "Not a directory"
        raise error(f"cannot write into {_shown(folder)}: {_shown(blocker)} is a file, not a folder")
    outside = _missing_outside(folder)
    if outside is not None:
        raise error(f"{_shown(folder)}: no folder {_shown(outside)} for the {what}; presto-tui makes missing "
                    "folders only inside the current one (make it first, or choose another path)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise error(f"{_shown(folder)}: cannot make the folder for the {what} ({e.strerror or e})") from None


def output_path(path: Path, what: str = "trace", overwrite: bool = False) -> Path:
    """Refuse an output path that cannot be created, with the real reason, before any work.
    Traces are never overwritten (a trace is a record); results may be, if `overwrite`."""
    shown = _shown(path)
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
    p = _nearest_existing(path.parent)
    where = _shown(p)
    if not p.is_dir():
        raise InputError(f"{shown}: {where} is not a directory")
    outside = _missing_outside(path.parent)
    if outside is not None:
        raise InputError(f"{shown}: no folder {_shown(outside)} for the {what}; presto-tui makes missing folders "
                         "only inside the current one (make it first, or choose another path)")
    if not os.access(p, os.W_OK | os.X_OK):
        raise InputError(f"{shown}: cannot write in {where} (permission denied)")
    # the permission bits do not tell everything (root, a read-only file system, /proc):
    # make and remove a file where the output will go
    _try_write(functools.partial(_probe_dir, p), f"{shown}: cannot write in {where}")
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
