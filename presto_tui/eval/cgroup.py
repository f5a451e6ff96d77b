"""A cgroup for one run of a program: memory and a number of tasks for its whole process tree.

Rlimits hold per process: three children of a program may each use its memory limit. A cgroup
holds for every process placed in it and for all they start, and lists them, so that all can be
killed at the end (a child that left its session included). Made under presto-tui's own cgroup
where that is writable (as root, with cgroup v1 controllers, or a cgroup v2 parent that hands
its controllers down); elsewhere `TreeLimits.create` gives None and per-process limits remain.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path


def _groups() -> dict[str, Path]:
    """This process's cgroup folder for the memory and pids controllers, where they are mounted."""
    mounts: list[tuple[Path, str, set[str]]] = []  # mount point, fstype, options
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                    mounts.append((Path(fields[4]), tail[0], set(tail[2].split(","))))
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = [ln.rstrip("\n").split(":", 2) for ln in f if ln.count(":") >= 2]
    except OSError:
        return {}
    found: dict[str, Path] = {}
    for _, controllers, path in lines:
        for point, fstype, options in mounts:
            rel = path.lstrip("/")
            if fstype == "cgroup" and controllers:
                for c in set(controllers.split(",")) & options & {"memory", "pids"}:
                    found.setdefault(c, point / rel)
            elif fstype == "cgroup2" and not controllers:
                try:
                    handed_down = (point / rel / "cgroup.subtree_control").read_text().split()
                except OSError:
                    continue
                for c in set(handed_down) & {"memory", "pids"}:
                    found.setdefault(c, point / rel)
    return found


class TreeLimits:
    """Child cgroups (one per controller) that hold a run's processes and everything they start."""

    def __init__(self, folders: dict[str, Path], swap_bounded: bool = False):
        self.folders = folders
        # whether the memory limit holds swap too (or there is none): only then does it bound what the tree
        # may take without an address-space limit; else it could push gigabytes to swap until the timeout
        self.swap_bounded = swap_bounded

    @classmethod
    def create(cls, memory_bytes: int, tasks: int) -> TreeLimits | None:
        """Groups with these limits, or None where no memory cgroup can be made here."""
        name = f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        made: dict[str, Path] = {}
        swap_bounded = False
        try:
            for controller, parent in sorted(_groups().items()):
                _sweep(parent)
                folder = parent / name
                try:
                    folder.mkdir()
                except OSError:
                    continue
                made[controller] = folder
                if controller == "memory":
                    swap_bounded = _limit_memory(folder, memory_bytes)
                else:
                    (folder / "pids.max").write_text(str(tasks))
        except OSError:
            TreeLimits(made).close()
            return None
        if "memory" not in made:
            TreeLimits(made).close()
            return None
        return cls(made, swap_bounded)

    def add(self, pids: Iterable[int]) -> None:
        for pid in pids:
            for folder in self.folders.values():
                with contextlib.suppress(ProcessLookupError, OSError):
                    (folder / "cgroup.procs").write_text(str(pid))

    def holds(self, pids: Iterable[int]) -> bool:
        """Whether the memory group holds every one of `pids` (`add` may fail for one quietly)."""
        folder = self.folders.get("memory")
        try:
            inside = {int(p) for p in (folder / "cgroup.procs").read_text().split()} if folder else set()
        except (OSError, ValueError):
            return False
        return set(pids) <= inside

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders.values():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return found

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the tree for going over the memory limit."""
        folder = self.folders.get("memory")
        if folder is None:
            return False
        for file in ("memory.events", "memory.oom_control"):  # v2, v1
            with contextlib.suppress(OSError, ValueError):
                for line in (folder / file).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value) > 0
        return False

    def close(self) -> None:
        """Kill every process still in the groups and remove them."""
        deadline = time.monotonic() + 5
        while True:
            left = self.pids()
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            removed = True
            for folder in self.folders.values():
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    removed = False
            if removed or time.monotonic() > deadline:
                return
            time.sleep(0.01)


_PREFIX = "presto-tui-"


def _limit_memory(folder: Path, memory_bytes: int) -> bool:
    """Limit the group's memory; whether that bounds swap too (swap limited, or no swap on this machine).
    The swap files exist only where swap accounting is on: elsewhere the limit holds resident memory only."""
    if (folder / "memory.max").exists():  # cgroup v2
        (folder / "memory.max").write_text(str(memory_bytes))
        swap, value = folder / "memory.swap.max", "0"
    else:
        (folder / "memory.limit_in_bytes").write_text(str(memory_bytes))
        swap, value = folder / "memory.memsw.limit_in_bytes", str(memory_bytes)
    try:
        swap.write_text(value)
        return True
    except OSError:
        return _no_swap()


def _no_swap() -> bool:
    """Whether this machine has no swap (SwapTotal 0 in /proc/meminfo)."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("SwapTotal:"):
                    return int(line.split()[1]) == 0
    except (OSError, ValueError, IndexError):
        pass
    return False


def _sweep(parent: Path) -> None:
    """Remove empty groups left by presto-tui processes that are gone (killed before they could
    clean up: by the code they ran, without a sandbox). Only empty ones, a minute old: another
    presto-tui (in another PID namespace, where this one cannot tell whether it lives) may share
    the parent."""
    with contextlib.suppress(OSError):
        for folder in parent.glob(f"{_PREFIX}*"):
            owner = folder.name.removeprefix(_PREFIX).partition("-")[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    if time.time() - folder.stat().st_mtime > 60:
                        folder.rmdir()  # refused while a process is in it


def _pids() -> Iterator[int]:
    """The processes /proc lists (this PID namespace's)."""
    return (int(entry) for entry in os.listdir("/proc") if entry.isdigit())


def _stat_fields(path: str) -> list[str]:
    """A /proc stat line's fields after the command's name (which may hold spaces and parentheses)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().rpartition(")")[2].split()


def descendants(root: int) -> list[int]:
    """`root` and every process below it, from /proc (the processes' parent ids)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        try:
            ppid = int(_stat_fields(f"/proc/{pid}/stat")[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def processes_of(uid: int) -> list[int]:
    """The processes whose real or effective uid is `uid` and that still run a thread, from /proc's status
    files (which a process cannot hide, unlike its folder's owner: root's once it is not dumpable).  A zombie
    leader is one of them while another of its threads runs (its main thread ended, by `pthread_exit`)."""
    found = []
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            real, effective = (int(u) for u in fields["Uid"].split()[:2])
        except (OSError, ValueError, KeyError):
            continue
        if uid in (real, effective) and (not fields.get("State", "").strip().startswith("Z") or _runs_a_thread(pid)):
            found.append(pid)
    return found


def _runs_a_thread(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        with contextlib.suppress(OSError, IndexError):
            if _stat_fields(f"/proc/{pid}/task/{task}/stat")[0] not in ("Z", "X"):
                return True
    return False
