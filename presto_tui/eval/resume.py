"""A long run that survives: the run log, written as sessions finish, and `--resume` from it.

The run log (`<results>.runlog`, beside the results JSON) is append-only JSONL:

- line 1, the header: `{"type": "run_log", "command", "settings", "trace", "output"}`, the settings
  being everything that decides what a session answers (the items, the methods and their
  parameters, the seeds, --chains, --vote, the graders' limits, the model and its options);
- then one line a finished session: eval's holds its key (`item`, `method`, `seed`, `chain`), its
  grade and KV peak, and its summary's fields (`summary_state`: every number the tables read, its
  draws, not the rounds' trees, a few KB where its events are MB); bench's its key (`prompt`,
  `seed`, `row`, `chain`) and its events, encoded as the trace encodes them, folded again
  (`restore`: bench's tables read the critical path and the method's own numbers too), and a
  throughput row as it was measured.  Neither needs the trace.

Each line is written whole, flushed and fsynced before the run goes on, so that a run killed at
any point (SIGKILL, an out-of-memory kill, a preempted node) leaves every finished session
in the log, at most a half-written last line after them: `RunLog.resume` drops that line
(and cuts it from the file, so that the next lines append cleanly), refuses a run whose
settings differ from the first run's (naming the first difference), and hands back the
finished sessions, which then do not run again.

`PRESTO_TUI_CRASH_AT` is a test hook (`kind:N`): the process kills itself with SIGKILL at the
Nth `record` written, halfway through writing the Nth record (`torn`), or at the Nth session
`event` seen, so that the resume tests stop a run at a chosen point rather than after a sleep.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from presto_tui.errors import InputError, OutputError
from presto_tui.safetext import visible

LOG_TYPE = "run_log"
LOG_SUFFIX = ".runlog"
CRASH_ENV = "PRESTO_TUI_CRASH_AT"

# -- the test hook ---------------------------------------------------------------------------------

_crash: tuple[str, int] | None = None
_seen: dict[str, int] = {}


def _crash_point() -> tuple[str, int] | None:
    global _crash
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return None
    if _crash is None:
        kind, _, n = spec.partition(":")
        _crash = (kind, int(n))
    return _crash


def crash_if(kind: str) -> bool:
    """Count one `kind`; True (`torn`) or never returning (the others) at the count the hook names."""
    point = _crash_point()
    if point is None or point[0] != kind:
        return False
    _seen[kind] = _seen.get(kind, 0) + 1
    if _seen[kind] != point[1]:
        return False
    if kind == "torn":
        return True
    os.kill(os.getpid(), signal.SIGKILL)
    return False  # (not reached)


# -- settings --------------------------------------------------------------------------------------

NAMES = {"tasks.items": "the items (the task file, --limit or --task-seed)", "tasks.source": "TASKS",
         "tasks.count": "the number of items",
         "methods": "--methods", "chains": "--chains", "vote": "--vote", "backend": "--backend",
         "selection": "--burn-in/--thin", "classifier": "--classifier"}


def difference(then: Any, now: Any, path: str = "") -> str | None:
    """The first place two settings differ, in words (`where: X then, Y now`); None if equal."""
    if isinstance(then, dict) and isinstance(now, dict):
        for key in [*then, *(k for k in now if k not in then)]:
            d = difference(then.get(key), now.get(key), f"{path}.{key}" if path else str(key))
            if d is not None:
                return d
        return None
    if path == "methods" and isinstance(then, list) and isinstance(now, list):
        labels = lambda ms: ",".join(str(m.get("label")) for m in ms if isinstance(m, dict))
        if labels(then) != labels(now):
            return f"--methods: {labels(then)} then, {labels(now)} now"
        for a, b in zip(then, now):
            d = difference(a.get("params"), b.get("params"), f"method {a.get('label')}'s parameter")
            if d is not None:
                return d
        return None
    if then == now:
        return None
    name = NAMES.get(path) or _param(path)
    if path == "tasks.items":
        return f"{name} differ"
    return f"{name}: {_short(then)} then, {_short(now)} now"


def _param(path: str) -> str:
    """`shared_params.steps` -> `-K`, `method powermh's parameter.steps` -> `method powermh's -K`."""
    from presto_tui.api.params import flag

    where, _, key = path.rpartition(".")
    if where == "shared_params":
        return flag(key)
    if where.endswith("'s parameter"):
        return f"{where.removesuffix(' parameter')} {flag(key)}"
    return path


def _short(x: Any) -> str:
    s = "not given" if x is None else orjson.dumps(x).decode() if not isinstance(x, str) else x
    return visible(s if len(s) <= 60 else s[:59] + "…", keep_newlines=False)


def items_digest(rows: Iterable[Iterable[str]]) -> str:
    """One digest of every item's fields, in order: equal when the items are."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for row in rows:
        h.update(orjson.dumps(list(row)))
    return h.hexdigest()


