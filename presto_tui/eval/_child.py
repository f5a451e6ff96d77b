"""The python grader's two child processes: the program host and the test runner.

presto-tui never imports this module: `sandbox.py` sends its source on a child's stdin, with
what that child needs, and the child runs it (see `BOOTSTRAP` there). It uses the standard
library only.

- `program_main`: imports the model's program as a module (`program`, not `__main__`: a
  `if __name__ == "__main__":` block does not run, and a `sys.exit(0)` at its end only ends
  it), standard input empty, then answers the runner's requests on one socket: call this
  object, get that attribute, iterate, compare two of its objects. Everything in this
  process is the program's to change, this code included.
- `runner_main`: runs the item's tests as `__main__` with the program's names bound to
  proxies (`Remote`); every use of a proxy is a request to the program host. Its verdict
  goes to the grader on a socket that the program never holds.

On the socket: 4-byte big-endian lengths, then JSON. Plain data (None, bool, int, float,
complex, str, bytes, bytearray, and lists, tuples, dicts, sets and frozensets of these) is
sent by value, subclasses as their base type; so are the values a test can name and compare
with `==` as Python compares them: a Fraction, a Decimal, a range, a numpy scalar (as the
Python value its `item()` gives: `np.int64(5) == 5`, `np.bool_(True) == True`), and a numpy
array of numbers, booleans or fixed-width strings (its dtype, shape and bytes, checked before
numpy reads them: never an array of objects, whose bytes are pointers). Any other
object stays with the program and is sent as a reference {"$": "ref", "v": n}. The runner
decodes what the program sends into plain data and proxies only, so no answer can run code
in the runner.

What the runner never sends to the program: its own values to compare with (==, <, `in`,
arithmetic between a proxy and a runner value are not delegated). A call's arguments are
sent, as the call needs them, so where the program's own function stands in for a builtin the
tests use (`abs(f(x) - expected)`), what it is given is sent too: the grader does not describe
a failure of that run (`sandbox.run_tests`).
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import functools
import json
import os
import re
import socket
import sys
import types
from typing import Any

MAX_MESSAGE = 64 * 2**20  # one answer; larger ones are refused (the runner's memory is limited too)
MAX_GLOBAL = 2**20  # a global of the program larger than this encoded is sent as a reference
MAX_TEXT = 500  # an exception's message, a repr
PROGRAM = "program"  # the module the program is imported as
# A thread's stack where memory is limited by address space (the program's without a cgroup, the tests'
# runner always): each thread reserves its whole stack, 8 MiB by default on Linux, so 100 threads would
# need 800 MiB of a 1024 MiB limit; 4 MiB keeps 3,000 levels of C recursion (lru_cache) in a thread, and
# code that wants more says so (threading.stack_size)
THREAD_STACK = 4 * 2**20


class ProtocolError(BaseException):
    """The other side sent something that is not a message of this protocol (or nothing: EOF).

    Not an Exception: a test's `except Exception` does not hide that the program stopped answering."""


def send(sock: socket.socket, message: Any) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"a message of {len(data)} bytes is over the limit of {MAX_MESSAGE}")
    sock.sendall(len(data).to_bytes(4, "big") + data)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 2**20))
        if not chunk:
            raise ProtocolError("end of stream")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> Any:
    n = int.from_bytes(_read_exact(sock, 4), "big")
    if n > MAX_MESSAGE:
        raise ProtocolError(f"a message of {n} bytes is over the limit of {MAX_MESSAGE}")
    try:
        return json.loads(_read_exact(sock, n))
    except (ValueError, RecursionError) as e:
        raise ProtocolError(f"not JSON ({type(e).__name__})") from None


def one_line(text: str, limit: int = MAX_TEXT) -> str:
    """Text as one printable line of at most `limit` characters."""
    flat = "".join(c if c.isprintable() else " " for c in text)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def exception_line(e: BaseException) -> str:
    message = one_line(str(e))
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


_SCALARS = (type(None), bool, str, float)
_DATA_BASES = (bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)


def encode_data(x: Any, ref: Any) -> Any:
    """`x` as JSON: plain data by value (subclasses as their base type), anything else as ref(x)."""
    t = type(x)
    if t in _SCALARS:
        return x
    if t is int:
        return x if -(2**63) < x < 2**63 else {"$": "int", "v": hex(x)}  # no digit limit on hex
    if t is list:
        return [encode_data(v, ref) for v in x]
    if t is tuple:
        return {"$": "tuple", "v": [encode_data(v, ref) for v in x]}
    if t is dict:
        return {"$": "dict", "v": [[encode_data(k, ref), encode_data(v, ref)] for k, v in x.items()]}
    if t is set or t is frozenset:
        return {"$": t.__name__, "v": [encode_data(v, ref) for v in x]}
    if t is bytes or t is bytearray:
        return {"$": t.__name__, "v": x.hex()}
    if t is complex:
        return {"$": "complex", "v": [x.real, x.imag]}
    if isinstance(x, tuple) and isinstance(getattr(t, "_fields", None), tuple):  # a namedtuple: one here too
        return {"$": "namedtuple", "v": [str(t.__name__), [str(f) for f in t._fields],
                                         [encode_data(v, ref) for v in tuple.__iter__(x)]]}
    for base in _DATA_BASES:  # an OrderedDict, a Counter, an int subclass: its base type's value
        if isinstance(x, base):
            return encode_data(_as_base(x, base), ref)
    return _named_value(x, ref)


