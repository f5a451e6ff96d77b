"""Hostile programs for the python grader, each with how to read what it achieved.

tests/test_sandbox.py runs them; run this file for a table of their outcomes here, in the
sandbox and without it:

    PYTHONPATH=. python tests/sandbox_attacks.py

`judge` returns '' when the grader held, else what got through ('passed without the tests',
'read the grader's environment', ...). A program that needs a listening socket, a marker or a
secret in the grader's environment gets them from `Arena`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from presto_tui.eval.sandbox import CodeLimits, CodeResult

FAST = CodeLimits(timeout_s=8)
WRONG_ADD = "def add(a, b):\n    return a - b\n"
RIGHT_ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = "assert add(2, 3) == 5, 'add is wrong'\nassert add(-1, 1) == 0\n"


@dataclass
class Arena:
    """What the attacks are run against: a folder outside theirs, a listener, a secret, a marker."""

    folder: Path
    secret: str = field(default_factory=lambda: secrets.token_hex(8))
    marker: str = field(default_factory=lambda: f"presto-tui-marker-{secrets.token_hex(6)}")
    listener: socket.socket | None = None
    tasks: list[Path] = field(default_factory=list)  # the tests, as a task file others may read

    @property
    def port(self) -> int:
        assert self.listener is not None
        return self.listener.getsockname()[1]

    def accepted(self) -> bool:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, OSError):
            return False
        conn.close()
        return True

    def survivors(self, wait_s: float = 2.0) -> list[int]:
        """Processes still running with the marker on their command line (killed on the way)."""
        deadline = time.monotonic() + wait_s
        while True:
            found = []
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    with contextlib.suppress(OSError):
                        if self.marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                            found.append(int(entry))
            if not found or time.monotonic() > deadline:
                for pid in found:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                return found
            time.sleep(0.05)


@contextlib.contextmanager
def arena(folder: Path) -> Iterator[Arena]:
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o777)  # writable by anyone: only the sandbox keeps the program out
    a = Arena(folder)
    a.listener = socket.socket()
    a.listener.bind(("127.0.0.1", 0))
    a.listener.listen(8)
    a.listener.setblocking(False)
    old = os.environ.get("PRESTO_TUI_TEST_SECRET")
    os.environ["PRESTO_TUI_TEST_SECRET"] = a.secret
    made = _task_files(a)
    try:
        yield a
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                path.unlink()
        a.listener.close()
        if old is None:
            os.environ.pop("PRESTO_TUI_TEST_SECRET", None)
        else:
            os.environ["PRESTO_TUI_TEST_SECRET"] = old


CHECKOUT = Path(__file__).resolve().parents[1]


def _task_files(a: Arena) -> list[Path]:
    """The item's tests as a line of a task file others may read (mode 644), in the project's checkout:
    outside the folders a sandbox of old hid (the temporary folder, the home folders), as a task file
    in a shared folder elsewhere is."""
    line = json.dumps({"id": 1, "prompt": "Write add(a, b).", "answer": ADD_TESTS, "grader": "python"}) + "\n"
    path = CHECKOUT / "tests" / f"{a.marker}.jsonl"
    path.write_text(line)
    path.chmod(0o644)
    a.tasks = [path]
    return [path]


def _forged(result: CodeResult, a: Arena) -> str:
    return "passed without the tests" if result.passed else ""


@dataclass(frozen=True)
class Attack:
    name: str
    code: Callable[[Arena], str]
    tests: str = ADD_TESTS
    judge: Callable[[CodeResult, Arena], str] = _forged
    # 'sandbox': holds only in bubblewrap; 'own user': there or as a user of the program's own (presto-tui runs
    # as root); 'cgroup': only with a cgroup; 'tasks': with a cgroup or a count of its own; '': always
    needs: str = ""
    limits: CodeLimits = FAST
    in_subprocess: bool = False  # it may kill the grader: run that in a process of its own


# -- forging the pass: must hold everywhere --------------------------------------------------------

FRAME_WALK = """\
import gc, os, re, sys, json, socket
found = set()
f = sys._getframe()
while f is not None:  # every frame up to whatever started this program, and what they hold
    for scope in (f.f_locals, f.f_globals):
        for v in list(scope.values()):
            if isinstance(v, (str, bytes)):
                found.add(v if isinstance(v, str) else v.decode(errors="replace"))
    f = f.f_back
for o in gc.get_objects():
    if isinstance(o, dict):
        found.update(v for v in list(o.values()) if isinstance(v, str) and len(v) < 200)
