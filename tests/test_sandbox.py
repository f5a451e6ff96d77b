"""The python grader against hostile programs, and unittest-style tests graded right.

Every attack in tests/sandbox_attacks.py runs in bubblewrap (where it works here) and without
it: forging a pass must fail both ways; escapes (the grader's environment, outliving it, files
outside its folder, the network) are held only by the sandbox, so without it they skip, saying
why; limits on the whole process tree need a cgroup (or the sandbox's own user).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import itertools
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from sandbox_attacks import ATTACKS, CASES, FAST, RIGHT_ADD, THREADS, Attack, Case, arena, run_in_subprocess

from presto_tui.eval import confine
from presto_tui.eval.cgroup import TreeLimits, descendants, processes_of
from presto_tui.eval.sandbox import CodeLimits, _kill_user, run_tests


@functools.cache
def _launcher(way: str) -> confine.Launcher | None:
    if way == "sandbox":
        found = confine.detect()
        return found if found.sandboxed else None
    return next(c for c in confine.candidates() if not c.sandboxed and not confine.probe(c))


@functools.cache
def _cgroups_here() -> bool:
    tree = TreeLimits.create(64 * 2**20, 16)
    if tree is not None:
        tree.close()
    return tree is not None


def _skip_unless_held(attack: Attack, way: str, launcher: confine.Launcher) -> None:
    if attack.needs == "sandbox" and not launcher.sandboxed:
        pytest.skip("only a sandbox holds this: a run without bubblewrap")
    if attack.needs == "own user" and not (launcher.sandboxed or launcher.own_user):
        pytest.skip("only a sandbox or a user of the program's own (presto-tui as root) holds this")
    if attack.needs == "cgroup" and not _cgroups_here():
        pytest.skip("memory for a whole process tree needs a cgroup presto-tui may make (as root, cgroup v1 or a "
                    "delegated v2)")
    if attack.needs == "tasks" and not (_cgroups_here() or launcher.counted_alone):
        pytest.skip("a limit on the tree's processes needs a cgroup or the sandbox's own user")


@pytest.fixture(params=["sandbox", "plain"])
def way(request) -> tuple[str, confine.Launcher]:
    launcher = _launcher(request.param)
    if launcher is None:
        pytest.skip(f"no sandbox here: {confine.detect().describe()}")
    return request.param, launcher


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_hostile_program_is_held(attack: Attack, way, tmp_path):
    name, launcher = way
    _skip_unless_held(attack, name, launcher)
    with arena(tmp_path / "outside") as a:
        if attack.in_subprocess:
            result = run_in_subprocess(attack.code(a), attack.tests, attack.limits, repr(launcher))
        else:
            result = run_tests(attack.code(a), attack.tests, attack.limits, launcher)
        got = attack.judge(result, a)
    assert got == "", f"{attack.name}: {got} ({result.detail})"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_names_arrays_and_threads_are_graded_as_pytest_would(case: Case, monkeypatch):
    if not case.cgroup:
        monkeypatch.setattr(TreeLimits, "create", lambda *args: None)
    result = run_tests(case.code, case.tests, FAST, None if case.sandbox else _launcher("plain"))
    assert result.passed == case.right, result.detail


def _hosts_holding(threads: int) -> list[int]:
    """This process's program hosts (started `... -c BOOTSTRAP program FD`) with at least `threads` threads."""
    found = []
    for entry in map(str, descendants(os.getpid())):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if b"\0program\0" not in Path(f"/proc/{entry}/cmdline").read_bytes():
                continue
            status = Path(f"/proc/{entry}/status").read_text()
            if int(status.split("Threads:")[1].split()[0]) >= threads:
                found.append(int(entry))
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of the program's own is root's to give")
def test_a_programs_tasks_are_its_own_while_another_holds_a_hundred_threads(monkeypatch):
    """RLIMIT_NPROC counts a uid's tasks machine-wide: graded as one user (`nobody` under root), a program
    holding 100 threads left the next too few of the 128 to start its own (CI failed so, two workers)."""
    monkeypatch.setattr(TreeLimits, "create", lambda *args: None)  # (only the per-process limits hold)
    hold = ("import threading, time\ndef hold(n, s):\n    ts = [threading.Thread(target=time.sleep, args=(s,))"
            " for _ in range(n)]\n    for t in ts:\n        t.start()\n    for t in ts:\n        t.join()\n"
            "    return n\n")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        holder = pool.submit(run_tests, hold, "assert hold(100, 4) == 100\n", CodeLimits(timeout_s=20))
        deadline = time.monotonic() + 15
        while not _hosts_holding(100) and time.monotonic() < deadline and not holder.done():
            time.sleep(0.05)
        assert _hosts_holding(100), f"the first program never held 100 threads ({holder.result().detail})"
        second = run_tests(THREADS, "assert squares(100) == 328350\n", FAST)
        assert not holder.done(), "the first program ended before the second ran: nothing was shared"
        first = holder.result()
    assert (second.passed, second.detail) == (True, "")
    assert (first.passed, first.detail) == (True, "")


