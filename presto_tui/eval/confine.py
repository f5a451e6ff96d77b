"""How the python grader starts the program's process: in bubblewrap where it works here, else plainly.

`detect()` tries, once per process, each way in turn and keeps the first whose probe shows what it
promises (for bubblewrap: its own PID namespace, no network interface but loopback, no
capabilities, a read-only root):

1. bubblewrap started by root, allowed only to change its user: the child becomes a user of
   its own (`own_uid`: no account's, one per program) before the code runs (no user namespace
   is needed), else `nobody` where this machine maps no such uid;
2. bubblewrap as presto-tui's user (root: with no capabilities; another user: in a user
   namespace of its own, which RLIMIT_NPROC then counts alone);
3. no sandbox, as a user of its own (else `nobody`) when presto-tui runs as root (it cannot
   write root's files or signal root's processes), where that user may run this interpreter;
4. no sandbox, as presto-tui's own user: per-process limits only.

RLIMIT_NPROC counts every task of a uid on the machine, so it limits one program's tasks only
where that program's uid is its own (`Launcher.counted_alone`). As `nobody`, programs graded at
once shared one count (and with any daemon of `nobody`): a fork bomb, or an honest program's 100
threads beside another's, made a third's threads fail to start, a wrong verdict. There, only a
cgroup limits the tasks.

Without bubblewrap the first run says so once, on stderr (`warn_once`).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import itertools
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from presto_tui.eval.cgroup import processes_of

NOBODY = 65534
# The uids `own_uid` hands out: 0x70000000 up to systemd's foreign range (0x7FFE0000), which systemd's
# table of uid ranges (UIDS-GIDS) leaves unused: above the accounts, the subordinate ranges user namespaces
# map (from 100000, 65536 a user) and the containers' ranges (up to 0x6FFFFFFF).  Each process takes a
# block of 256 at a random place (two processes with the same pid in two PID namespaces share the kernel's
# uids), and skips a uid some account has (an NSS directory's range) or some process still runs as.
_OWN_UID_BASE, _OWN_UID_END = 0x70000000, 0x7FFE0000
_OWN_BLOCKS = (_OWN_UID_END - _OWN_UID_BASE) // 256
_own_block = secrets.randbelow(_OWN_BLOCKS)
_own_count = itertools.count()
INSTALL = "as root: apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora)"
# What the program sees under bubblewrap besides the interpreter (`shown`): the system's shared libraries
# and the loader's cache, read-only; a folder here that is a symbolic link (/lib -> usr/lib) is one there too
_LIBRARY_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32", "/lib", "/lib64", "/lib32", "/libx32")
_LOADER_FILES = ("/etc/ld.so.cache",)
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
       # glibc gives each new thread a malloc arena of 64 MiB of address space, up to 8 per core: under an
       # address-space limit, 24 threads on two cores took 1 GiB of it. Two arenas serve every thread
       "MALLOC_ARENA_MAX": "2",
       # numpy's BLAS starts a thread per core on import (each a task of the program's, with its buffers):
       # one, so that importing numpy costs the same on any machine
       "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# Run in the would-be sandbox: report what it sees on the socket given (after dropping to its user, if any).
_PROBE = """\
import os, socket, sys
fd, user, sandboxed = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "sandboxed"
if user != "-":
    os.setgroups([]); os.setgid(int(user)); os.setuid(int(user))
seen = [f"pid={os.getpid()}"]
try:
    seen.append("caps=" + open("/proc/self/status").read().split("CapEff:")[1].split()[0])
    seen.append("nets=" + ",".join(sorted(name for _, name in socket.if_nameindex())))
except (OSError, IndexError):  # no /proc (not Linux): no sandbox either
    pass
if sandboxed:  # (never tried outside the sandbox)
    try:
        open("/presto-tui-probe", "w").close()
        os.unlink("/presto-tui-probe")
        seen.append("root=writable")
    except OSError:
        seen.append("root=read-only")