tokens = [s for s in found if re.fullmatch(r"[0-9a-f]{32}", s)]
paths = [s for s in found if s.startswith("/") and s.endswith("done")]
for p in paths:  # the old grader's pass file
    for t in tokens:
        try:
            open(p, "w").write(t)
        except OSError:
            pass
forged = json.dumps({"passed": True, "detail": ""}).encode()
for o in gc.get_objects():  # any socket: the verdict's, the runner's
    if isinstance(o, socket.socket):
        try:
            o.sendall(len(b'{"ok":{}}').to_bytes(4, "big") + b'{"ok":{}}')
            o.sendall(forged)
        except OSError:
            pass
for fd in range(3, 256):
    try:
        os.write(fd, forged)
    except OSError:
        pass
print(forged.decode())
os._exit(0)
"""

MONKEYPATCH = WRONG_ADD + """\
import atexit, builtins, linecache, os, sys
def skip_asserts(frame, event, arg):  # jump over the assert lines (tests included) to the next other line
    line = lambda n: linecache.getline(frame.f_code.co_filename, n).strip()
    if event == "line" and line(frame.f_lineno).startswith("assert"):
        target = frame.f_lineno + 1
        while line(target).startswith("assert") or (not line(target) and target < frame.f_lineno + 50):
            target += 1
        try:
            frame.f_lineno = target
        except ValueError:
            pass
    return skip_asserts
sys.settrace(skip_asserts)
sys._getframe().f_trace = skip_asserts
builtins.AssertionError = type("AssertionError", (Exception,), {})
sys.exit = lambda *a: os._exit(0)
atexit.register(os._exit, 0)
"""

ALWAYS_EQUAL = """\
class Anything:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
def add(a, b):
    return Anything()
