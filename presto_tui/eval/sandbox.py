"""Run a response's Python code and the item's tests; the tests' verdict is one the code cannot write.

The code comes from a model. Treated as hostile: it may loop, allocate without end, fork, write
files, reach the network, and try to pass without passing: walk `sys._getframe()` up to
whatever reports the result, patch builtins, `sys`, `os` or `atexit`, exit with a chosen status,
write to the file descriptors it inherits, print a marker, kill its parent.

Two processes, neither of them presto-tui's:

- the program host runs the code, and afterwards only answers requests on one socket;
- the test runner runs the item's tests with the code's names bound to proxies: a call, an
  attribute, an iteration, a comparison of two of the code's objects is a request to the host.
  What comes back is read as plain data (numbers, strings, bytes, containers of them) or as a
  reference to another of the code's objects, never as code. The runner alone decides: passed
  iff the tests ran to their end without an exception (unittest: every test passed), and it
  reports that on a socket the program never holds. The program's exit status and output are
  not read; nothing the code does in its own process (its frames, builtins, atexit, exit
  status, its file descriptors, its stdout) reaches the verdict.

So a test's expected values do not reach the code through a comparison: the runner does not
send its own values to be compared with (`==`, `<`, `in`, arithmetic between a proxy and a runner value are not
delegated; a proxy equals only another of the code's objects). Plain data the code returns
arrives as a copy, subclasses as their base type: an `int` subclass whose `__eq__` is always
true arrives as its int. What remains the program's to decide is what its own objects do
among themselves (`Point(1, 2) == Point(1, 2)` asks the code's `__eq__`), as in any test,
and what it answers to the arguments a test passes it. NumPy arrays of numbers, booleans or
fixed-width strings cross as arrays, copies too (`np.testing.assert_array_equal` works as in
any pytest run). The program's names are bound for the tests as `from program import *` would
bind them: its functions, classes and objects win over standard modules of the same name
(`def trace(m)` is callable), but a name the program bound to a module is Python's module, and
a standard module's attributes stay the module's (`math.isclose` is Python's whatever the
program bound to `math`). A function or class the program defined named like a builtin is
tried both ways (`run_tests`): the tests must pass with Python's builtins and with the
program's (`def pow(x, n)` is what they test; a `def range` must not empty their loops).

Where bubblewrap works (`confine.detect`), the host runs inside it: its own PID namespace (it
sees no other process and the whole namespace dies with the run), no network, a filesystem
that holds only what the program needs, read-only: the interpreter (its prefixes, a venv's
and its base's, and the folders on its `sys.path`: site-packages), the system's shared
libraries and the loader's cache (`confine.shown`), with a small tmpfs for /tmp (its working
folder) and /dev/shm, a minimal /dev and its own /proc. Nothing else is there: not the task
file, the trace or the project's checkout wherever they lie, not /etc, /home, /var, /srv,
/opt (unless the interpreter lives there: then only its folder), /sys or /run; files there
that name folders it does not hold are unreadable (an editable install's finder, which names
the checkout; a `direct_url.json`), and bubblewrap's options (what it binds, from where) are
not on its command line, which the program reads as /proc/1/cmdline. A clean
environment, no capabilities, as a user of its own (a uid no account has, one per program:
`confine.own_uid`; else `nobody`) when presto-tui runs as root. A cgroup (where presto-tui may
make one) limits memory (what is resident) and tasks for the whole tree and kills what is
left; else memory is limited per process, by address space (and, where the program's user is
its own, the number of processes): then the program's threads share two malloc arenas and
start with 4 MiB stacks, so that a hundred threads fit where a few dozen reserved it all.

Without bubblewrap the host is a plain process of presto-tui's user (of a user of its own if
that is root and that user may run this interpreter; its processes are all killed at the end,
and their number is limited), with per-process limits: time, address space and file size, its
process group killed at the end (and, as root, the cgroup above). The verdict
still cannot be forged from inside the code's process (the runner refuses the other processes
of its user a view of it: PR_SET_DUMPABLE), but the code sees the whole filesystem as that
user does (a task file others may read, the trace, the project, results written later) and
can write what that user may write, reach the network, and, run as presto-tui's own user (not
root), leave its process group and, as the kernel allows between processes of one user, read
presto-tui's environment and read or change its memory through /proc or ptrace: code written
for that could forge its grade or read the tests. Grade untrusted code with bubblewrap.

The runner is the tests' own process: the tests are the task file's, trusted as the task file
is; it runs outside the sandbox with the same time and memory limits.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from presto_tui.eval import confine
from presto_tui.eval.cgroup import TreeLimits, descendants, processes_of

# Run by both children with `python -I -c`: read what the parent sends on stdin (one line), then run the role.
BOOTSTRAP = """\
import json, sys, types
data = json.loads(sys.stdin.buffer.readline())
child = types.ModuleType("presto_tui_child")
exec(compile(data.pop("child"), "presto_tui_child", "exec"), child.__dict__)
child.main(sys.argv[1:], data)
"""
MAX_VERDICT = 2**16


@dataclass(frozen=True)
class CodeLimits:
    timeout_s: float = 10.0  # wall clock, for the code and the tests together
    # the program's whole tree (resident) where a cgroup holds it, else address space per process
    memory_mib: int = 1024
    file_mib: int = 16  # the largest file the code may write (its tmpfs under bubblewrap: 4 times this)
    tasks: int = 128  # processes and threads of the program's tree (cgroup, its own uid, or its user namespace)


@dataclass(frozen=True)
class CodeResult:
    passed: bool
    detail: str  # empty when passed; else one line: the failing test's exception, 'timed out after 10 s', ...


@cache
def _child_source() -> str:
    return (Path(__file__).parent / "_child.py").read_text(encoding="utf-8")


def run_tests(code: str, tests: str, limits: CodeLimits | None = None,
              launcher: confine.Launcher | None = None) -> CodeResult:
    """Run `code`, then `tests` against it; passed iff every test ran and passed (see the module's doc)."""
    limits = limits or CodeLimits()
    launcher = launcher or confine.detect()
    confine.warn_once(launcher)
    # First with Python's builtins. A program whose own function or class is named like a builtin the
    # tests may mean to test (`def pow(x, n)`) or may only use as a helper (`range`, `len`, `abs`,
    # `sorted`: a `def range(*a): return []` would empty the tests' loops); the runner cannot tell which.
    # So such a program passes only if the tests pass both ways: with Python's builtins and with the
    # program's. The second run's failure is not described: with the program's builtins, the tests hand
    # their expected values to the program (`abs(area(1) - 3.14159)`), and its exception would carry them.
    first, stand_ins = _run_once(code, tests, limits, launcher, builtins_too=False)
    if not stand_ins:
        return first
    named = ", ".join(f"`{name}`" for name in stand_ins)
    if not first.passed:
        return CodeResult(False, f"{first.detail} (with Python's {named}; the program's own is named like it)")
    second, _ = _run_once(code, tests, limits, launcher, builtins_too=True)
    if second.passed:
        return second
    return CodeResult(False, f"the tests failed with the program's own {named} in place of Python's builtin")


def _run_once(code: str, tests: str, limits: CodeLimits, launcher: confine.Launcher,
              builtins_too: bool) -> tuple[CodeResult, list[str]]:
    with tempfile.TemporaryDirectory(prefix="presto-tui-tests-") as folder:
        run = _Run(code, tests, limits, launcher, Path(folder), builtins_too)
        return run.result(), run.stand_ins


class _Run:
    def __init__(self, code: str, tests: str, limits: CodeLimits, launcher: confine.Launcher, folder: Path,
                 builtins_too: bool):
        self.code, self.tests, self.limits, self.folder = code, tests, limits, folder
        self.launcher = launcher.for_program()  # (a uid of its own, where this way gives one: RLIMIT_NPROC)
        self.builtins_too = builtins_too  # the program's own objects named like builtins replace them
        self.stand_ins: list[str] = []  # the builtins the program's own objects are named like (the runner's word)
        self.deadline = time.monotonic() + limits.timeout_s
        self.program: subprocess.Popen | None = None
        self.runner: subprocess.Popen | None = None
        self.tree: TreeLimits | None = None

    def result(self) -> CodeResult:
        try:
            return self._run()
        finally:
            self._end()

    def _config(self) -> dict:
        cpu = max(1, int(self.limits.timeout_s) + 1)
        return {"child": _child_source(), "memory": self.limits.memory_mib * 2**20, "cpu": cpu}

    def _run(self) -> CodeResult:
        lim = self.limits
        host_end, runner_end = socket.socketpair()
        verdict_in, verdict_out = socket.socketpair()
        with host_end, runner_end, verdict_in, verdict_out:
            try:
                self.program = self._start("program", [host_end])
            except OSError as e:
                return CodeResult(False, f"the program's process did not start ({type(e).__name__}: {e.strerror})")
            self.runner = self._start("runner", [runner_end, verdict_out])
            for end in (host_end, runner_end, verdict_out):
                end.close()
            nproc = lim.tasks if self.launcher.counted_alone else 0
            _send(self.program, {**self._config(), "program": self.code, "fsize": lim.file_mib * 2**20,
                                 "nproc": nproc, "user": self.launcher.drop_to}, close=False)
            _send(self.runner, {**self._config(), "tests": self.tests, "builtins_too": self.builtins_too})
            why = self._wait_ready(self.program)
            if why:
                return CodeResult(False, why)
            # the host waits for this go before it runs the code: its tree is complete, and placed first.
            # Where a cgroup holds the tree's memory (what its processes have resident) and the code can
            # neither leave it nor swap without bound, the host's address space is left alone: threads
            # reserve stacks and malloc arenas they never touch. Leaving it needs the cgroup filesystem,
            # which a sandbox of another user neither shows nor lets it mount; outside one, a program of
            # the grader's user could move itself to the parent group (its `cgroup.procs` is that user's)
            self.tree = TreeLimits.create(lim.memory_mib * 2**20, lim.tasks)
            held = False
            if self.tree is not None:
                pids = descendants(self.program.pid)
                self.tree.add(pids)
                held = self.launcher.cgroup_hidden and self.tree.swap_bounded and self.tree.holds(pids)
            _send(self.program, {"address_space": 0 if held else lim.memory_mib * 2**20})
            data, ended = _read_all(verdict_in, self.deadline)
        if not ended:
            return CodeResult(False, f"timed out after {lim.timeout_s:g} s")
        verdict = _parse_verdict(data)
        if verdict is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.runner.wait(timeout=1)
            return CodeResult(False, f"the test runner ended without a verdict (exit status {self.runner.returncode})")
        passed, detail, self.stand_ins = verdict
        if not passed and self.tree is not None and self.tree.out_of_memory() and "program" in detail:
            detail = f"the program ran out of memory ({lim.memory_mib} MiB for all its processes)"
        return CodeResult(passed, "" if passed else detail)

    def _start(self, role: str, ends: list[socket.socket]) -> subprocess.Popen:
        """The program host (as the launcher says: in bubblewrap, as its own user) or the test runner (plainly)."""
        fds = [end.fileno() for end in ends]
        inner = [confine.interpreter(), "-I", "-c", BOOTSTRAP, role, *map(str, fds)]
        if role == "runner":
            folder = self.folder / "runner"
            folder.mkdir()
            return subprocess.Popen(inner, cwd=folder, env=confine.ENV, stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=fds,
                                    start_new_session=True)
        with self.launcher.started(inner, 4 * self.limits.file_mib * 2**20) as (command, more):
            return subprocess.Popen(
                command, cwd=confine.program_folder(self.folder, self.launcher), env=confine.ENV,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=[*fds, *more],
                start_new_session=True, **self.launcher.popen_user())

    def _wait_ready(self, proc: subprocess.Popen) -> str:
        """'' once the host said it is ready; else why it is not (it failed before the code ran)."""
        assert proc.stdout is not None and proc.stderr is not None
        out = _read_until(proc.stdout, b"ready\n", self.deadline)
        if out.endswith(b"ready\n"):
            proc.stdout.close()
            proc.stderr.close()  # what the code writes goes to /dev/null from here on
            return ""
        if time.monotonic() >= self.deadline:
            return f"timed out after {self.limits.timeout_s:g} s"
        err = _read_until(proc.stderr, b"", min(self.deadline, time.monotonic() + 1))
        lines = [ln.strip() for ln in err.decode(errors="replace").splitlines() if ln.strip()]
        where = "the sandbox" if self.launcher.sandboxed else "the program's process"
        return f"{where} did not start ({lines[-1][:160] if lines else 'no message'})"

    def _end(self) -> None:
        """Kill both children and all they left (the namespace, the cgroup, the process group, every process
        of the program's own uid)."""
        for proc in (self.program, self.runner):
            if proc is not None:
                _kill_group(proc)
        if self.tree is not None:
            self.tree.close()
        if self.launcher.own_user and self.launcher.user is not None and self.program is not None:
            _kill_user(self.launcher.user)
        for proc in (self.program, self.runner):
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    if stream is not None:
                        with contextlib.suppress(OSError):
                            stream.close()


def _send(proc: subprocess.Popen, message: dict, close: bool = True) -> None:
    """A line of JSON to the child's stdin, then close it (unless told not to)."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # a child that failed at once says why elsewhere
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
    if close:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()


def _read_until(stream, marker: bytes, deadline: float, limit: int = 4096) -> bytes:
    """What `stream` gives until it ends, `marker` ends it, `limit` bytes, or the deadline."""
    fd, got = stream.fileno(), b""
    while len(got) < limit and not (marker and got.endswith(marker)):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, limit - len(got) if not marker else 1)
        if not chunk:
            break
        got += chunk
    return got


def _read_all(sock: socket.socket, deadline: float) -> tuple[bytes, bool]:
    """What `sock` gives until it is closed (True) or the deadline (False); at most MAX_VERDICT bytes kept."""
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            return data, False
        try:
            chunk = sock.recv(MAX_VERDICT)
        except OSError:
            return data, True
        if not chunk:
            return data, True
        data = (data + chunk)[:MAX_VERDICT]


def _parse_verdict(data: bytes) -> tuple[bool, str, list[str]] | None:
    try:
        verdict = json.loads(data)
    except ValueError:
        return None
    if type(verdict) is not dict or type(verdict.get("passed")) is not bool or type(verdict.get("detail")) is not str:
        return None
    names = verdict.get("stand_ins")
    stand_ins = [n for n in names if type(n) is str] if type(names) is list else []
    return verdict["passed"], verdict["detail"], stand_ins


def _kill_user(uid: int) -> None:
    """SIGKILL every process of `uid`, a program's own (those that left its process group too).  Where any is
    left, `kill -KILL -1` run as that uid does it at once in the kernel, which a process forking meanwhile
    cannot outrun (the kernel refuses a fork to a process a fatal signal is pending for); then, or where there
    is no `kill`, pass after pass from /proc until none is left."""
    if not processes_of(uid):
        return
    kill = shutil.which("kill", path=confine.ENV["PATH"])
    if kill is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([kill, "-KILL", "-1"], user=uid, group=uid, extra_groups=[], env=confine.ENV,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    for _ in range(20):
        found = processes_of(uid)
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group (under bubblewrap, that ends its namespace: --die-with-parent)."""
    if hasattr(os, "killpg"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # pragma: no cover - no process groups
        with contextlib.suppress(OSError):
            proc.kill()