def test_each_program_gets_a_uid_no_account_has_and_no_process_runs_as(monkeypatch):
    taken = confine._OWN_UID_BASE + ((confine._own_block + os.getpid()) % confine._OWN_BLOCKS) * 256
    accounts = {taken + 1}
    monkeypatch.setattr(confine, "_own_count", itertools.count())
    monkeypatch.setattr(confine.pwd, "getpwuid", lambda uid: "an account" if uid in accounts else {}[uid])
    monkeypatch.setattr(confine, "processes_of", lambda uid: [1] if uid == taken + 2 else [])
    got = [confine.own_uid() for _ in range(254)]
    assert got[:2] == [taken, taken + 3] and len(set(got)) == 254  # (the account's and the busy one skipped)
    assert all(confine._OWN_UID_BASE <= u < confine._OWN_UID_END for u in got)
    monkeypatch.setattr(confine.pwd, "getpwuid", lambda uid: "an account")
    assert confine.own_uid() is None  # (every one an account's: the program runs as nobody)


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of the program's own is root's to give")
def test_a_uid_this_namespace_does_not_map_falls_back_to_nobody_with_no_shared_count(monkeypatch):
    """Containers that map 65,536 uids refuse a uid of 0x70000000 (EINVAL): the probe says so in a line and
    the grader runs the program as nobody, whose count it does not limit (every task of nobody shares it)."""
    chown = os.chown

    def unmapped(path, uid, gid):
        if uid >= confine._OWN_UID_BASE:
            raise OSError(22, "Invalid argument")
        chown(path, uid, gid)

    monkeypatch.setattr(confine.os, "chown", unmapped)
    own = next(c for c in confine.candidates() if c.own_user)
    assert confine.probe(own).startswith("it does not start (OSError")
    found = confine.detect.__wrapped__()  # (nobody's, or this user's where nobody may not run this interpreter)
    assert found.user in (confine.NOBODY, None) and not found.own_user and not found.counted_alone


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of the program's own is root's to give")
def test_every_process_of_a_programs_uid_is_killed_a_zombie_leaders_threads_too():
    """What left the program's process group dies with its uid: a setsid'd shell's children, and a process
    whose main thread ended while another runs (a zombie leader, which /proc lists as Z)."""
    uid = confine.own_uid()
    shells = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], user=uid, group=uid, extra_groups=[],
                              start_new_session=True, cwd="/")
    ghost = None
    plain = confine.Launcher(None, uid, own_user=True)
    if not confine.probe(plain):  # (this interpreter may be run by that uid)
        ghost = subprocess.Popen([confine.interpreter(), "-c", "import ctypes, threading, time\n"
                                  "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                                  "ctypes.CDLL(None).pthread_exit(None)\n"],
                                 user=uid, group=uid, extra_groups=[], start_new_session=True, cwd="/")

    def state(pid: int) -> str:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]

    deadline = time.monotonic() + 10
    while (len(processes_of(uid)) < 3 + (ghost is not None) or (ghost is not None and state(ghost.pid) != "Z")) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    if ghost is not None:
        assert state(ghost.pid) == "Z" and ghost.pid in processes_of(uid)  # (its other thread sleeps on)
    _kill_user(uid)
    assert processes_of(uid) == []
    assert shells.wait(5) == -9 and (ghost is None or ghost.wait(5) is not None)


# -- what the tests see of the program: as in one process, except where that would leak --------