def _named_value(x: Any, ref: Any) -> Any:
    """A value of a type a test can name and compare by value (a Fraction, a Decimal, a range, a numpy
    scalar), as data; anything else as ref(x). Only modules already imported are looked at: what the
    program never imported it cannot have returned."""
    if isinstance(x, range):
        return {"$": "range", "v": [encode_data(int(v), ref) for v in (x.start, x.stop, x.step)]}
    fractions, decimal, numpy = (sys.modules.get(m) for m in ("fractions", "decimal", "numpy"))
    if fractions is not None and isinstance(x, fractions.Fraction):
        return {"$": "fraction", "v": [hex(int(x.numerator)), hex(int(x.denominator))]}
    if decimal is not None and isinstance(x, decimal.Decimal):
        return {"$": "decimal", "v": str(decimal.Decimal.__str__(x))}
    ndarray = getattr(numpy, "ndarray", None)
    if isinstance(ndarray, type) and isinstance(x, ndarray):
        return _ndarray_value(numpy, x, ref)
    generic = getattr(numpy, "generic", None)
    if isinstance(generic, type) and isinstance(x, generic):
        value = x.item()  # type: ignore[attr-defined]  # a numpy scalar as the Python value it stands for: np.int64 as int, np.bool_ as bool
        if type(value) in (bool, int, float, complex, str, bytes):
            return encode_data(value, ref)
    return ref(x)


# The arrays sent by value: numbers, booleans, fixed-width strings and bytes (their dtype's `str`, e.g.
# '<i8', '|b1', '<f8', '<c16', '<U5', '|S3'). Never object arrays (their bytes are pointers), structured
# or datetime ones: those stay with the program, as references. The widths are a superset of what numpy
# accepts per kind (`b2`, `c1`, `f10` on x86-64): numpy's own TypeError refuses the rest, at decoding.
_DTYPE = re.compile(r"[<>|=](?:[biufc](?:1|2|4|8|10|12|16|32)|[US][0-9]{1,9})")
MAX_DIMS = 64


def _ndarray_value(numpy: Any, x: Any, ref: Any) -> Any:
    """A numpy array by value, as its base class (a subclass's `__eq__` is not kept), or ref(x)."""
    arr = numpy.ascontiguousarray(numpy.asarray(x))
    if not _DTYPE.fullmatch(arr.dtype.str) or arr.ndim > MAX_DIMS:
        return ref(x)
    return {"$": "ndarray", "v": [arr.dtype.str, [int(d) for d in arr.shape], numpy.ndarray.tobytes(arr).hex()]}


def _ndarray(v: Any) -> Any:
    """The array `_ndarray_value` sent, checked before numpy reads a byte of it (dtype, shape, size)."""
    if type(v) is not list or len(v) != 3:
        raise ProtocolError("not a value: ndarray")
    descr, shape, data = v
    if (type(descr) is not str or not _DTYPE.fullmatch(descr) or type(shape) is not list or len(shape) > MAX_DIMS
            or not all(type(d) is int and d >= 0 for d in shape) or type(data) is not str):
        raise ProtocolError("not a value: ndarray")
    import math

    import numpy

    dtype = numpy.dtype(descr)
    raw = bytes.fromhex(data)
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise ProtocolError("not a value: ndarray (its size)")
    if dtype.itemsize == 0:  # ('<U0': nothing to read)
        return numpy.zeros(shape, dtype)
    return numpy.frombuffer(raw, dtype).reshape(shape).copy()  # (a copy: writable, as the program's was)


def _as_base(x: Any, base: type) -> Any:
    if base is int:
        return int.__index__(x)
    if base is float:
        return float.__float__(x)
    if base is str:
        return str.__str__(x)
    if base is complex:
        return complex(float(x.real), float(x.imag))
    return base(x)


def decode_data(x: Any, ref: Any) -> Any:
    """The inverse of `encode_data`; references go to `ref(n)`. Anything else is a ProtocolError."""
    if x is None or type(x) in (bool, int, float, str):
        return x
    if type(x) is list:
        return [decode_data(v, ref) for v in x]
    if type(x) is not dict or set(x) != {"$", "v"}:
        raise ProtocolError(f"not a value: {type(x).__name__}")
    tag, v = x["$"], x["v"]
    try:
        if tag == "ref" and type(v) is int:
            return ref(v)
        if tag == "int" and type(v) is str:
            return int(v, 16)
        if tag in ("bytes", "bytearray") and type(v) is str:
            return (bytes if tag == "bytes" else bytearray).fromhex(v)
        if tag == "decimal" and type(v) is str:
            import decimal

            return decimal.Decimal(v)
        if tag == "fraction" and type(v) is list and len(v) == 2 and all(type(p) is str for p in v):
            import fractions

            return fractions.Fraction(int(v[0], 16), int(v[1], 16))
        if tag == "ndarray":
            return _ndarray(v)
        if tag == "range" and type(v) is list and len(v) == 3:
            start, stop, step = (decode_data(i, ref) for i in v)
            if not all(type(i) is int for i in (start, stop, step)):
                raise ProtocolError("not a value: range")
            return range(start, stop, step)
        if type(v) is not list:
            raise ProtocolError(f"not a value: {tag}")
        if tag == "complex" and len(v) == 2 and all(type(p) in (int, float) for p in v):
            return complex(v[0], v[1])
        if tag == "namedtuple" and len(v) == 3 and type(v[1]) is list and type(v[2]) is list:
            return _namedtuple(str(v[0]), tuple(str(f) for f in v[1]))(*[decode_data(i, ref) for i in v[2]])
        items = [decode_data(i, ref) for i in v]
        if tag == "tuple":
            return tuple(items)
        if tag == "set":
            return set(items)
        if tag == "frozenset":
            return frozenset(items)
        if tag == "dict" and all(type(p) is list and len(p) == 2 for p in items):
            return {k: val for k, val in items}
    except (TypeError, ValueError, ArithmeticError, RecursionError, ImportError) as e:  # unhashable keys, bad
        # hex, nesting, a zero denominator, a Decimal that does not parse (decimal.InvalidOperation), no numpy here
        raise ProtocolError(f"not a value: {tag} ({type(e).__name__})") from None
    raise ProtocolError(f"not a value: {tag!r}")


