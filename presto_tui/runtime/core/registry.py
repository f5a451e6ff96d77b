"""The methods presto-tui knows: the built-in ones and every installed plugin, found once.

Built-in methods are the modules of `presto_tui.runtime.methods` that export one `Method` as
`METHOD` (found by listing the package: a new one is its module alone), listed by their `order`.
A method in another installed package registers through the Python entry-point group
`presto_tui.methods` (`importlib.metadata`): in its `pyproject.toml`,

    [project.entry-points."presto_tui.methods"]
    imh = "presto_tui_imh:METHOD"

and from then on it is a method like the built-in ones: `--sampler` and `--methods` take it, the
settings dialog, the server's request schema, `stats`, `replay`, `eval`, the frontier and lm-eval
know it.  Methods load on first use (`methods()`), after the core has loaded, so a method module
may import anything of the runtime.  A plugin that cannot be loaded or breaks a rule (a name
taken, a parameter declared twice) is left out with one line saying why (`problems()`), never
half-registered.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
import threading
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from presto_tui.runtime.core.method import EventType, Method, MethodKind
from presto_tui.runtime.core.names import unknown_choice
from presto_tui.runtime.core.paramkit import Group, ParamError

GROUP = "presto_tui.methods"
BUILTIN = "presto_tui.runtime.methods"  # the package whose modules are the built-in methods
NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")

_lock = threading.RLock()
_table: dict[str, Method] | None = None
_problems: list[Problem] = []
_added: list[Method] = []  # registered at run time (register)
_origins: dict[str, str] = {}  # a plugin method's name -> its package and version
_absent: dict[str, Absent] = {}  # methods traces read here name but that are not installed (stand_in)
_reserved: set[str] = set()  # the core's parameter names (spec.py reserves them)
generation = 0  # changes whenever the table does: what caches of it compare


def methods() -> tuple[Method, ...]:
    """Every method, built-in ones first (by their `order`: the MH chains, then the one-shot samplers),
    then plugins by name."""
    return tuple(_loaded().values())


def names(kind: MethodKind | None = None) -> tuple[str, ...]:
    return tuple(m.name for m in methods() if kind is None or m.kind is kind)


def find(name: object) -> Method | None:
    """The method called `name` (or one of its aliases), or the stand-in of one a trace read here names
    but that is not installed (`stand_in`); None if there is none."""
    m = installed(name)
    if m is None and isinstance(name, str):
        return _absent.get(name)
    return m


def installed(name: object) -> Method | None:
    """The method called `name` (or one of its aliases) that is installed here: what may run."""
    table = _loaded()
    if not isinstance(name, str):
        return None
    m = table.get(name)
    if m is not None:
        return m
    return next((m for m in table.values() if name in m.aliases), None)


class Absent(Method):
    """A method a trace names that is not installed here: a stand-in with no parameters, events or view
    of its own, so that the trace's generic records (its transitions and round trees, or its samples and
    choice, and its answer) read, summarise and replay as any method's.  It cannot run."""

    paper = ""

    def __init__(self, name: str, kind: MethodKind) -> None:
        self.name = name  # type: ignore[misc]
        self.display = name  # type: ignore[misc]
        self.help = "not installed here (read from a trace)"  # type: ignore[misc]
        self.kind = kind  # type: ignore[misc]

    def install_hint(self) -> str:
        """What to do to read its own records: its load problem, or which package to install."""
        why = missing(self.name)
        return why if why is not None else (f"install the package that registers {self.name!r} in the entry-point "
                                            f"group {GROUP} to read them")

    def driver(self, engine: object, params: object, prompt_ids: object, **kwargs: object) -> object:
        raise ParamError(f"method {self.name!r} is not installed here: {self.install_hint()}", "sampler")


def recorded(name: object) -> bool:
    """Whether `name` is a method not installed here that a trace read here names (its `stand_in`)."""
    return isinstance(name, str) and name in _absent and installed(name) is None


def stand_in(name: str, kind: MethodKind = MethodKind.CHAIN) -> Method:
    """The method called `name`, or where none is installed the stand-in a trace reader reads its sessions
    with (an `Absent`, found by `find` from then on but never listed or run); `kind` sets a stand-in's."""
    m = installed(name)
    if m is not None:
        return m
    with _lock:
        absent = _absent.setdefault(name, Absent(name, kind))
        absent.kind = kind  # type: ignore[misc]
        return absent