def log_path_of(results: Path) -> Path:
    """The run log beside a results file (`res.json` -> `res.runlog`: JSON lines, not named `.jsonl`, so
    that `sessions/*.jsonl` stays the traces `stats` and `fit-classifier` read)."""
    return results.with_suffix(LOG_SUFFIX)


def given_log(path: Path) -> Path:
    """`--resume` takes the run log or the results JSON beside it (written at the end, if it was)."""
    if path.name.endswith(LOG_SUFFIX):
        return path
    other = log_path_of(path)
    return other if other.exists() or not path.exists() else path


# -- the log ---------------------------------------------------------------------------------------

class RunLog:
    """The append-only run log of one run (and of its resumptions)."""

    def __init__(self, path: Path, f, header: dict):
        self.path, self._f, self.header = path, f, header

    @property
    def shown(self) -> str:
        return visible(str(self.path), keep_newlines=False)

    @classmethod
    def create(cls, path: Path, command: str, settings: dict, **where: Any) -> RunLog:
        """A new run log; one that exists already is never overwritten (it may hold hours of work)."""
        from presto_tui.files import make_folders

        shown = visible(str(path), keep_newlines=False)
        make_folders(path.parent, "run log", error=OutputError)
        try:
            f = open(path, "xb")  # noqa: SIM115 - open for the run's lifetime
        except FileExistsError:
            raise InputError(f"{shown}: a run log exists there already (a run with these results): continue it "
                             f"with --resume {shown}, or remove it") from None
        except OSError as e:
            raise OutputError(f"{shown}: cannot write run log ({e.strerror})") from None
        header = {"type": LOG_TYPE, "command": command, "settings": settings,
                  **{k: (None if v is None else str(v)) for k, v in where.items()}}
        log = cls(path, f, header)
        log._write(orjson.dumps(header, option=orjson.OPT_APPEND_NEWLINE))
        return log

    @classmethod
    def resume(cls, path: Path, command: str, settings: dict) -> tuple[RunLog, list[dict]]:
        """The log of the run to continue and its finished sessions' records; one line, and nothing
        touched, where it is not such a log or its settings differ from these."""
        from presto_tui.files import readable_file

        shown = visible(str(path), keep_newlines=False)
        readable_file(path, "run log")
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise InputError(f"{shown}: cannot read run log ({e.strerror})") from None
        cut = raw.rfind(b"\n") + 1  # a last line without its newline was cut off mid-write: dropped
        lines = raw[:cut].split(b"\n")[:-1]
        header = _line(shown, 1, lines[0]) if lines else None
        if header is None or header.get("type") != LOG_TYPE:
            raise InputError(f"{shown}:1: not a presto-tui run log (the <results>{LOG_SUFFIX} a run writes as it "
                             "goes)")
        if header.get("command") != command:
            raise InputError(f"{shown}: a run log of `{visible(str(header.get('command')))}`, not of `{command}`")
        d = difference(header.get("settings"), settings)
        if d is not None:
            raise InputError(f"--resume {shown}: the settings differ from the first run's ({d}); give the first "
                             "run's settings, or start a new run")
        records = [_line(shown, n, ln) for n, ln in enumerate(lines[1:], start=2) if ln.strip()]
        try:
            f = open(path, "r+b")  # noqa: SIM115 - open for the run's lifetime
            f.truncate(cut)
            f.seek(cut)
        except OSError as e:
            raise OutputError(f"{shown}: cannot write run log ({e.strerror})") from None
        return cls(path, f, header), records

    def write(self, record: dict) -> None:
        """One finished session, whole on disk before the run goes on."""
        data = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)
        if crash_if("torn"):  # the test hook: half a line on disk, then the kill
            self._write(data[:len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        self._write(data)
        crash_if("record")

    def _write(self, data: bytes) -> None:
        try:
            self._f.write(data)
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as e:
            raise OutputError(f"{self.shown}: cannot write run log ({e.strerror or e})") from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._f.close()


def _line(shown: str, n: int, raw: bytes) -> dict:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InputError(f"{shown}:{n}: damaged line in the run log (not valid JSON)") from None
    if not isinstance(obj, dict):
        raise InputError(f"{shown}:{n}: damaged line in the run log (not a JSON object)")
    return obj


# -- sessions ------------------------------------------------------------------------------------

# a summary's fields kept in an eval record: all but the parts only the trace's views read (the critical
# path's log, the method's own numbers, the engine's step cost), which cost most of a session's bytes
NOT_KEPT = ("path", "timing", "info", "engine_cost", "_crit", "_live_at", "_events")
OWN_FORM = ("tokens", "draws", "block_prefixes")  # kept in a form of their own


def summary_state(s) -> dict:
    """What a finished session's summary holds for eval's tables: its fields, its draws as the trace
    encodes them (a few per MH transition), not its events (a round's whole tree each)."""
    import dataclasses

    from presto_tui.logs.schema import encode

    d = {f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name not in NOT_KEPT + OWN_FORM}
    return {**d, "tokens": list(s.tokens), "draws": [encode(t) for t in s.draws],
            "block_prefixes": [[b, list(p)] for b, p in s.block_prefixes.items()]}


def summary_from(shown: str, n: int, d: dict) -> Any:
    """The summary `summary_state` kept."""
    import dataclasses

    from presto_tui.api.events import SessionSummary, Transition
    from presto_tui.logs.schema import SchemaError, decode

    names = {f.name for f in dataclasses.fields(SessionSummary)} - set(NOT_KEPT + OWN_FORM)
    try:
        s = SessionSummary(**{k: v for k, v in d.items() if k in names})
        s.tokens = tuple(d["tokens"])
        draws = [decode(t) for t in d["draws"]]
        if not all(isinstance(t, Transition) for t in draws):
            raise TypeError("a draw that is not a transition")
        s.draws = [t for t in draws if isinstance(t, Transition)]
        s.block_prefixes = {int(b): tuple(p) for b, p in d["block_prefixes"]}
    except (SchemaError, TypeError, KeyError, ValueError) as e:
        raise InputError(f"{shown}:{n}: damaged session in the run log ({e})") from None
    return s


def encode_events(events: Iterable) -> list[dict]:
    from presto_tui.logs.schema import encode

    return [encode(ev) for ev in events]


def restore(shown: str, n: int, events: list) -> Any:
    """A finished session's summary, folded again from its recorded events."""
    from presto_tui.api.events import SessionSummary
    from presto_tui.logs.schema import SchemaError, decode

    s = SessionSummary()
    try:
        for e in events:
            s.update(decode(e))
    except (SchemaError, TypeError, KeyError) as e:
        raise InputError(f"{shown}:{n}: damaged session in the run log ({e})") from None
    return s


# -- eval's settings -------------------------------------------------------------------------------

# engine options that change how fast a run goes, not what it answers: a resumed run may set them anew
HOW_NOT_WHAT = ("threads", "gpu_memory_utilization", "kv_cache_gib", "tensor_parallel_size", "pipeline_parallel_size",
                "distributed_executor_backend", "enforce_eager")


def eval_settings(*, source: str, items, methods, base, chains: int, vote: bool, grader: str | None,
                  code_timeout: float, code_memory: int, classifier: str | None, backend: str, engine_opts,
                  selection: dict | None) -> dict:
    """What decides an evaluation's answers, as the run log keeps it (--concurrency and --workers, which
    only decide how fast it goes, may change on --resume)."""
    engine = engine_settings(engine_opts)
    return {"tasks": {"source": source, "count": len(items),
                      "items": items_digest((it.id, it.prompt, it.answer, it.grader) for it in items)},
            "methods": [{"label": m.label, "params": m.params.to_dict()} for m in methods],
            "shared_params": base.to_dict(), "chains": chains, "vote": vote,
            "graders": {"default": grader, "code_timeout": code_timeout, "code_memory": code_memory},
            "classifier": classifier, "backend": backend, "engine": engine, "selection": selection}


def reopen(given: Path, command: str, settings: dict, *, trace: Path | None, no_trace: bool,
           output: Path | None) -> tuple[RunLog, list[dict], Path | None, Path]:
    """What `--resume` continues: the run log, its finished sessions' records, and the first run's trace
    (appended to) and results path (unless --output names another); one line where they do not fit."""
    from presto_tui.files import output_path

    log, records = RunLog.resume(given_log(given), command, settings)
    first = log.header.get("trace")
    path = Path(first) if first else None
    problem = None
    if no_trace and path is not None or trace is not None and trace != path:
        problem = (f"--resume: the run appends to the first run's trace ({visible(first or 'none: --no-trace')}); "
                   "leave out --trace and --no-trace")
    elif path is not None and not path.is_file():
        problem = f"--resume: the first run's trace {visible(str(path))} is gone; the resumed run appends to it"
    if problem is not None:
        log.close()
        raise InputError(problem)
    return log, records, path, output_path(output or Path(str(log.header.get("output"))), "results", overwrite=True)


def engine_settings(engine_opts) -> dict:
    """The engine options that decide what a model answers (`HOW_NOT_WHAT` left out)."""
    import dataclasses

    return {k: v for k, v in dataclasses.asdict(engine_opts).items() if k not in HOW_NOT_WHAT}