@functools.cache
def _namedtuple(name: str, fields: tuple[str, ...]) -> type:
    """A namedtuple class like the program's (`namedtuple` checks the names: identifiers only)."""
    return collections.namedtuple(name, fields, rename=True)


def set_limits(address_space: int = 0, cpu: int = 0, fsize: int = 0, nproc: int = 0) -> None:
    """Lower this process's limits (0: leave it). Nothing can raise them again: they hold for the code after."""
    try:
        import resource
    except ImportError:  # no rlimits on this system: the wall-clock limit still holds
        return
    wanted = [(resource.RLIMIT_AS, address_space), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_FSIZE, fsize),
              (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_CORE, -1)]
    for what, value in wanted:
        if value:
            limit = 0 if value < 0 else value
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(what, (limit, limit))


def _quiet_fds() -> None:
    """Standard input, output and error to /dev/null: what the code prints goes nowhere."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


# -- the program host ---------------------------------------------------------------------------


class _Objects:
    """The program's objects the runner holds a reference to, by number (kept alive until the end)."""

    def __init__(self) -> None:
        import threading

        self.by_number: list[Any] = []
        self.numbers: dict[int, int] = {}
        self.numbering = threading.Lock()  # (requests may be answered in several threads: _answer)

    def ref(self, x: Any) -> Any:
        with self.numbering:
            n = self.numbers.get(id(x))
            if n is None:
                n = self.numbers[id(x)] = len(self.by_number)
                self.by_number.append(x)
        return {"$": "ref", "v": n}

    def get(self, n: int) -> Any:
        if not 0 <= n < len(self.by_number):
            raise ProtocolError(f"no object {n}")
        return self.by_number[n]

    def encode(self, x: Any) -> Any:
        if isinstance(x, type) and issubclass(x, BaseException):
            return self.exception_class(x)
        try:
            return encode_data(x, self.encode_object)
        except RecursionError:  # a list that holds itself, or nesting too deep to send by value
            return self.ref(x)

    def encode_object(self, x: Any) -> Any:
        if isinstance(x, type) and issubclass(x, BaseException):
            return self.exception_class(x)
        return self.ref(x)

    def exception_class(self, cls: type) -> Any:
        if cls.__module__ == "builtins":
            return {"$": "builtin_exception", "v": cls.__name__}
        bases = [self.exception_class(b) for b in cls.__bases__ if issubclass(b, BaseException)]
        return {"$": "exception", "v": [one_line(cls.__name__, 100), bases, self.ref(cls)["v"]]}

    def error(self, e: BaseException) -> Any:
        return {"error": self.exception_class(type(e)), "message": one_line(str(e))}


_MUTABLE = (list, dict, set, bytearray)