SEMANTICS = [
    # objects stay in the program's process, used through proxies; plain data comes back by value
    ("class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
     "        self.items.append(x)\n    def pop(self):\n        return self.items.pop()\n"
     "    def __len__(self):\n        return len(self.items)\n"
     "def gen(n):\n    yield from range(n)\n",
     "s = Stack()\ns.push(3)\ns.push(4)\nassert len(s) == 2 and s.pop() == 4 and s.items == [3]\n"
     "assert isinstance(s, Stack) and not isinstance(3, Stack)\n"
     "assert list(gen(3)) == [0, 1, 2] and sum(gen(4)) == 6 and 2 in gen(3)\n", ""),
    # exceptions: builtin ones as themselves, the program's own as classes the tests can catch
    ("class Bad(Exception):\n    pass\nclass Worse(Bad, KeyError):\n    pass\ndef f(x):\n"
     "    if x < 0:\n        raise ValueError('negative')\n    raise Worse('worse')\n",
     "import unittest\nclass T(unittest.TestCase):\n    def test(self):\n"
     "        with self.assertRaisesRegex(ValueError, 'negative'):\n            f(-1)\n"
     "        with self.assertRaises(Bad):\n            f(1)\n        with self.assertRaises(KeyError):\n"
     "            f(1)\n", ""),
    # what a call does to a list it is given is done to the tests' list
    ("def rev(xs):\n    xs.reverse()\ndef fill(d):\n    d['k'] = 1\n",
     "a = [1, 2, 3]\nrev(a)\nassert a == [3, 2, 1]\nd = {}\nfill(d)\nassert d == {'k': 1}\n", ""),
    # the program's standard imports are there for the tests; its plain data never hides a builtin; its
    # function named like a builtin is tried both ways, and a failure with it is not described (the tests
    # handed it their values)
    ("import math\ndef area(r):\n    return math.pi * r * r\nsum = 0\n",
     "assert math.isclose(area(1), math.pi)\nassert sum([1, 2]) == 3\n", ""),
    ("def abs(x):\n    return 0\n", "assert abs(-3) == 3\n",
     "the tests failed with the program's own `abs` in place of Python's builtin"),
    ("def sum(a, b):\n    return a + b\n", "assert sum(2, 3) == 5\n",
     "TypeError: 'int' object is not iterable (with Python's `sum`; the program's own is named like it)"),
    # values: big ints, nan, bytes, sets, tuples as keys, namedtuples, Counters, complex
    ("from collections import Counter, namedtuple\nP = namedtuple('P', 'x y')\n"
     "def f():\n    return [2**100, float('nan'), b'\\x00', {1, 2}, frozenset([3]), {(1, 2): None}, 1 + 2j,"
     " bytearray(b'a'), None, True, P(1, 2), Counter('aab')]\n",
     "r = f()\nassert r[0] == 2**100 and r[1] != r[1] and r[2] == b'\\x00' and r[3] == {1, 2}\n"
     "assert r[4] == frozenset([3]) and r[5] == {(1, 2): None} and r[6] == 1 + 2j and r[7] == bytearray(b'a')\n"
     "assert r[8] is None and r[9] is True and r[10] == (1, 2) and r[10].y == 2 and r[11] == {'a': 2, 'b': 1}\n",
     ""),
    # the program's objects compare among themselves by its own rules
    ("import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass Point:\n    x: int\n    y: int\n"
     "def f():\n    return Point(1, 2)\n",
     "assert f() == Point(1, 2) and f() != Point(2, 1) and repr(f()) == 'Point(x=1, y=2)' and len({f(), f()}) == 1\n",
     ""),
    # a function of the tests is not sent to the program
    ("def apply(fn, x):\n    return fn(x)\n", "assert apply(lambda v: v + 1, 1) == 2\n",
     "TypeError: the tests passed a function to the program; only plain data and the program's own objects can "
     "be passed"),
    # where the program fails, and how that reads
    ("x = 1\nundefined_name\n", "pass\n", "the program raised NameError: name 'undefined_name' is not defined"),
    ("import sys\nsys.exit(1)\n", "pass\n", "the program exited with status 1 before the tests ran"),
    ("import sys\ndef f():\n    sys.exit(0)\n", "f()\n", "SystemExit: 0"),
    ("def f(n):\n    return f(n - 1) if n else 0\n", "assert f(50) == 0\nf(10**6)\n", "RecursionError: maximum "
     "recursion depth exceeded"),
]