open("probe", "w").write("x")
os.write(fd, " ".join(seen).encode())
"""


@dataclass(frozen=True)
class Launcher:
    """One way to start the program's process."""

    bwrap: str | None  # the bubblewrap binary; None: no sandbox
    user: int | None = None  # run as this uid and gid (presto-tui runs as root); None: as presto-tui's user
    missing: str = ""  # why there is no sandbox, for the warning
    own_user: bool = False  # `user` is one program's own: each program is given its own (`for_program`)

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None

    @property
    def user_namespace(self) -> bool:
        """bubblewrap started by a user other than root: the sandbox has a user namespace of its own."""
        return self.sandboxed and os.geteuid() != 0

    @property
    def counted_alone(self) -> bool:
        """RLIMIT_NPROC counts the program's own tasks (its own user namespace, or its own uid)."""
        return self.user_namespace or self.own_user

    @property
    def cgroup_hidden(self) -> bool:
        """The program can neither see nor mount the cgroup filesystem, so cannot leave its cgroup: bubblewrap
        shows no /sys, and the program is another user (its own, nobody, or its own user namespace, where it
        may not make another). A program of presto-tui's own user outside it could move itself out."""
        return self.sandboxed and (self.user_namespace or self.user is not None)

    def for_program(self) -> Launcher:
        """The way one program starts: with a uid of its own, where this way gives each program one."""
        if not self.own_user:
            return self
        uid = own_uid()
        return replace(self, user=uid) if uid is not None else replace(self, user=NOBODY, own_user=False)

    @property
    def who(self) -> str:
        return "as a user of its own" if self.own_user else "as nobody" if self.user is not None else "as this user"

    def describe(self) -> str:
        who = self.who
        if self.sandboxed:
            return (f"in bubblewrap ({who}): no network, its own PID namespace, only the interpreter and the "
                    "system's libraries to read")
        return f"without a sandbox ({who}): {self.missing}"

    def command(self, inner: list[str], tmpfs_bytes: int) -> list[str]:
        """The command that runs `inner` this way. Under bubblewrap the root is empty and read-only but for
        what `shown()` lists, bound read-only, a tmpfs of `tmpfs_bytes` for /tmp (its working folder) and
        /dev/shm, a minimal /dev and its own /proc; started by root, with capabilities to change its user
        only (the child drops them with its user, before the code runs: `drop_to`)."""
        if self.bwrap is None:
            return inner
        return [self.bwrap, *self._options(tmpfs_bytes), "--", *inner]

    def _options(self, tmpfs_bytes: int) -> list[str]:
        """bubblewrap's options (what `command` puts between the binary and `--`)."""
        size = str(tmpfs_bytes)
        args = ["--dev", "/dev", "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm",
                "--remount-ro", "/dev", "--proc", "/proc", "--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
        binds, links = shown()
        made: set[str] = set()
        for path in binds:  # through folders the program's user may enter (the tmpfs root's are root's)
            for parent in reversed(Path(path).parents[:-1]):
                if str(parent) not in made and str(parent) != "/tmp":
                    made.add(str(parent))
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", path, path]
        for target, link in links:
            args += ["--symlink", target, link]
        for file in _masked_shown(tuple(binds)):
            args += ["--ro-bind", os.devnull, file]
        args += ["--remount-ro", "/", "--chdir", "/tmp", "--unshare-ipc", "--unshare-pid", "--unshare-net",
                 "--unshare-uts",
                 "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv",
                 "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp"]
        for key, value in ENV.items():
            args += ["--setenv", key, value]
        if self.user_namespace:
            args += ["--unshare-user", "--disable-userns"]
        else:
            args += ["--cap-drop", "ALL"]
            if self.user is not None:
                args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        return args

    @contextlib.contextmanager
    def started(self, inner: list[str], tmpfs_bytes: int) -> Iterator[tuple[list[str], list[int]]]:
        """`command` as it is started: the command, and the file descriptors to pass it. bubblewrap reads
        its own options from a file it is given (`--args FD`, closed before the code runs), not from its
        command line, which the sandbox's /proc/1/cmdline (bubblewrap is its init) shows to the code."""
        if self.bwrap is None:
            yield inner, []
            return
        with tempfile.TemporaryFile() as f:
            f.write(b"".join(os.fsencode(option) + b"\0" for option in self._options(tmpfs_bytes)))
            f.seek(0)
            yield [self.bwrap, "--args", str(f.fileno()), "--", *inner], [f.fileno()]

    @property
    def drop_to(self) -> int | None:
        """The user the child itself becomes before the code runs (root's sandbox); None: it stays."""
        return self.user if self.sandboxed else None

    def popen_user(self) -> dict:
        """Popen's arguments that start the process as its user (no sandbox, presto-tui runs as root)."""
        if self.user is None or self.sandboxed:
            return {}
        return {"user": self.user, "group": self.user, "extra_groups": []}


def shown() -> tuple[list[str], list[tuple[str, str]]]:
    """What the program sees under bubblewrap: (folders and files bound read-only, outermost only;
    symbolic links as (target, path)). The interpreter's prefixes (a venv's and its base's), the
    folders on its `sys.path` as the children start it (`python -I`: its site-packages, and what a
    `.pth` file adds), the system's shared libraries and the loader's cache. Never `/`, a folder
    that holds this project's checkout, or one inside the checkout but outside the interpreter's
    prefixes (its tests, its tasks): a task file, a trace or the project somewhere else is simply
    not there."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                                               os.path.dirname(sys.executable)) if p}
    prefixes.add(os.path.dirname(os.path.realpath(sys.executable)))
    wanted = set(prefixes) | {os.path.realpath(p) for p in _child_path()}
    wanted |= {p for p in _LOADER_FILES if os.path.isfile(p)}
    links = []
    for d in _LIBRARY_DIRS:
        if os.path.islink(d):
            links.append((os.readlink(d), d))
        elif os.path.isdir(d):
            wanted.add(d)
    checkout = _checkout()

    def allowed(p: str) -> bool:
        if p == "/" or not os.path.exists(p):
            return False
        if checkout is None:
            return True
        holds_it = _within(checkout, p)
        in_it = _within(p, checkout) and not any(_within(p, q) for q in prefixes)  # (a venv in it is the interpreter)
        return not (holds_it or in_it)

    kept = sorted(p for p in wanted if allowed(p))
    outermost = [p for p in kept if not any(q != p and _within(p, q) for q in kept)]
    taken = {link for _, link in links}
    return [p for p in outermost if not any(_within(p, link) for link in taken)], links


def interpreter() -> str:
    """This interpreter by a path whose folders are no symbolic links: a venv reached through one (a
    checkout's `.venv` that points to a venv elsewhere) is named by the folder it points to, the one the
    sandbox shows (the link itself, in the checkout, is not there). The file keeps its name, so that
    Python still finds its venv (pyvenv.cfg) beside it."""
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))


@functools.cache
def _masked_shown(binds: tuple[str, ...]) -> tuple[str, ...]:
    """`_masked` for the folders of the children's `sys.path` the sandbox shows (once: it globs and reads)."""
    folders = [p for p in map(os.path.realpath, _child_path()) if any(_within(p, b) for b in binds)]
    return tuple(_masked(folders, list(binds)))


def _masked(folders: list[str], binds: list[str]) -> list[str]:
    """Files in the folders on the program's `sys.path` (site-packages) that name folders the sandbox
    does not show, unreadable there (/dev/null bound over them, on a mount without devices): an editable
    install's finder and its .pth (the checkout's path), a dist-info's direct_url.json (where a package
    was installed from), an .egg-link, a .pth that lists a folder outside `binds`. The program's
    interpreter needs none of them: what they point to is not there (Python skips a .pth it cannot read)."""
    found: list[str] = []
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for pattern in ("__editable__*", "__pycache__/__editable__*", "*.egg-link", "*.dist-info/direct_url.json",
                        "*.pth"):
            for file in glob.glob(os.path.join(glob.escape(folder), pattern)):
                if file in found or not os.path.isfile(file):
                    continue
                if file.endswith(".pth") and "__editable__" not in os.path.basename(file):
                    try:
                        with open(file, encoding="utf-8", errors="replace") as f:
                            listed = [line.strip() for line in f if line.startswith("/")]
                    except OSError:
                        continue
                    if all(any(_within(os.path.realpath(p), b) for b in binds) for p in listed):
                        continue  # (only imports, or folders the sandbox shows)
                found.append(file)
    return found


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _checkout() -> str | None:
    """This project's checkout (the folder of its pyproject.toml above the package), if it runs from one."""
    root = Path(__file__).resolve().parents[2]
    return str(root) if (root / "pyproject.toml").is_file() else None


@functools.cache
def _child_path() -> tuple[str, ...]:
    """`sys.path` of this interpreter started as the children are (`-I`): absolute folders and files only."""
    with tempfile.TemporaryDirectory(prefix="presto-tui-path-") as folder:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", "import sys, json; print(json.dumps(sys.path))"],
                                  cwd=folder, env=ENV, capture_output=True, timeout=30, check=True)
            paths = json.loads(done.stdout)
        except (OSError, subprocess.SubprocessError, ValueError):
            paths = sys.path  # (this process's: the checkout's own entries are left out all the same)
    return tuple(p for p in paths if isinstance(p, str) and os.path.isabs(p) and os.path.exists(p))


def own_uid() -> int | None:
    """A uid for one program that no account has and no process runs as: 256 a process, in turn."""
    block = (_own_block + os.getpid()) % _OWN_BLOCKS
    for _ in range(256):
        uid = _OWN_UID_BASE + block * 256 + next(_own_count) % 256
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if not processes_of(uid):
                return uid
    return None  # (every one is an account's, or left running: the program runs as nobody)


def candidates() -> list[Launcher]:
    bwrap = shutil.which("bwrap")
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    found: list[Launcher] = []
    own = own_uid() if root else None
    if bwrap is not None:
        found += [Launcher(bwrap, own, own_user=True)] if own is not None else []
        found += [Launcher(bwrap, NOBODY)] if root else []
        found.append(Launcher(bwrap))
    missing = "bubblewrap (bwrap) is not installed" if bwrap is None else "bubblewrap is not used"
    found += [Launcher(None, own, missing, own_user=True)] if own is not None else []
    found += [Launcher(None, NOBODY, missing)] if root else []
    found.append(Launcher(None, None, missing))
    return found


def probe(launcher: Launcher, timeout_s: float = 20.0) -> str:
    """'' if `launcher` works and confines as it says, else why not (one line)."""
    ours, theirs = socket.socketpair()
    with ours, theirs, tempfile.TemporaryDirectory(prefix="presto-tui-probe-") as folder:
        user = "-" if launcher.drop_to is None else str(launcher.drop_to)
        inner = [interpreter(), "-I", "-c", _PROBE, str(theirs.fileno()), user,
                 "sandboxed" if launcher.sandboxed else "-"]
        try:
            if launcher.user is not None:  # (EINVAL for a uid this user namespace does not map)
                os.chown(folder, launcher.user, launcher.user)
            with launcher.started(inner, 2**20) as (command, fds):
                done = subprocess.run(command, cwd=folder, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, pass_fds=[theirs.fileno(), *fds], timeout=timeout_s,
                                      **launcher.popen_user())
        except (OSError, subprocess.SubprocessError) as e:
            return f"it does not start ({type(e).__name__}: {e})"
        theirs.close()
        ours.settimeout(1)
        try:
            seen = dict(p.split("=", 1) for p in ours.recv(4096).decode().split())
        except (OSError, ValueError):
            seen = {}
        if done.returncode != 0 or not seen:
            lines = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
            return f"it fails ({lines[-1][:160] if lines else f'exit status {done.returncode}'})"
        if not launcher.sandboxed:
            return ""
        if int(seen.get("caps", "1"), 16) != 0:
            return "the sandbox keeps capabilities"
        if seen.get("nets") != "lo":
            return f"the sandbox has network interfaces ({seen.get('nets')})"
        if seen.get("root") != "read-only":
            return "the sandbox's root is writable"
        if int(seen.get("pid", "100")) > 10:
            return "the sandbox has no PID namespace of its own"
        return ""


@functools.cache
def detect() -> Launcher:
    """The first way that works here (cached for the process)."""
    refused: list[str] = []  # why bubblewrap did not do
    last = ""
    for launcher in candidates():
        last = probe(launcher)
        if not last:
            if not launcher.sandboxed and refused:
                return replace(launcher, missing=f"bubblewrap does not work here: {refused[0]}")
            return launcher
        if launcher.sandboxed and not launcher.own_user:  # (why bubblewrap fails, not why a uid of its own does)
            refused.append(last)
    raise RuntimeError(f"the python grader cannot start a Python process here ({last})")


_warned: set[str] = set()


def warn_once(launcher: Launcher) -> None:
    """One line on stderr, once per process, where the program runs without a sandbox."""
    if launcher.sandboxed or "warned" in _warned:
        return
    _warned.add("warned")
    with contextlib.suppress(OSError, ValueError):
        how = f" ({INSTALL})" if "not installed" in launcher.missing else ""
        print(f"presto-tui: warning: the python grader runs the model's code without a sandbox: {launcher.missing}"
              f"{how}; it keeps per-process limits (time, memory, file size)"
              f"{', ' + launcher.who if launcher.user is not None else ''}.", file=sys.stderr)


def program_folder(parent: Path, launcher: Launcher) -> Path:
    """The program's working folder on this machine (used without bubblewrap), writable by its user."""
    folder = parent / "program"
    folder.mkdir()
    if launcher.user is not None:
        os.chown(folder, launcher.user, launcher.user)
    return folder