def _is_array(x: Any) -> bool:
    """An ndarray itself, not a subclass (`_named_value` sends subclasses too, as plain arrays): what a call
    did to it can be done to the tests' array, which decoding always makes a base ndarray."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and type(x) is getattr(numpy, "ndarray", None)


def _copied_back(x: Any) -> bool:
    """An argument whose contents a call may change and the tests see changed (as in one process)."""
    return type(x) in _MUTABLE or _is_array(x)


def _serve(sock: socket.socket, objects: _Objects, request: Any) -> Any:
    op = request["op"]
    decode = lambda x: decode_data(x, objects.get)
    target = objects.get(request["ref"])
    if op == "call":
        args = [decode(a) for a in request["args"]]
        kwargs = {str(k): decode(v) for k, v in request["kwargs"]}
        result = target(*args, **kwargs)
        back = [[i, objects.encode(a)] for i, a in enumerate(args) if _copied_back(a)]
        back += [[k, objects.encode(v)] for k, v in kwargs.items() if _copied_back(v)]
        return {"ok": objects.encode(result), "back": back}
    if op == "getattr":
        return {"ok": objects.encode(getattr(target, str(request["name"])))}
    if op == "setattr":
        setattr(target, str(request["name"]), decode(request["value"]))
        return {"ok": None}
    if op == "delattr":
        delattr(target, str(request["name"]))
        return {"ok": None}
    if op == "getitem":
        return {"ok": objects.encode(target[decode(request["key"])])}
    if op == "setitem":
        target[decode(request["key"])] = decode(request["value"])
        return {"ok": None}
    if op == "delitem":
        del target[decode(request["key"])]
        return {"ok": None}
    if op == "next":
        try:
            return {"ok": objects.encode(next(target))}
        except StopIteration:
            return {"stop": True}
    if op == "apply":  # a builtin or an operator on the program's own objects (no runner values)
        import operator

        fn: Any = {"len": len, "bool": bool, "hash": hash, "repr": repr, "str": str, "iter": iter, "int": int,
              "float": float, "complex": complex, "index": operator.index, "isinstance": isinstance,
              "issubclass": issubclass, "dir": dir}.get(request["fn"]) or getattr(operator, request["fn"])
        others = [objects.get(n) for n in request["others"]]
        return {"ok": objects.encode(fn(target, *others))}
    raise ProtocolError(f"no operation {op!r}")


def program_main(sock_fd: int, config: dict[str, Any]) -> None:
    """Run the program, then answer requests until the runner hangs up."""
    if config.get("user") is not None:  # started as root in the sandbox, allowed only this: become its own user
        os.setgroups([])
        os.setgid(config["user"])
        os.setuid(config["user"])
    sock = socket.socket(fileno=sock_fd)
    set_limits(cpu=config["cpu"], fsize=config["fsize"], nproc=config["nproc"])
    os.write(1, b"ready\n")  # the grader places this process (the sandbox's tree) under its limits, then says go
    go = json.loads(sys.stdin.buffer.readline())
    if go["address_space"]:  # 0: a cgroup the code cannot leave holds the tree's memory
        set_limits(address_space=go["address_space"])
        import threading

        threading.stack_size(THREAD_STACK)
    _quiet_fds()
    objects = _Objects()
    first = receive(sock)
    if type(first) is not dict or first.get("op") != "run":
        raise ProtocolError("the first request is not 'run'")
    answered = {"id": first.get("id")}  # each reply names the request it answers (Connection.ask)
    source = config["program"]
    # imported as a module, as a test file's `from solution import f` would: its main block does not run
    module = types.ModuleType(PROGRAM)
    module.__file__ = os.path.abspath(PROGRAM + ".py")
    sys.modules[PROGRAM] = module
    sys.argv = [module.__file__]
    try:
        with open(module.__file__, "w", encoding="utf-8") as f:  # for code that reads its own file
            f.write(source)
    except OSError:
        pass
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except SystemExit as e:  # exit status 0 (or none) ends the module where it stands: its names so far count
        if e.code not in (None, 0):
            send(sock, {"exited": one_line(str(e.code), 40), **answered})
            return
    except BaseException as e:
        send(sock, {**objects.error(e), **answered})
        return
    names = {}
    for name, value in list(module.__dict__.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        if isinstance(value, types.ModuleType):
            names[name] = {"$": "module", "v": value.__name__}
            continue
        try:
            encoded = objects.encode(value)
            if len(json.dumps(encoded)) > MAX_GLOBAL:
                encoded = objects.ref(value)
        except Exception:
            encoded = objects.ref(value)
        names[name] = encoded
    # the names the program defined itself (a def, a class, an object of its classes, a lambda): only
    # these may stand in for a builtin (`from numpy import *` binds numpy's `all`, which is no test of it)
    own = [name for name, value in module.__dict__.items() if getattr(value, "__module__", None) == PROGRAM]
    send(sock, {"ok": names, "own": own, **answered})
    _answer(sock, objects)


HELPERS = 16  # threads that answer requests while this process's main thread is busy with another


def _answer(sock: socket.socket, objects: _Objects) -> None:
    """Answer the runner's requests until it hangs up: in this (the main) thread, as one process would run
    a test's calls; a request that comes while another is being answered (a test's threads calling the
    program at once) in a helper thread, up to HELPERS of them (then it waits its turn).  So a call that
    blocks until another thread's call releases it (a queue's get and put) is answered as in one process,
    not after it (which never came: the tests waited for it).  Replies go out whole, one at a time."""
    import queue
    import threading

    inbox: queue.Queue = queue.Queue()
    sending, counts = threading.Lock(), threading.Lock()
    free, pending, helpers = 1, 0, 0  # servers waiting for a request (the main thread first), requests waiting

    def reply_to(request: Any) -> None:
        answered = {"id": request.get("id")} if type(request) is dict else {}
        try:
            reply = _serve(sock, objects, request)
        except ProtocolError:  # not a request of this protocol: the runner is told by the end of the stream
            sock.shutdown(socket.SHUT_RDWR)
            raise
        except BaseException as e:
            reply = objects.error(e)
        with sending:
            try:
                send(sock, {**reply, **answered})
            except ProtocolError as e:  # an answer too large to send
                send(sock, {**objects.error(e), **answered})

    def serve() -> None:
        nonlocal free, pending
        while (request := inbox.get()) is not None:
            reply_to(request)
            with counts:
                if pending:
                    pending -= 1  # (it takes the next one waiting)
                else:
                    free += 1
        inbox.put(None)  # (and every other server ends)

    def read() -> None:
        nonlocal free, pending, helpers
        while True:
            try:
                request = receive(sock)
            except ProtocolError:
                inbox.put(None)  # the runner is done (or gone)
                return
            with counts:
                if free:
                    free -= 1
                elif helpers < HELPERS:
                    helpers += 1
                    threading.Thread(target=serve, daemon=True).start()
                else:
                    pending += 1
            inbox.put(request)

    threading.Thread(target=read, daemon=True).start()
    serve()


# -- the test runner ----------------------------------------------------------------------------


class ProgramError(Exception):
    """An exception the program raised whose class the runner does not share (its own, or SystemExit)."""


# Builtin exceptions the program may raise into the tests as themselves. Not the ones that steer
# control flow: a StopIteration from a call would end the loop a test runs (`all(map(...))`), a
# SystemExit would end the tests as if they had passed.
_NOT_SHARED = {"StopIteration", "StopAsyncIteration", "SystemExit", "KeyboardInterrupt", "GeneratorExit",
               "BaseException", "BaseExceptionGroup"}
# Standard modules with effects on import: a program's global naming one is not imported for the tests.
_NOT_IMPORTED = {"antigravity", "this", "__hello__", "__phello__", "idlelib", "turtledemo", "tkinter", "turtle"}
# Attributes a proxy does not ask the program for: numpy in the runner reads memory at the address that
# `__array_interface__` / `__array_struct__` give (an address the program would choose). An array the
# program returns crosses by value; `__array__` is asked, and its answer crosses by value too.
_NOT_FORWARDED = frozenset({"__array_interface__", "__array_struct__"})


def _is_standard(module: str) -> bool:
    """A standard module the runner may import for the tests (not one with effects on import)."""
    return module.partition(".")[0] in sys.stdlib_module_names and module not in _NOT_IMPORTED


class Connection:
    """The runner's side of the socket: one request, one reply."""

    def __init__(self, sock: socket.socket) -> None:
        import threading

        self.sock = sock
        self.remotes: dict[int, Remote] = {}
        self.exceptions: dict[int, type] = {}
        # A test may stop waiting for a reply (an exception from a signal handler: `signal.alarm` as a
        # timeout); the reply still comes, later.  Each request has an id its reply repeats, and a reply
        # to a request given up on is skipped, not taken for the next one's; the bytes read of a reply
        # are kept where an interrupted read left them.
        self.asked = 0
        self.unread = bytearray()
        # Threads wait for their replies at once (a call may block until another thread's call releases
        # it: a queue's get and put); one of them reads at a time and hands each reply to its asker.
        self.sending = threading.Lock()
        self.state = threading.Condition()
        self.waiting: set[int] = set()
        self.replies: dict[int, Any] = {}
        self.reading = False
        self.broken: ProtocolError | None = None

    def remote(self, n: int) -> Remote:
        r = self.remotes.get(n)
        if r is None:
            r = self.remotes[n] = Remote(n)
        return r

    def decode(self, x: Any) -> Any:
        if type(x) is dict and x.get("$") in ("exception", "builtin_exception"):
            return self.exception_class(x)
        return decode_data(x, self.remote)

    def exception_class(self, x: Any) -> type:
        """A local class for the program's exception class: builtins map to themselves where safe."""
        if type(x) is not dict or set(x) != {"$", "v"}:
            raise ProtocolError("not an exception class")
        if x["$"] == "builtin_exception":
            name = str(x["v"])
            cls = getattr(builtins, name, None)
            if isinstance(cls, type) and issubclass(cls, Exception) and name not in _NOT_SHARED:
                return cls
            return type(one_line(name, 100), (ProgramError,), {"__module__": "program"})
        name, bases, n = x["v"]
        if type(n) is not int or type(bases) is not list:
            raise ProtocolError("not an exception class")
        if n not in self.exceptions:
            locals_ = [self.exception_class(b) for b in bases]
            unique = tuple(dict.fromkeys(locals_)) or (ProgramError,)
            attrs = {"__module__": "program", "_remote": n}
            try:
                cls = type(one_line(str(name), 100), unique, attrs)
            except TypeError:  # bases that cannot be combined here
                cls = type(one_line(str(name), 100), (ProgramError,), attrs)
            self.exceptions[n] = cls
        return self.exceptions[n]

    def reply_to(self, asked: int) -> dict[str, Any]:
        """The reply to request `asked`: read by this thread, or by another that reads and hands it over."""
        with self.state:
            while asked not in self.replies:
                if self.broken is not None:
                    raise self.broken
                if self.reading:
                    self.state.wait()
                    continue
                self.reading = True
                try:
                    self.state.release()
                    try:
                        reply = self.receive()
                    except ProtocolError as e:
                        raise ProgramGone(str(e)) from None
                    finally:
                        self.state.acquire()
                    if type(reply) is not dict:
                        raise ProtocolError("a reply is not an object")
                    answers = reply.get("id")
                    if answers in self.waiting:
                        self.replies[answers] = reply
                    elif type(answers) is not int or not 0 < answers <= self.asked:
                        raise ProtocolError("a reply to no request asked")
                except ProtocolError as e:  # every thread waiting is told
                    self.broken = e
                    raise
                finally:
                    self.reading = False
                    self.state.notify_all()
            return self.replies.pop(asked)

    def receive(self) -> Any:
        """The next message, from what is left unread first (`receive`, kept across interrupted reads)."""
        buf = self.unread
        while True:
            if len(buf) >= 4:
                n = int.from_bytes(buf[:4], "big")
                if n > MAX_MESSAGE:
                    raise ProtocolError(f"a message of {n} bytes is over the limit of {MAX_MESSAGE}")
                if len(buf) >= 4 + n:
                    data = bytes(buf[4: 4 + n])
                    del buf[: 4 + n]
                    try:
                        return json.loads(data)
                    except (ValueError, RecursionError) as e:
                        raise ProtocolError(f"not JSON ({type(e).__name__})") from None
            chunk = self.sock.recv(2**20)
            if not chunk:
                raise ProtocolError("end of stream")
            buf += chunk

    def ask(self, request: dict[str, Any]) -> Any:
        with self.state:
            self.asked += 1
            asked = self.asked
            self.waiting.add(asked)
        try:
            with self.sending:
                send(self.sock, {**request, "id": asked})
            reply = self.reply_to(asked)
        finally:  # (a reply that comes after its asker gave up is skipped)
            with self.state:
                self.waiting.discard(asked)
                self.replies.pop(asked, None)
        if "error" in reply:
            cls = self.exception_class(reply["error"])
            message = one_line(str(reply.get("message", "")))
            try:
                exc = cls(message)
            except Exception:
                exc = type(cls.__name__, (ProgramError,), {"__module__": "program"})(message)
            raise exc
        if "exited" in reply:
            raise ProgramGone(f"the program exited with status {one_line(str(reply['exited']), 40)} before the "
                              "tests ran")
        if reply.get("stop") is True and request["op"] == "next":  # (elsewhere it would end a test's loop)
            raise StopIteration
        if "ok" not in reply:
            raise ProtocolError("a reply without a value")
        return reply