# Correct programs graded correct: values compare as Python compares them (by value, for the types a
# test can name), the program is imported as a module (not run as __main__), and its standard input is empty
CORRECT = [
    ("numpy's int64", "import numpy as np\ndef add(a, b):\n    return np.add(a, b)\n",
     "assert add(2, 3) == 5 and add(2, 3) + 1 == 6 and [add(1, 1)] == [2] and isinstance(add(1, 2), int)\n"),
    ("numpy's bool_ and float64", "import numpy as np\ndef pos(x):\n    return np.bool_(x > 0)\n"
     "def mean(xs):\n    return np.mean(xs)\ndef both():\n    return (np.int32(1), np.bool_(False))\n",
     "assert pos(1) == True and pos(-1) == False and pos(2) is True and mean([1, 2]) == 1.5\n"
     "assert both() == (1, False)\n"),
    ("a Fraction", "from fractions import Fraction\ndef half(x):\n    return Fraction(x, 2)\n",
     "from fractions import Fraction\nassert half(10) == 5 and half(1) == Fraction(1, 2) and half(1) < 1\n"),
    ("a Decimal", "from decimal import Decimal\ndef add(a, b):\n    return Decimal(a) + Decimal(b)\n",
     "from decimal import Decimal\nassert add(2, 3) == 5 and add('0.1', '0.2') == Decimal('0.3')\n"),
    ("a range", "def first(n):\n    return range(0, n)\n",
     "assert first(3) == range(0, 3) and list(first(3)) == [0, 1, 2] and first(0) == range(0)\n"),
    ("sys.exit(0) at the end", "import sys\ndef add(a, b):\n    return a + b\nsys.exit(0)\n",
     "assert add(2, 3) == 5\n"),
    ("a main block that reads stdin", "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n"
     "    a, b = map(int, input().split())\n    print(add(a, b))\n", "assert add(2, 3) == 5\n"),
    ("stdin is empty", "import sys\ndata = sys.stdin.read()\ndef add(a, b):\n    return a + b\n",
     "assert data == '' and add(2, 3) == 5\n"),
]


@pytest.mark.parametrize(("code", "tests"), [c[1:] for c in CORRECT], ids=[c[0] for c in CORRECT])
def test_correct_programs_are_graded_correct(code, tests):
    result = run_tests(code, tests, FAST)
    assert result.passed, result.detail


@pytest.mark.parametrize(("code", "tests", "detail"), SEMANTICS, ids=range(len(SEMANTICS)))
def test_what_the_tests_see_of_the_program(code, tests, detail):
    result = run_tests(code, tests, FAST)
    assert result.passed == (not detail), result.detail
    assert result.detail.startswith(detail) and (detail or not result.detail)


def test_a_failure_reason_is_one_short_line_never_the_programs_output():
    noisy = "import sys\nsys.stderr.write('noise\\n' * 100000)\nraise ValueError('first\\n' + 'x' * 10000)\n"
    result = run_tests(noisy, "pass", FAST)
    assert not result.passed and result.detail.startswith("the program raised ValueError: first")
    assert len(result.detail) <= 200 and "\n" not in result.detail and "noise" not in result.detail
    failing = run_tests(RIGHT_ADD, "import sys\nprint('noise' * 1000, file=sys.stderr)\nassert add(1, 1) == 3\n", FAST)
    assert failing.detail == "AssertionError"
    unit = run_tests(RIGHT_ADD.replace("+", "-"), "import unittest\nclass T(unittest.TestCase):\n"
                     "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n", FAST)
    assert unit.detail == "1 of 1 unittest tests failed; test_add: AssertionError: -1 != 5"


def test_without_a_sandbox_the_grader_says_so_once(capsys, monkeypatch):
    monkeypatch.setattr(confine.shutil, "which", lambda name: None)
    plain = confine.candidates()
    assert not any(c.sandboxed for c in plain) and "bubblewrap (bwrap) is not installed" in plain[-1].missing
    monkeypatch.setattr(confine, "_warned", set())
    confine.warn_once(plain[-1])
    confine.warn_once(plain[-1])
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "without a sandbox" in lines[0] and "apt-get install bubblewrap" in lines[0]
    sandboxed = confine.Launcher("/usr/bin/bwrap")
    monkeypatch.setattr(confine, "_warned", set())
    confine.warn_once(sandboxed)
    assert capsys.readouterr().err == ""


def test_timeout_ends_the_program_and_all_it_started(tmp_path):
    launcher = _launcher("sandbox") or _launcher("plain")
    with arena(tmp_path / "outside") as a:
        code = ("import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n"
                f"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', '{a.marker}'])\n"
                "time.sleep(30)\n")
        result = run_tests(code, "pass", CodeLimits(timeout_s=1.5), launcher)
        assert not result.passed and result.detail == "timed out after 1.5 s"
        if launcher is not None and (launcher.sandboxed or _cgroups_here()):
            assert a.survivors() == []