def method(name: object, flag: str = "--sampler") -> Method:
    """The method called `name`; ParamError (one line, with the choices) if there is none."""
    m = find(name)
    if m is None:
        why = missing(name)
        raise ParamError(f"{flag}: {why}" if why else unknown_choice(flag, name, names()), "sampler")
    return m


def kind_of(name: object) -> MethodKind | None:
    m = find(name)
    return None if m is None else m.kind


def event_type(type_name: str) -> EventType | None:
    """A method's event type by the `type` its trace lines carry (None: no method declares it)."""
    return next((e for m in methods() for e in m.events if e.type == type_name), None)


def event_type_of(ev: object) -> EventType | None:
    """The method event type `ev` is an instance of (None: it is none of theirs)."""
    return next((e for m in methods() for e in m.events if type(ev) is e.cls), None)


@dataclass(frozen=True)
class Problem:
    """A plugin method that was left out: which entry point of which package, and why (the exception and
    the file and line it points at: a syntax error's line, the frame that raised, or the method's class
    for a rule it breaks)."""

    entry_point: str  # its name in the entry-point group (the method's name, as the package registers it)
    value: str  # module:attribute
    package: str | None  # the distribution that declares it, and its version
    version: str | None
    error: str  # "SyntaxError: invalid syntax"
    where: str | None  # "path/to/module.py:12"
    method: str | None = None  # the method's own name, where it was loaded before a rule refused it
    traceback: str = field(default="", compare=False, repr=False)  # the whole of it (what --debug prints)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for n in (self.entry_point, self.method) if n))

    @property
    def origin(self) -> str:
        return f"{self.package} {self.version}" if self.package else "an unknown package"

    def __str__(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return (f"plugin method {self.entry_point!r} of {self.origin} (entry point {self.value}) failed to load: "
                f"{self.error}{at}")


def problems() -> list[str]:
    """One line per plugin method that was left out, and why (`load_problems` gives them as records)."""
    return [str(p) for p in load_problems()]


def load_problems() -> tuple[Problem, ...]:
    """Every plugin method that was left out, as a `Problem`."""
    _loaded()
    return tuple(_problems)


def missing(name: object) -> str | None:
    """Why there is no method called `name`, where a plugin of that name failed to load (its `Problem`'s
    line); None where no plugin tried to be it."""
    _loaded()
    return next((str(p) for p in _problems if name in p.names), None)


def origin(m: Method) -> str:
    """Where a method comes from: 'built-in', 'presto-tui-imh 0.1.0' (the package that registers it), or
    'registered in this process'."""
    if type(m).__module__.startswith(BUILTIN + "."):
        return "built-in"
    return _origins.get(m.name, "registered in this process")


def register(m: Method) -> Method:
    """Add a method for the rest of this process (a notebook trying one out, a test); a plugin
    package registers through the entry-point group instead.  ValueError if it breaks a rule."""
    with _lock:
        table = dict(_loaded())
        _admit(table, m)
        _added.append(m)
        _set(table)
    return m


def reload() -> None:
    """Find the methods again (after a plugin was installed into this process's path)."""
    global _table
    with _lock:
        _table = None
        _added.clear()
        _problems.clear()
        _origins.clear()
        _absent.clear()
        _bump()


def _bump() -> None:
    global generation
    generation += 1


def _set(table: dict[str, Method]) -> None:
    global _table
    _table = table
    _bump()


def _loaded() -> dict[str, Method]:
    table = _table
    if table is not None:
        return table
    with _lock:
        if _table is not None:
            return _table
        found: dict[str, Method] = {}
        for m in sorted(_builtin(), key=lambda m: (m.order, m.name)):  # a built-in that fails is a bug: it raises
            _admit(found, m)
        for ep in sorted(_entry_points(), key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            package, version = (dist.name, dist.version) if dist is not None else (None, None)
            loaded: Method | None = None
            try:
                loaded = _instance(ep.load())
                _admit(found, loaded)
                _origins[loaded.name] = f"{package} {version}" if package else "an unknown package"
            except Exception as e:  # a broken plugin costs its own methods, not presto-tui
                _problems.append(Problem(ep.name, ep.value, package, version, _error_text(e),
                                         _where(e, loaded), getattr(loaded, "name", None),
                                         "".join(traceback.format_exception(e))))
        for m in _added:
            _admit(found, m)
        _set(found)
        return found


def _error_text(e: BaseException) -> str:
    text = e.msg if isinstance(e, SyntaxError) else str(e)
    return " ".join(f"{type(e).__name__}: {text}".split())  # one line


def _where(e: BaseException, loaded: Method | None) -> str | None:
    """The file and line a load failure points at: a syntax error's own, the method's class where a rule
    refused it (the check raised in this module), else the innermost frame outside the import machinery."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{e.filename}:{e.lineno}"
    if loaded is not None:
        try:
            return f"{inspect.getsourcefile(type(loaded))}:{inspect.getsourcelines(type(loaded))[1]}"
        except (OSError, TypeError):
            return None
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not f.filename.startswith("<frozen") and f.filename != __file__
              and "importlib" not in f.filename.replace("\\", "/").split("/")]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def _builtin() -> list[Method]:
    """The `METHOD` of every module of the built-in methods' package that has one."""
    package = importlib.import_module(BUILTIN)
    out = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{BUILTIN}.{info.name}")
        if hasattr(module, "METHOD"):
            out.append(_instance(module.METHOD))
    return out


def _entry_points() -> Iterable:
    seen = set()
    for ep in entry_points(group=GROUP):
        if (ep.name, ep.value) not in seen:  # one package on the path twice is one plugin
            seen.add((ep.name, ep.value))
            yield ep


def _instance(obj: object) -> Method:
    m = obj() if isinstance(obj, type) else obj
    if not isinstance(m, Method):
        raise TypeError(f"{obj!r} is not a presto_tui Method")
    return m


def _admit(table: dict[str, Method], m: Method) -> None:
    """Check `m` against the rules and the methods already in `table`, then add it (ValueError)."""
    name = getattr(m, "name", None)
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(f"a method's name must be lower case letters, digits and -, got {name!r}")
    for attr in ("display", "help"):
        if not isinstance(getattr(m, attr, None), str) or not getattr(m, attr):
            raise ValueError(f"method {name!r} needs a {attr}")
    if not isinstance(m.kind, MethodKind):
        raise ValueError(f"method {name!r}: kind must be a MethodKind")
    taken = {n for t in table.values() for n in (t.name, *t.aliases)}
    for n in (name, *m.aliases):
        if n in taken:
            raise ValueError(f"method name {n!r} is taken")
    own = {p.name: t for t in table.values() for p in t.params}
    from_core = _reserved
    for p in m.params:
        if p.group is not Group.OWN:
            raise ValueError(f"method {name!r}: its parameter {p.name!r} must be of Group.OWN")
        if p.name in own or p.name in from_core:
            raise ValueError(f"method {name!r}: parameter {p.name!r} is declared already")
    for r in m.reads:
        if r not in own:
            raise ValueError(f"method {name!r} reads {r!r}, which no method declares")
    types = {e.type for t in table.values() for e in t.events}
    for e in m.events:
        if e.type in types:
            raise ValueError(f"method {name!r}: event type {e.type!r} is taken")
    if m.axis is not None and m.axis.param not in {p.name for p in m.params} | set(m.reads) | from_core:
        raise ValueError(f"method {name!r}: its axis {m.axis.param!r} is not a parameter it reads")
    table[name] = m
    for t in table.values():  # who reads which parameter may have changed
        _own_table(t, table)


def _own_table(m: Method, table: dict[str, Method]) -> None:
    """Its own and read parameters, each with `samplers` naming every method that reads it."""
    declared = {p.name: p for t in table.values() for p in t.params}
    m.own_table = tuple(dataclasses.replace(declared[n], samplers=frozenset(t.name for t in table.values()
                                                                             if n in t.own))
                        for n in m.own if n in declared)


def reserve(names: Iterable[str]) -> None:
    """Parameter names no method may declare (the core's: the parameter table says them)."""
    _reserved.update(names)