class ProgramGone(ProtocolError):
    """The program's process ended (or exited) while the tests ran."""


_connection: Connection | None = None


def _ask(request: dict[str, Any]) -> Any:
    assert _connection is not None
    return _connection.decode(_connection.ask(request)["ok"])


def _send_value(x: Any) -> Any:
    """A runner value as an argument: plain data, or a proxy's reference. Nothing else is sent."""

    def ref(obj: Any) -> Any:
        if isinstance(obj, Remote):
            return {"$": "ref", "v": object.__getattribute__(obj, "_n")}
        n = getattr(obj, "_remote", None) if isinstance(obj, type) else None
        if type(n) is int:
            return {"$": "ref", "v": n}
        raise TypeError(f"the tests passed a {type(obj).__name__} to the program; only plain data and the "
                        "program's own objects can be passed")

    return encode_data(x, ref)


def _call(target: Remote, args: tuple, kwargs: dict[str, Any]) -> Any:
    assert _connection is not None
    request = {"op": "call", "ref": object.__getattribute__(target, "_n"),
               "args": [_send_value(a) for a in args], "kwargs": [[k, _send_value(v)] for k, v in kwargs.items()]}
    reply = _connection.ask(request)
    # what the call did to a list, dict, set or bytearray it was given, done to the runner's own
    for where, value in reply.get("back", []):
        original: Any = args[where] if type(where) is int and 0 <= where < len(args) else kwargs.get(str(where))
        new: Any = _connection.decode(value)
        if type(original) is not type(new):
            continue
        if isinstance(original, list | bytearray):
            original[:] = new
        elif isinstance(original, dict | set):
            original.clear()
            original.update(new)
        elif _is_array(original) and original.shape == new.shape and original.flags.writeable:
            original[...] = new
    return _connection.decode(reply["ok"])