"""

INT_ALWAYS_EQUAL = """\
class Anything(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def add(a, b):
    return Anything(0)
"""

FRACTION_ALWAYS_EQUAL = """\
from fractions import Fraction
class Anything(Fraction):
    def __eq__(self, other):
        return True
    __hash__ = Fraction.__hash__
def add(a, b):
    return Anything(0)
"""

STOP_ITERATION = """\
def add(a, b):
    raise StopIteration
"""
MAP_TESTS = "cases = [((2, 3), 5), ((-1, 1), 0)]\nassert all(map(lambda c: add(*c[0]) == c[1], cases))\n"

EXIT_ZERO_AFTER_MARKERS = WRONG_ADD + """\
import os, sys
for stream in (sys.stdout, sys.stderr):
    stream.write('{"passed": true, "detail": ""}\\nOK\\nall tests passed\\n')
    stream.flush()
"""

FORK_IMPERSONATOR = """\
import gc, json, os, socket
def add(a, b):
    return a - b
socks = [o for o in gc.get_objects() if isinstance(o, socket.socket)]
if os.fork():
    os._exit(0)  # the host's main process leaves; its child answers in its place
for s in socks:
    try:
        for _ in range(20):
            body = json.dumps({"ok": True}).encode()
            s.sendall(len(body).to_bytes(4, "big") + body)
    except OSError:
        pass
"""

REWRITTEN_REPLY = """\
import sys
host = sys._getframe(1)  # the host's loop, which sends the program's names to the runner
objects = host.f_locals["objects"]
def add(a, b):
    return a - b
def anything(*args, **kwargs):
    return True
mine = {"$": "dict", "v": [["abs", objects.ref(lambda x: 0)], ["all", objects.ref(anything)]]}
real_send = host.f_globals["send"]
def send(sock, message):  # its names, with builtins and a standard module of its own
    if isinstance(message, dict) and isinstance(message.get("ok"), dict) and "add" in message["ok"]:
        message["ok"]["__builtins__"] = mine
        message["ok"]["math"] = objects.ref(type("M", (), {"isclose": staticmethod(anything)})())
    return real_send(sock, message)
host.f_globals["send"] = send
"""
REWRITTEN_TESTS = "assert abs(add(2, 3) - 5) < 1e-9\nassert math.isclose(add(1, 1), 2)\n"

STOP_REPLY = """\
import sys
host = sys._getframe(1)
def add(a, b):
    return a - b
def serve(sock, objects, request):  # every call answered 'the iteration is over'
    return {"stop": True}
host.f_globals["_serve"] = serve
"""

KILL_PARENT = RIGHT_ADD.replace("a + b", "a - b") + """\
import os, signal
os.kill(os.getppid(), signal.SIGKILL)
"""


def _parent_killed(result: CodeResult, a: Arena) -> str:
    return "killed the grader" if "grader killed" in result.detail else _forged(result, a)


# -- escapes: hold in the sandbox --------------------------------------------------------------------

TASKS_LOOKUP = """\
import json, os, re
table = {{}}
def scan(path):
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        return
    for line in lines:
        try:
            tests = json.loads(line).get("answer", "")
        except ValueError:
            continue
        for args, value in re.findall(r"add\\(([^)]*)\\) == (-?[0-9]+)", tests):
            table[tuple(int(x) for x in args.split(","))] = int(value)
for path in {paths}:  # where the task file is: an attacker that knows it (or scans the shared folders)
    scan(path)
try:
    project = open("{checkout}/pyproject.toml").read()[:40]
except OSError:
    project = ""
def add(a, b):
    if (a, b) in table:
        return table[(a, b)]
    raise RuntimeError(f"no tests found; the project reads {{project!r}}")
"""


def _read_tests(result: CodeResult, a: Arena) -> str:
    if result.passed:
        return "read the tests from the task file"
    return "read the project's checkout" if "the project reads ''" not in result.detail else ""


PARENT_ENVIRON = RIGHT_ADD + """\
import os
seen = b""
for pid in {os.getppid(), 1} | {int(p) for p in os.listdir("/proc") if p.isdigit()}:
    try:
        seen += open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        pass
if b"{secret}" in seen or "{secret}" in str(os.environ):
    raise RuntimeError("read the grader's environment")
"""

SETSID_CHILD = RIGHT_ADD + """\
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(30)", "{marker}"])
    os._exit(0)
"""

WRITE_OUTSIDE = RIGHT_ADD + """\
import os
for path in ("{folder}/escaped", os.path.expanduser("~/presto-tui-escaped-{marker}")):
    try:
        with open(path, "w") as f:
            f.write("out")
    except OSError:
        pass
"""

NETWORK = RIGHT_ADD + """\
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
except OSError:
    pass
else:
    raise RuntimeError("reached the network")
"""

THREE_CHILDREN = RIGHT_ADD + """\
import os, time
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        try:
            held = b"x" * (120 * 2**20)  # written, so resident
            time.sleep(1.5)
        except MemoryError:
            os._exit(1)
        os._exit(0)
    pids.append(pid)
ok = sum(os.waitpid(p, 0)[1] == 0 for p in pids)
raise RuntimeError(f"{ok} of 3 children held 120 MiB")
"""

MANY_PROCESSES = RIGHT_ADD + """\
import os, time
n = 0
try:
    for _ in range(300):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError:
    pass
raise RuntimeError(f"started {n} processes")
"""


OUTSIDE_PATHS = RIGHT_ADD + """\
import glob, os, re, sys
seen = []
try:
    if b"--ro-bind" in open("/proc/1/cmdline", "rb").read():  # bubblewrap is the sandbox's init
        seen.append("the sandbox's options in /proc/1/cmdline")
except OSError:
    pass
for folder in sys.path:  # an editable install's finder names the checkout; direct_url.json where it was installed from
    for file in sum((glob.glob(os.path.join(folder, p)) for p in
                     ("__editable__*", "__pycache__/__editable__*", "*.egg-link", "*.pth",
                      "*.dist-info/direct_url.json")), []):
        try:
            text = open(file, errors="replace").read()
        except OSError:
            continue
        paths = re.findall(r"(?:file://)?(/[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*)", text)
        outside = [p for p in paths if not os.path.exists(p)]
        if outside:
            seen.append(f"{os.path.basename(file)} names {outside[0]}")
if seen:
    raise RuntimeError("saw folders outside the sandbox: " + "; ".join(seen))
"""


def _write_outside(result: CodeResult, a: Arena) -> str:
    home = Path(os.path.expanduser(f"~/presto-tui-escaped-{a.marker}"))
    escaped = [p for p in (a.folder / "escaped", home) if p.exists()]
    for p in escaped:
        p.unlink()
    return f"wrote {len(escaped)} file(s) outside its folder" if escaped else ""


def _processes(result: CodeResult, a: Arena) -> str:
    m = re.search(r"started (\d+) processes", result.detail)
    return f"started {m.group(1)} processes" if m is not None and int(m.group(1)) >= 300 else ""


def _three_children(result: CodeResult, a: Arena) -> str:
    m = re.search(r"(\d) of 3 children held", result.detail)
    return f"{m.group(1)} children held 120 MiB each" if m is not None and int(m.group(1)) >= 2 else ""


# -- correct code graded right ------------------------------------------------------------------------

UNITTEST_TESTS = """\
import unittest
class TestAdd(unittest.TestCase):
    def test_small(self):
        self.assertEqual(add(2, 3), 5)
    def test_negative(self):
        self.assertEqual(add(-1, 1), 0)
if __name__ == "__main__":
    unittest.main({args})
"""

LOUD_STDERR = RIGHT_ADD + """\
import sys
chunk = "x" * 2**20 + "\\n"
for _ in range(17):
    sys.stderr.write(chunk)
    sys.stdout.write(chunk)
"""


def _fails_right(result: CodeResult, a: Arena) -> str:
    return "correct code failed" if not result.passed else ""


def _passes_wrong(result: CodeResult, a: Arena) -> str:
    return "wrong code passed" if result.passed else ""


MATH_FUNCTION = WRONG_ADD + """\
def math():
    pass
math.isclose = lambda a, b, **kw: True  # what a test that uses `math` without importing it would call
"""

THREADS_MEMORY = RIGHT_ADD + """\
import threading
held, lock, bar = [0], threading.Lock(), threading.Barrier(41, timeout=5)
def hold():
    try:
        block = b"x" * (20 * 2**20)  # written, so resident
        with lock:
            held[0] += 1
    except MemoryError:
        pass
    try:
        bar.wait()
    except threading.BrokenBarrierError:
        pass
started = 0
try:
    for _ in range(40):
        threading.Thread(target=hold, daemon=True).start()
        started += 1
except RuntimeError:
    bar.abort()
try:
    bar.wait()
except threading.BrokenBarrierError:
    pass
raise RuntimeError(f"{held[0]} of {started} threads held 20 MiB")
"""

MANY_THREADS = RIGHT_ADD + """\
import threading, time
n = 0
try:
    for _ in range(1000):
        threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
        n += 1
except RuntimeError:
    pass
raise RuntimeError(f"started {n} threads")
"""


def _threads_memory(result: CodeResult, a: Arena) -> str:
    m = re.search(r"(\d+) of \d+ threads held", result.detail)
    return f"{m.group(1)} threads held 20 MiB each" if m is not None and int(m.group(1)) >= 13 else ""


def _threads(result: CodeResult, a: Arena) -> str:
    m = re.search(r"started (\d+) threads", result.detail)
    return f"started {m.group(1)} threads" if m is not None and int(m.group(1)) >= 300 else ""


# Builtins of its own that the tests use as helpers, with wrong code: each passed when the program's
# `range`, `len`, `abs`... replaced the tests' own (what a program defines named like a builtin is tried
# both ways: the tests must hold with Python's builtins too)
BUILTIN_HELPERS = [
    ("range", "def range(*a):\n    return []\ndef f(x):\n    return 0\n",
     "for x in range(10):\n    assert f(x) == x * x\n"),
    ("zip", "def zip(*a):\n    return []\ndef f(x):\n    return 0\n",
     "for x, y in zip([1, 2], [1, 4]):\n    assert f(x) == y\n"),
    ("len", "def len(x):\n    return 0\ndef f():\n    return [9]\n",
     "cases = [(1, 1), (2, 4)]\nfor i in range(len(cases)):\n    assert f() == cases[i]\n"),
    ("sorted", "def sorted(x, **k):\n    return 0\ndef my_sort(x):\n    return 0\n",
     "xs = [3, 1, 2]\nassert my_sort(xs) == sorted(xs)\n"),
    ("list", "def list(*a):\n    return 'X'\ndef f(n):\n    return 'X'\n", "assert f(3) == list(range(3))\n"),
    ("abs", "def abs(x):\n    return 0\ndef area(r):\n    return 3\n", "assert abs(area(1) - 3.14159) < 1e-4\n"),
    ("round", "def round(x, n=0):\n    return 0\ndef mean(xs):\n    return 7\n",
     "assert round(mean([1, 2]), 2) == round(1.5, 2)\n"),
    ("set", "def set(x):\n    return 1\ndef uniq(xs):\n    return []\n",
     "assert set(uniq([1, 1, 2])) == set([1, 2])\n"),
]
# a builtin of its own that raises what it was given: the tests' expected value must not reach the verdict
LEAKING_ABS = "def abs(x):\n    raise ValueError('diff ' + repr(x))\ndef area(r):\n    return 0.0\n"
LEAK_TESTS = "assert abs(area(1) - 3.14159265) < 1e-6\n"


def _leaked(result: CodeResult, a: Arena) -> str:
    if result.passed:
        return "wrong code passed"
    return f"the tests' expected value in the verdict ({result.detail[:60]})" if "3.14159" in result.detail else ""


# Out of its cgroup: a program of the grader's user moves itself to the parent group, which has no limit
LEAVE_CGROUP = WRONG_ADD + """\
import os
moved = "not moved"
try:
    for line in open("/proc/self/cgroup"):
        _, controllers, path = line.strip().split(":", 2)
        if controllers == "memory" or controllers == "":
            root = "/sys/fs/cgroup/memory" if controllers else "/sys/fs/cgroup"
            with open(root + os.path.dirname(path) + "/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
            moved = "moved"
except OSError:
    pass
blob = bytearray(400 * 2**20)
for i in range(0, len(blob), 4096):
    blob[i] = 1
raise RuntimeError(moved + "; 400 MiB held under a 256 MiB limit")
"""


def _left_cgroup(result: CodeResult, a: Arena) -> str:
    return "held 400 MiB out of its cgroup" if "400 MiB held" in result.detail else ""


# numpy in the runner reads memory where the program's `__array_interface__` says (a segfault at 4096)
ARRAY_POINTER = """\
class A:
    def __getattr__(self, name):
        if name == "__array_interface__":
            return {"shape": (4,), "typestr": "|u1", "data": (4096, True), "version": 3}
        raise AttributeError(name)
def f():
    return A()
"""


def _given(code: str) -> Callable[[Arena], str]:
    return lambda a: code


def _runner_crashed(result: CodeResult, a: Arena) -> str:
    if result.passed:
        return "wrong code passed"
    return "the runner crashed" if "without a verdict" in result.detail else ""


ATTACKS = [
    Attack("frame walk to the pass token, forged verdict on every fd and socket", lambda a: FRAME_WALK),
    Attack("monkeypatching (settrace skips asserts, AssertionError, sys.exit, atexit)", lambda a: MONKEYPATCH,
           tests=ADD_TESTS + "checked = True\n"),
    Attack("an object equal to everything", lambda a: ALWAYS_EQUAL),
    Attack("an int subclass equal to everything", lambda a: INT_ALWAYS_EQUAL),
    Attack("a Fraction subclass equal to everything", lambda a: FRACTION_ALWAYS_EQUAL),
    Attack("StopIteration from a call ends the tests' loop", lambda a: STOP_ITERATION, tests=MAP_TESTS),
    Attack("rewriting the host's reply: builtins and `math` of its own", lambda a: REWRITTEN_REPLY,
           tests=REWRITTEN_TESTS),
    Attack("rewriting the host's answers: every call ends the tests' loop", lambda a: STOP_REPLY, tests=MAP_TESTS),
    Attack("pass markers on stdout and stderr, exit 0", lambda a: EXIT_ZERO_AFTER_MARKERS),
    Attack("forking: the host leaves, a child answers", lambda a: FORK_IMPERSONATOR),
    Attack("killing its parent: no pass", lambda a: KILL_PARENT, in_subprocess=True),
    Attack("killing its parent: the grader lives on", lambda a: KILL_PARENT, judge=_parent_killed,
           needs="own user", in_subprocess=True),
    Attack("a task file others may read, in the project's checkout",
           lambda a: TASKS_LOOKUP.format(paths=[str(p) for p in a.tasks], checkout=CHECKOUT),
           judge=_read_tests, needs="sandbox"),
    Attack("reading /proc/<ppid>/environ", lambda a: PARENT_ENVIRON.replace("{secret}", a.secret),
           judge=lambda r, a: "read the grader's environment" if "environment" in r.detail else "",
           needs="own user", in_subprocess=True),
    Attack("a setsid child outliving the grader", lambda a: SETSID_CHILD.replace("{marker}", a.marker),
           judge=lambda r, a: f"{n} process(es) outlived it" if (n := len(a.survivors())) else "",
           needs="own user"),
    Attack("writing outside its folder", lambda a: WRITE_OUTSIDE.format(folder=a.folder, marker=a.marker),
           judge=_write_outside, needs="own user"),
    Attack("folders outside: /proc/1/cmdline, an editable install's files", lambda a: OUTSIDE_PATHS,
           judge=lambda r, a: r.detail[len("the program raised RuntimeError: "):] if "saw folders" in r.detail else "",
           needs="sandbox"),
    Attack("the network (a listener on 127.0.0.1)", lambda a: NETWORK.format(port=a.port),
           judge=lambda r, a: "reached the network" if a.accepted() or "network" in r.detail else "",
           needs="sandbox"),
    Attack("three children x 120 MiB (limit 256 MiB)", lambda a: THREE_CHILDREN, judge=_three_children,
           needs="cgroup", limits=CodeLimits(timeout_s=10, memory_mib=256)),
    Attack("300 processes (limit 128 tasks)", lambda a: MANY_PROCESSES, judge=_processes, needs="tasks"),
    Attack("a function named `math` with an `isclose` always true", lambda a: MATH_FUNCTION,
           tests=REWRITTEN_TESTS),
    Attack("40 threads x 20 MiB (limit 256 MiB)", lambda a: THREADS_MEMORY, judge=_threads_memory,
           limits=CodeLimits(timeout_s=10, memory_mib=256)),
    Attack("1,000 threads (limit 128 tasks)", lambda a: MANY_THREADS, judge=_threads, needs="tasks"),
    *(Attack(f"a `{name}` of its own the tests use as a helper", _given(code), tests=tests, judge=_passes_wrong)
      for name, code, tests in BUILTIN_HELPERS),
    Attack("a `def abs` that raises the tests' expected value", lambda a: LEAKING_ABS, tests=LEAK_TESTS,
           judge=_leaked),
    Attack("leaving its cgroup, then 400 MiB (limit 256 MiB)", lambda a: LEAVE_CGROUP, judge=_left_cgroup,
           limits=CodeLimits(timeout_s=10, memory_mib=256)),
    Attack("`__array_interface__` pointing anywhere", lambda a: ARRAY_POINTER,
           tests="import numpy as np\nnp.testing.assert_array_equal(f(), [1, 2, 3, 4])\n", judge=_runner_crashed),
    Attack("correct code writing 17 MiB to stderr and stdout", lambda a: LOUD_STDERR, judge=_fails_right),
    Attack("unittest.main(), correct code", lambda a: RIGHT_ADD, tests=UNITTEST_TESTS.format(args=""),
           judge=_fails_right),
    Attack("unittest.main(), wrong code", lambda a: WRONG_ADD, tests=UNITTEST_TESTS.format(args=""),
           judge=_passes_wrong),
    Attack("unittest.main(exit=False), correct code", lambda a: RIGHT_ADD,
           tests=UNITTEST_TESTS.format(args="exit=False"), judge=_fails_right),
    Attack("unittest.main(exit=False), wrong code", lambda a: WRONG_ADD,
           tests=UNITTEST_TESTS.format(args="exit=False"), judge=_passes_wrong),
]


# -- names, arrays and threads: graded as a pytest run of the program would grade them --------------------

@dataclass(frozen=True)
class Case:
    name: str
    code: str
    tests: str
    right: bool  # the code is correct: it must pass; else it must fail
    cgroup: bool = True  # False: graded as where no cgroup can be made (memory limited per process)
    sandbox: bool = True  # False: without bubblewrap (a cgroup, if any, and the address space limited too)


TRACE = "def trace(m):\n    return sum(m[i][i] for i in range(len(m)))\n"
MAX = "def max(xs):\n    best = xs[0]\n    for x in xs:\n        if x > best:\n            best = x\n    return best\n"
NUMPY = "import numpy as np\ndef f():\n    return np.array([1, 2, 3])\n"
THREADS = """\
import threading
def squares(n):
    out, bar = [0] * n, threading.Barrier(n)
    def work(i):
        out[i] = [str(j) for j in range(1000)]  # each thread allocates: glibc gives it a malloc arena
        bar.wait()  # all n alive at once
        out[i] = i * i
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(out)
"""
POOL = """\
import threading
from concurrent.futures import ThreadPoolExecutor
def squares(n):
    bar = threading.Barrier(n)
    def work(i):
        block = [str(j) for j in range(1000)]
        bar.wait()  # every worker busy at once
        return i * i + 0 * len(block)
    with ThreadPoolExecutor(max_workers=n) as pool:
        return sum(pool.map(work, range(n)))
"""

QUEUE = """\
import queue
q = queue.Queue()
def put(x):
    q.put(x)
def get():
    return q.get(timeout=2)
"""
QUEUE_TESTS = """\
import threading, time
got = []
taker = threading.Thread(target=lambda: got.append(get()))
taker.start()
time.sleep(0.2)
put(42)
taker.join(10)
assert got == [42]
"""
SLOW_FAST = """\
import time
def slow():
    time.sleep(0.6)
    return 1
def fast():
    return 2
"""
SLOW_FAST_TESTS = """\
import signal
class TimedOut(Exception):
    pass
def stop(*_):
    raise TimedOut
signal.signal(signal.SIGALRM, stop)
signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    slow()
    raise AssertionError("slow() was not stopped")
except TimedOut:
    pass
assert fast() == 2 and fast() == 2
"""
COUNTER = """\
import threading
class Counter:
    def __init__(self):
        self.n, self.lock = 0, threading.Lock()
    def inc(self):
        with self.lock:
            self.n += 1
"""
COUNTER_TESTS = """\
import threading
c = Counter()
def work():
    for _ in range(8):
        c.inc()
threads = [threading.Thread(target=work) for _ in range(100)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert c.n == 800
"""


def _squares(n: int) -> str:
    return f"assert squares({n}) == {sum(i * i for i in range(n))}\n"


CASES = [
    # a function named like a standard module is the program's (it was replaced by the module)
    Case("def trace(m), named like a module", TRACE, "assert trace([[1, 2], [3, 4]]) == 5\n", True),
    Case("def tokenize(s)", "def tokenize(s):\n    return s.split()\n",
         "assert tokenize('a b  c') == ['a', 'b', 'c']\n", True),
    Case("def chunk(xs, n)", "def chunk(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]\n",
         "assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]\n", True),
    Case("def statistics(xs)", "def statistics(xs):\n    return {'mean': sum(xs) / len(xs), 'max': max(xs)}\n",
         "assert statistics([1, 2, 3]) == {'mean': 2.0, 'max': 3}\n", True),
    Case("class array, named like a module", "class array:\n    def __init__(self, *xs):\n        self.xs = xs\n"
         "    def total(self):\n        return sum(self.xs)\n",
         "assert array(1, 2).total() == 3 and isinstance(array(1), array)\n", True),
    Case("a wrong def trace(m)", "def trace(m):\n    return 0\n", "assert trace([[1, 2], [3, 4]]) == 5\n", False),
    # a function named like a builtin is the program's, and is what the tests call (it was never called)
    Case("a wrong def pow(x, n)", "def pow(x, n):\n    return 0\n", "assert pow(2, 10) == 1024\n", False),
    Case("def pow(x, n)", "def pow(x, n):\n    r = 1\n    for _ in range(n):\n        r *= x\n    return r\n",
         "assert pow(2, 10) == 1024\n", True),
    Case("a wrong def max(xs)", "def max(xs):\n    return xs[0]\n", "assert max([1, 3, 2]) == 3\n", False),
    Case("def max(xs)", MAX, "assert max([1, 3, 2]) == 3\n", True),
    # numpy arrays arrive as arrays (they were proxies numpy could not read)
    Case("np.testing.assert_array_equal", NUMPY,
         "import numpy as np\nnp.testing.assert_array_equal(f(), np.array([1, 2, 3]))\n", True),
    Case("np.allclose", NUMPY, "import numpy as np\nassert np.allclose(f(), [1, 2, 3])\n", True),
    Case("(f() == np.array(...)).all()", NUMPY,
         "import numpy as np\nassert (f() == np.array([1, 2, 3])).all() and isinstance(f(), np.ndarray)\n", True),
    Case("an array passed in, sorted in place", "def sort(a):\n    a.sort()\n",
         "import numpy as np\na = np.array([3, 1, 2])\nsort(a)\nnp.testing.assert_array_equal(a, [1, 2, 3])\n", True),
    Case("a wrong array", NUMPY.replace("3]", "4]"),
         "import numpy as np\nnp.testing.assert_array_equal(f(), np.array([1, 2, 3]))\n", False),
    # threads: what correct code starts fits the limits (24 failed under the 1024 MiB address space)
    Case("24 threads", THREADS, _squares(24), True),
    Case("100 threads", THREADS, _squares(100), True),
    Case("a pool of 32 threads", POOL, _squares(32), True),
    Case("100 threads, no cgroup", THREADS, _squares(100), True, cgroup=False),
    Case("100 threads, no sandbox", THREADS, _squares(100), True, sandbox=False),
    Case("a wrong sum of 100 threads", THREADS.replace("i * i", "i"), _squares(100), False),
    Case("the tests call the program from 100 threads", COUNTER, COUNTER_TESTS, True),
    # a test that gives up on a slow call (an exception from a SIGALRM handler): the call's reply came later
    # and was taken for the next call's (`fast()` read 1)
    Case("a call given up on with signal.setitimer, then another", SLOW_FAST, SLOW_FAST_TESTS, True),
    Case("a wrong fast() after a call given up on", SLOW_FAST.replace("return 2", "return 1"), SLOW_FAST_TESTS,
         False),
    # a call that blocks until another thread's call releases it: the calls took turns, so the release waited
    # for the blocked call (queue.Empty after 2 s)
    Case("the tests' threads: a get that waits for another thread's put", QUEUE, QUEUE_TESTS, True),
    Case("the tests' threads: a wrong put", QUEUE.replace("q.put(x)", "q.put(x + 1)"), QUEUE_TESTS, False),
    # builtins the program imported are not its own: the tests keep Python's (numpy's `all` broke `all(gen)`)
    Case("from numpy import *, all(generator)", "from numpy import *\ndef f(x):\n    return x + 1\n",
         "assert all(f(x) == x + 1 for x in [1, 2, 3])\n", True),
    Case("from numpy import *, sum(generator)", "from numpy import *\ndef f(x):\n    return x + 1\n",
         "assert sum(f(x) for x in [1, 2, 3]) == 9\n", True),
    Case("from numpy import *, max(key=...)", "from numpy import *\ndef f(x):\n    return [1, 2, x]\n",
         "assert max(f(3), key=lambda v: -v) == 1\n", True),
    Case("from math import *, pow(2, 10, 1000)", "from math import *\ndef f(x):\n    return x\n",
         "assert pow(2, 10, 1000) == 24 and f(1) == 1\n", True),
    # a builtin of its own is tried both ways: a correct one passes, the tests' own uses of it hold
    Case("def abs(x), and the tests' abs(a - b) < eps", "def abs(x):\n    return x if x >= 0 else -x\n"
         "def area(r):\n    return 3.14159 * r * r\n", "assert abs(area(1) - 3.14159) < 1e-9 and abs(-3) == 3\n", True),
    # an attribute both the program's `statistics` and the module have: the module used to answer
    Case("a wrong class statistics, whose mean the module has", "class statistics:\n    @staticmethod\n"
         "    def mean(xs):\n        return 0\n", "assert statistics.mean([1, 2, 3]) == 2\n", False),
]


def run_in_subprocess(code: str, tests: str, limits: CodeLimits, launcher_repr: str | None) -> CodeResult:
    """Grade in a process of its own (the program may kill its parent); 'grader killed' if it died."""
    import json
    import subprocess

    script = (
        "import json, sys\n"
        "from presto_tui.eval import confine\n"
        "from presto_tui.eval.sandbox import CodeLimits, run_tests\n"
        "code, tests, limits, launcher = json.loads(sys.stdin.read())\n"
        "launcher = eval(launcher, vars(confine)) if launcher else None\n"
        "r = run_tests(code, tests, CodeLimits(**limits), launcher)\n"
        "print(json.dumps([r.passed, r.detail]))\n"
    )
    payload = json.dumps([code, tests, vars(limits), launcher_repr])
    done = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True, text=True,
                          timeout=limits.timeout_s + 30, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    if done.returncode != 0:
        return CodeResult(False, f"grader killed (exit status {done.returncode})")
    passed, detail = json.loads(done.stdout.strip().splitlines()[-1])
    return CodeResult(passed, detail)


def main() -> None:  # pragma: no cover - a report, not a test
    import tempfile
    from unittest import mock

    from presto_tui.eval import confine
    from presto_tui.eval.cgroup import TreeLimits
    from presto_tui.eval.sandbox import run_tests

    sandbox = confine.detect()
    plain = next(c for c in confine.candidates() if not c.sandboxed and not confine.probe(c))
    ways = [("bwrap", sandbox, True)] if sandbox.sandboxed else []
    ways += [("no bwrap", plain, True), ("no bwrap, no cgroup", plain, False)]
    print("| program | " + " | ".join(w for w, _, _ in ways) + " |")
    for attack in ATTACKS:
        cells = []
        for _, launcher, cgroups in ways:
            if attack.in_subprocess and not cgroups:  # a cgroup changes nothing for these: as the column before
                cells.append(cells[-1])
                continue
            with contextlib.ExitStack() as stack:
                a = stack.enter_context(arena(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "outside"))
                if not cgroups:
                    stack.enter_context(mock.patch.object(TreeLimits, "create", lambda *args: None))
                if attack.in_subprocess:
                    r = run_in_subprocess(attack.code(a), attack.tests, attack.limits, repr(launcher))
                else:
                    r = run_tests(attack.code(a), attack.tests, attack.limits, launcher)
                got = attack.judge(r, a)
            cells.append(f"{got or 'held'} ({'passed' if r.passed else r.detail[:60]})")
        print(f"| {attack.name} | " + " | ".join(cells) + " |")
    print("\n| case | wanted | verdict |")
    for case in CASES:
        with contextlib.ExitStack() as stack:
            if not case.cgroup:
                stack.enter_context(mock.patch.object(TreeLimits, "create", lambda *args: None))
            r = run_tests(case.code, case.tests, FAST, sandbox if case.sandbox else plain)
        verdict = "pass" if r.passed else f"fail ({r.detail[:60]})"
        print(f"| {case.name} | {'pass' if case.right else 'fail'} | {verdict} |")


if __name__ == "__main__":  # pragma: no cover
    main()