def test_an_array_crosses_by_value_only_as_numbers_booleans_or_strings():
    np = pytest.importorskip("numpy")
    from presto_tui.eval import _child

    def refuse(x):
        raise AssertionError(f"{x!r} was not sent by value")

    for array in (np.arange(6).reshape(2, 3), np.array([True, False]), np.array(["ab", "c"]), np.zeros((0, 2)),
                  np.array([1 + 2j]), np.array([b"x"]), np.float32(1.5) * np.ones(3), np.array(["", ""])):
        sent = json.loads(json.dumps(_child.encode_data(array, refuse)))
        got = _child.decode_data(sent, refuse)
        assert type(got) is np.ndarray and got.dtype == array.dtype and got.shape == array.shape
        assert (got == array).all() and got.flags.writeable
    ref = lambda x: {"$": "ref", "v": 7}
    assert _child.encode_data(np.array([1, "x"], dtype=object), ref) == {"$": "ref", "v": 7}
    for forged in (["|O8", [1], "00" * 8],  # pointers
                   ["<i8", [2], "00" * 8], ["<i8", [-1], ""], ["|V8", [1], "00" * 8], ["<i8", [1], "zz" * 8],
                   ["<i8", [1] * 100, "00" * 8], [" <i8", [1], "00" * 8], ["<i8", "1", "00" * 8]):
        with pytest.raises(_child.ProtocolError):
            _child.decode_data({"$": "ndarray", "v": forged}, ref)


def test_files_naming_folders_outside_the_sandbox_are_masked_in_it(tmp_path):
    site = tmp_path / "site-packages"
    (site / "pkg-1.dist-info").mkdir(parents=True)
    (site / "__pycache__").mkdir()
    outside = "/src"  # a folder the sandbox does not show
    files = {"__editable___pkg_finder.py": f"MAPPING = {{'pkg': '{outside}/pkg'}}",
             "__editable__.pkg-1.pth": "import x",
             "__pycache__/__editable___pkg_finder.cpython-311.pyc": f"MAPPING {outside}/pkg",
             "pkg-1.dist-info/direct_url.json": '{"url": "file:///src"}', "old.egg-link": "/src\n.",
             "outside.pth": "/src\n", "shown.pth": f"{tmp_path}\n", "imports.pth": "import os\n"}
    for name, text in files.items():
        (site / name).write_text(text)
    masked = {str(site / name) for name in files if name not in ("shown.pth", "imports.pth")}
    assert set(confine._masked([str(site)], [str(tmp_path)])) == masked


def test_the_address_space_is_left_unlimited_only_where_the_code_cannot_leave_its_cgroup(monkeypatch, tmp_path):
    """A cgroup holds resident memory; the address-space limit goes only where the code can neither leave
    the group (a sandbox of another user: no cgroup filesystem) nor swap past it."""
    sandbox = _launcher("sandbox")
    if not _cgroups_here() or sandbox is None or not sandbox.cgroup_hidden:
        pytest.skip("needs a cgroup presto-tui may make and a sandbox of another user")
    limits = CodeLimits(timeout_s=8, memory_mib=256)
    report = "import resource\nraise RuntimeError(resource.getrlimit(resource.RLIMIT_AS)[0])\n"
    assert run_tests(report, "pass", limits, sandbox).detail == "the program raised RuntimeError: -1"
    create = TreeLimits.create

    def swap_unbounded(*args):
        tree = create(*args)
        if tree is not None:
            tree.swap_bounded = False
        return tree

    with monkeypatch.context() as m:
        m.setattr(TreeLimits, "create", swap_unbounded)
        assert run_tests(report, "pass", limits, sandbox).detail == f"the program raised RuntimeError: {256 * 2**20}"
    # the grader's own user, no sandbox: it may write its pid into the parent group's cgroup.procs
    attack = next(a for a in ATTACKS if a.name.startswith("leaving its cgroup"))
    with arena(tmp_path / "outside") as a:
        result = run_tests(attack.code(a), attack.tests, attack.limits, confine.Launcher(None))
        assert attack.judge(result, a) == "" and not result.passed, result.detail


def test_a_memory_cgroup_bounds_swap_or_says_it_does_not(tmp_path, monkeypatch):
    from presto_tui.eval import cgroup

    folder = tmp_path / "v1"
    folder.mkdir()
    assert cgroup._limit_memory(folder, 2**20)  # the swap limit written
    assert (folder / "memory.memsw.limit_in_bytes").read_text() == str(2**20)
    refused = tmp_path / "refused"
    (refused / "memory.memsw.limit_in_bytes").mkdir(parents=True)  # (writing it fails, as without accounting)
    monkeypatch.setattr(cgroup, "_no_swap", lambda: False)
    assert not cgroup._limit_memory(refused, 2**20)
    monkeypatch.setattr(cgroup, "_no_swap", lambda: True)
    assert cgroup._limit_memory(refused, 2**20)