def _apply(fn: str, target: Remote, *others: Remote) -> Any:
    return _ask({"op": "apply", "fn": fn, "ref": object.__getattribute__(target, "_n"),
                 "others": [object.__getattribute__(o, "_n") for o in others]})


def _typed(value: Any, kind: type, what: str) -> Any:
    if type(value) is not kind:
        raise TypeError(f"the program's {what} returned {type(value).__name__}, not {kind.__name__}")
    return value


def _binary(name: str) -> Any:
    def op(self: Remote, other: Any) -> Any:
        if not isinstance(other, Remote):  # a runner value is never sent to be compared or combined
            return NotImplemented
        return _apply(name, self, other)

    op.__name__ = f"__{name}__"
    return op


class Remote:
    """An object of the program's, used from the tests: each use is a request to the program host."""

    __slots__ = ("_n",)

    def __init__(self, n: int) -> None:
        object.__setattr__(self, "_n", n)

    def _ref(self) -> int:
        return object.__getattribute__(self, "_n")

    def __getattr__(self, name: str) -> Any:
        if name in _NOT_FORWARDED:
            raise AttributeError(name)
        return _ask({"op": "getattr", "ref": self._ref(), "name": name})

    def __setattr__(self, name: str, value: Any) -> None:
        _ask({"op": "setattr", "ref": self._ref(), "name": name, "value": _send_value(value)})

    def __delattr__(self, name: str) -> None:
        _ask({"op": "delattr", "ref": self._ref(), "name": name})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self, args, kwargs)

    def __getitem__(self, key: Any) -> Any:
        return _ask({"op": "getitem", "ref": self._ref(), "key": _send_value(key)})

    def __setitem__(self, key: Any, value: Any) -> None:
        _ask({"op": "setitem", "ref": self._ref(), "key": _send_value(key), "value": _send_value(value)})

    def __delitem__(self, key: Any) -> None:
        _ask({"op": "delitem", "ref": self._ref(), "key": _send_value(key)})

    def __iter__(self) -> Any:
        return _apply("iter", self)

    def __next__(self) -> Any:
        return _ask({"op": "next", "ref": self._ref()})

    def __len__(self) -> int:
        return _typed(_apply("len", self), int, "__len__")

    def __bool__(self) -> bool:
        return _typed(_apply("bool", self), bool, "__bool__")

    def __hash__(self) -> int:
        return _typed(_apply("hash", self), int, "__hash__")

    def __repr__(self) -> str:
        return _typed(_apply("repr", self), str, "__repr__")

    def __str__(self) -> str:
        return _typed(_apply("str", self), str, "__str__")

    def __int__(self) -> int:
        return _typed(_apply("int", self), int, "__int__")

    def __index__(self) -> int:
        return _typed(_apply("index", self), int, "__index__")

    def __float__(self) -> float:
        return _typed(_apply("float", self), float, "__float__")

    def __complex__(self) -> complex:
        return _typed(_apply("complex", self), complex, "__complex__")

    def __neg__(self) -> Any:
        return _apply("neg", self)

    def __pos__(self) -> Any:
        return _apply("pos", self)

    def __abs__(self) -> Any:
        return _apply("abs", self)

    def __invert__(self) -> Any:
        return _apply("invert", self)

    def __instancecheck__(self, obj: Any) -> bool:  # isinstance(x, ProgramClass)
        return isinstance(obj, Remote) and _typed(_apply("isinstance", obj, self), bool, "isinstance")

    def __subclasscheck__(self, cls: Any) -> bool:  # issubclass, and except/assertRaises on the program's classes
        n = getattr(cls, "_remote", None) if isinstance(cls, type) else None
        if type(n) is int and _connection is not None:
            return _typed(_apply("issubclass", _connection.remote(n), self), bool, "issubclass")
        return isinstance(cls, Remote) and _typed(_apply("issubclass", cls, self), bool, "issubclass")

    def __dir__(self) -> list[str]:
        names = _apply("dir", self)
        return [n for n in names if type(n) is str] if type(names) is list else []

    __eq__ = _binary("eq")
    __ne__ = _binary("ne")
    __lt__ = _binary("lt")
    __le__ = _binary("le")
    __gt__ = _binary("gt")
    __ge__ = _binary("ge")
    __add__ = _binary("add")
    __sub__ = _binary("sub")
    __mul__ = _binary("mul")
    __matmul__ = _binary("matmul")
    __truediv__ = _binary("truediv")
    __floordiv__ = _binary("floordiv")
    __mod__ = _binary("mod")
    __pow__ = _binary("pow")
    __and__ = _binary("and_")
    __or__ = _binary("or_")
    __xor__ = _binary("xor")
    __lshift__ = _binary("lshift")
    __rshift__ = _binary("rshift")


