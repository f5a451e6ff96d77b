"""Run a response's Python code and the item's tests in a separate, limited process.

The code comes from a model: it may loop forever, allocate without end, write files,
or exit early.  It never runs in presto-tui's own process:

- a fresh interpreter (`python -I`: no user site, no PYTHON* variables) in an empty
  temporary folder that is removed afterwards, with a minimal environment;
- limits set by the child on itself before the code runs (address space, CPU seconds,
  the size of a file it writes), so no `preexec_fn` runs in a process that may hold
  threads; a wall-clock limit from here kills its whole process group;
- the tests pass only if the process exits 0 *and* the program returned normally after
  the tests: the boot script then writes a token it read from its stdin (not in the
  program's file or arguments) with an `open` saved before the program ran.  So code
  that calls `sys.exit(0)` or `os._exit(0)` before the tests run does not pass.

These are limits against a model's mistakes (loops, runaway memory, early exits), not a
security sandbox: code written to escape them can (it runs in the same interpreter as
the boot script, may fork, may leave its process group, write files wherever the user
may, and reach the network).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Run by the child: limit itself, then run the program as __main__.
_BOOT = """\
import sys
try:
    import resource
except ImportError:  # no rlimits on this system: the wall-clock limit still holds
    resource = None
mem, cpu, fsize, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if resource is not None:
    for what, value in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_FSIZE, fsize)):
        try:
            resource.setrlimit(what, (value, value))
        except (ValueError, OSError):
            pass
token, done = sys.stdin.readline().strip(), sys.stdin.readline().strip()
sys.stdin.close()
_open = open  # the program may shadow open (from os import *)
sys.argv = [path]
import runpy
runpy.run_path(path, run_name="__main__")
with _open(done, "w") as f:
    f.write(token)
"""


@dataclass(frozen=True)
class CodeLimits:
    timeout_s: float = 10.0  # wall clock
    memory_mib: int = 1024  # address space
    file_mib: int = 16  # the largest file the code may write


@dataclass(frozen=True)
class CodeResult:
    passed: bool
    detail: str  # empty when passed; else the last line of the error, 'timed out', ...


def run_tests(code: str, tests: str, limits: CodeLimits | None = None) -> CodeResult:
    """Run `code` followed by `tests` in a limited child process; passed iff every test ran and passed."""
    limits = limits or CodeLimits()
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="presto-tui-tests-") as folder:
        work = Path(folder)
        done = work / "done"
        (work / "program.py").write_text(f"{code}\n\n{tests}\n", encoding="utf-8")
        (work / "boot.py").write_text(_BOOT, encoding="utf-8")
        err_path = work / "stderr"
        env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        cpu = max(1, int(limits.timeout_s) + 1)
        args = [sys.executable, "-I", str(work / "boot.py"), str(limits.memory_mib * 2**20), str(cpu),
                str(limits.file_mib * 2**20), str(work / "program.py")]
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(args, cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=err, start_new_session=True)
            try:
                assert proc.stdin is not None
                with contextlib.suppress(BrokenPipeError):  # a child that failed at once
                    proc.stdin.write(f"{token}\n{done}\n".encode())
                    proc.stdin.close()
                code_ = proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return CodeResult(False, f"timed out after {limits.timeout_s:g} s")
            finally:
                _kill_group(proc)  # anything it left running in its group
        finished = done.is_file() and done.read_text(errors="replace") == token
        if code_ == 0 and finished:
            return CodeResult(True, "")
        if code_ == 0:
            return CodeResult(False, "exited before the tests ran")
        return CodeResult(False, _last_line(err_path) or f"exit status {code_}")


def _kill_group(proc: subprocess.Popen) -> None:
    if hasattr(os, "killpg"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # pragma: no cover - no process groups
        with contextlib.suppress(OSError):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _last_line(path: Path, tail: int = 4096) -> str:
    """The last non-empty line of what the child wrote to stderr (the exception, usually)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""