class _LazyModule(types.ModuleType):
    """A standard module the program imported, imported here when the tests first use it."""

    def __getattr__(self, name: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self.__name__), name)


def _standard_module(name: str) -> types.ModuleType | None:
    """The standard module `name` imported here, or None (not one, one with effects on import, or missing)."""
    if not _is_standard(name):
        return None
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class NameClash(BaseException):
    """A test used `module.attr` where the program's object named like a standard module has `attr` too.

    Not an Exception: a test's `except Exception` does not turn it into a pass."""


class _Shadow(Remote):
    """An object of the program's whose name is a standard module's (`def trace(m)`, `def tokenize(s)`, a
    class `array`): calling it, comparing it, its own attributes are the program's, as the tests expect of
    the program's names; an attribute only the module has is the module's, so a test that uses the module
    without importing it (`math.isclose`, relying on the program's `import math`) still gets Python's. An
    attribute both have fails the tests (`NameClash`): the runner cannot tell which one the test meant,
    and either guess lets something through (a wrong `class statistics` whose `mean` the module would
    answer, a `math` of the program's with an `isclose` always true)."""

    __slots__ = ("_module",)

    def __init__(self, n: int, module: str) -> None:
        super().__init__(n)
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name: str) -> Any:
        module_name = object.__getattribute__(self, "_module")
        module = _standard_module(module_name)
        if module is None or not hasattr(module, name):
            return Remote.__getattr__(self, name)
        try:
            Remote.__getattr__(self, name)
        except AttributeError:
            return getattr(module, name)
        raise NameClash(f"{module_name}.{name} is both the program's and the standard module's")


def _program_names(names: Any, own: Any, builtins_too: bool) -> tuple[dict[str, Any], list[str]]:
    """The program's globals for the tests, as a test file's `from program import *` binds them, and the
    names of builtins the program's own objects stand in for. Whose each name is:

    - a name starting with '__': Python's (`__builtins__` would replace every builtin of the tests);
    - bound to a module: a standard module is that module, imported here (`_LazyModule`); another is not
      bound (the tests import what they use);
    - an object of the program's named like a standard module (`def trace(m)`): the program's, but an
      attribute the module has is the module's or a `NameClash` (`_Shadow`);
    - named like a builtin: the program's if it is an object the program defined itself (`own`: its
      `def pow`, `def max`, a class, a lambda) and `builtins_too`; else Python's builtin (plain data,
      `sum = 0`; an exception class, `ValueError`; a function it imported, numpy's `all`, math's `pow`).
      The program's stand-in is then the tests' helper as well: a `def range(*a): return []` empties the
      tests' loops. So the grader runs such tests twice, with and without `builtins_too` (`sandbox.run_tests`);
    - anything else: the program's."""
    assert _connection is not None
    if type(names) is not dict:
        raise ProtocolError("the program's names are not an object")
    own = {n for n in own if type(n) is str} if type(own) is list else set()
    bound: dict[str, Any] = {}
    stand_ins: list[str] = []
    for name, value in names.items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            continue
        is_module = type(value) is dict and value.get("$") == "module"
        if is_module:
            module = str(value.get("v", ""))  # import math as m: m is math
            if _is_standard(module):
                bound[name] = _LazyModule(module)
            continue  # (another module, numpy say: the tests import what they use)
        decoded = _connection.decode(value)
        if isinstance(decoded, Remote) and name in sys.stdlib_module_names:
            bound[name] = _Shadow(object.__getattribute__(decoded, "_n"), name)
        elif not hasattr(builtins, name):
            bound[name] = decoded
        elif isinstance(decoded, Remote) and name in own:
            stand_ins.append(name)
            if builtins_too:
                bound[name] = decoded
    return bound, stand_ins


class _Runs:
    """Every unittest run the tests start (unittest.main, a TextTestRunner), with its result."""

    def __init__(self) -> None:
        self.results: list[Any] = []

    def install(self) -> None:
        import unittest  # (imported only for tests that use it: it takes a while)

        runs, run = self, unittest.TextTestRunner.run

        def recorded(runner: Any, test: Any) -> Any:
            result = run(runner, test)
            runs.results.append(result)
            return result

        unittest.TextTestRunner.run = recorded  # type: ignore[method-assign,assignment]

    def failure(self) -> str:
        for result in self.results:
            if not result.wasSuccessful():
                bad = result.failures + result.errors + [(t, "unexpected success") for t in result.unexpectedSuccesses]
                test, trace = bad[0]
                last = [ln.strip() for ln in str(trace).splitlines() if ln.strip()][-1:] or ["failed"]
                name = getattr(test, "_testMethodName", None) or str(test)
                return one_line(f"{len(bad)} of {result.testsRun} unittest tests failed; {name}: {last[0]}", 200)
        return ""


def _run_test_cases(namespace: dict[str, Any]) -> None:
    """TestCase classes the tests define but never run: run them."""
    import unittest

    cases = [v for v in namespace.values()
             if isinstance(v, type) and issubclass(v, unittest.TestCase) and v.__module__ == "__main__"]
    if cases:
        suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in cases)
        with open(os.devnull, "w") as null:
            unittest.TextTestRunner(stream=null, verbosity=0).run(suite)


def _verdict_from_tests(tests: str, names: dict[str, Any]) -> str:
    """Run the tests; '' if they all passed, else why not (one line)."""
    runs = _Runs()
    if "unittest" in tests:
        runs.install()
    main = types.ModuleType("__main__")
    main.__dict__.update(names)
    sys.modules["__main__"] = main
    sys.argv = ["tests"]
    try:
        exec(compile(tests, "tests", "exec"), main.__dict__)
    except SystemExit as e:  # unittest.main() ends so; its result is recorded anyway
        if e.code not in (None, 0, False):
            return runs.failure() or f"the tests exited with status {one_line(str(e.code), 40)}"
    except ProgramGone:
        return "the program's process ended during the tests"
    except ProtocolError as e:
        return one_line(f"the program's answer could not be read: {e}", 200)
    except BaseException as e:
        return one_line(exception_line(e), 200)
    if not runs.results and "unittest" in tests:
        _run_test_cases(main.__dict__)
    return runs.failure()


def _nondumpable() -> None:
    """Refuse other processes of this user a view of this one (ptrace, /proc/PID/mem and fd)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def runner_main(sock_fd: int, verdict_fd: int, config: dict[str, Any]) -> None:
    global _connection
    _nondumpable()
    verdict = socket.socket(fileno=verdict_fd)
    set_limits(address_space=config["memory"], cpu=config["cpu"])
    import threading

    threading.stack_size(THREAD_STACK)  # (its address space is limited: the tests may start threads too)
    _quiet_fds()
    _connection = Connection(socket.socket(fileno=sock_fd))
    stand_ins: list[str] = []
    try:
        reply = _connection.ask({"op": "run"})
        names, stand_ins = _program_names(reply["ok"], reply.get("own"), config["builtins_too"])
    except ProgramGone as e:
        detail = str(e) if str(e).startswith("the program exited") else "the program exited before the tests ran"
    except ProtocolError as e:
        detail = one_line(f"the program's answer could not be read: {e}", 200)
    except Exception as e:
        detail = one_line(f"the program raised {exception_line(e)}", 200)
    else:
        try:
            detail = _verdict_from_tests(config["tests"], names)
        except BaseException as e:
            detail = one_line(f"the test runner failed: {exception_line(e)}", 200)
    verdict.sendall(json.dumps({"passed": not detail, "detail": detail, "stand_ins": stand_ins}).encode())
    verdict.close()
    os._exit(0)  # not waiting for threads the tests left


def main(argv: list[str], config: dict[str, Any]) -> None:
    if argv[0] == "program":
        program_main(int(argv[1]), config)
    else:
        runner_main(int(argv[1]), int(argv[2]), config)
