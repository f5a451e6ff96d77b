"""The one thread that owns the engine: its engine loop, the server's chains and its trace.

The HTTP side never touches the engine.  It hands chains in (`add`) and asks for
cancels (`cancel`) through a thread-safe inbox; this thread takes them between
engine steps, so a chain that arrives while others run joins the very next
step's batch, and a cancelled chain's requests are aborted before it.  What the
chains emit goes out in one batch per pass through `deliver` (the server hands
it to its asyncio loop), after the trace has it.

Each chain is built exactly as `presto-tui run` builds it (`Sessions.start` with the
same prompt ids, parameters and seed), which is why an answer equals `run`'s.
Tokenizing happens here too: a tokenizer is not safe to share between threads.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from presto_tui.api.engine import RuntimeEngine as Engine
from presto_tui.api.events import TRANSIENT, Event, RoundDone, SessionEnd, SessionError, SessionStart, Vocab
from presto_tui.api.params import CertaintyClassifier, SamplerParams
from presto_tui.api.sessions import Sessions, StartFailed, check_context
from presto_tui.errors import InputError, PrestoError, describe
from presto_tui.logs.writer import TraceWriter
from presto_tui.safetext import visible
from presto_tui.serve.protocol import Prompt
from presto_tui.serve.wire import Wired, wired

RATE_WINDOW_S = 10.0  # transitions per second are counted over this much recent time
RATE_BUCKET_S = 0.1  # counts this close together share one entry of the window
TRIM_AFTER_BYTES = 32 << 20  # a request that may hold this much gives the memory it freed back as it ends
GIVE_BACK_AGAIN_S = 1.0  # ... and again this long after (`give_back_memory`)


def _malloc_trim() -> Callable[[int], object] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim  # glibc's
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()
# the interpreter's internal caches, its attribute cache among them (`give_back_memory`): 3.13 named the
# call anew and deprecated the old name
_CLEAR_CACHES: Callable[[], object] | None = (getattr(sys, "_clear_internal_caches", None)
                                              or getattr(sys, "_clear_type_cache", None))


def give_back_memory(engine: Engine | None = None) -> None:
    """Hand the memory a large request freed back to the system.  A chain's state holds reference cycles
    (its driver, block and walker point at each other), so most of what a request held is freed only by a
    full collection, which Python runs when it will; and glibc keeps freed blocks for reuse (`malloc_trim`
    gives their pages back, in every arena).  The engine thread calls this as the last large chain running
    leaves the engine loop (which drops a chain's state as the chain ends), again when the HTTP side has let
    the request's objects go (`EngineHost.give_back`, from `Hub._hand_back`: as the request finished, 9 MiB
    more after item 6 of benchmarks/bench_admission.py, and as it is forgotten with the events it kept), and
    GIVE_BACK_AGAIN_S after the end, for what the event loop let go of meanwhile (9 MiB more after item 2c).
    The collection holds the interpreter's lock for as long as freeing the request's objects takes (0.1-0.5 s
    on a loaded 2-core machine for a 6-replica tempering request at 4,096 tokens): the pause Python's own
    collection would have taken later, at a time of its choosing.

    A page goes back only when nothing on it is live, and a few small objects that outlive the request,
    spread over the pages it used, keep most of them (the server runs on glibc's allocator: `allocator`).
    Two kinds did, found by walking the engine thread's heap after item 2c: the engine's memo (`engine`,
    from the engine thread only: `Engine.drop_caches`) and the interpreter's attribute cache.  That cache
    keeps the name of each of its 4,096 latest lookups, and NumPy's C code makes a new name string at
    every `cumsum` and `any` ("accumulate", "any"): 2,300 of them kept 1,660 pages (6.5 MiB) resident.
    Clearing it (`_CLEAR_CACHES`) lets them go; it refills as lookups come."""
    drop = getattr(engine, "drop_caches", None)  # (an engine written to the protocol before it had it)
    if drop is not None:
        drop()
    if _CLEAR_CACHES is not None:
        _CLEAR_CACHES()
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)


class RateWindow:
    """A count over the last RATE_WINDOW_S seconds, trimmed as it is written (not only when it is
    read: a server nobody scrapes would keep every entry), in buckets of RATE_BUCKET_S: at most
    about a hundred entries, whatever the load.  Written by one thread, read by another."""

    def __init__(self, window_s: float = RATE_WINDOW_S):
        self.window_s = window_s
        self._items: collections.deque[list] = collections.deque()  # [time, count]
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, n: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._items and now - self._items[-1][0] < RATE_BUCKET_S:
                self._items[-1][1] += n
            else:
                self._items.append([now, n])
            self._trim(now)

    def per_s(self, now: float | None = None) -> float:
        with self._lock:
            self._trim(time.monotonic() if now is None else now)
            return sum(n for _, n in self._items) / self.window_s

    def _trim(self, now: float) -> None:
        while self._items and self._items[0][0] < now - self.window_s:
            self._items.popleft()


@dataclass(frozen=True)
class Chain:
    """One chain to run: choice `chain` of `chains` for one prompt of a request (`group`)."""

    key: str
    prompt: Prompt
    params: SamplerParams
    chain: int = 0
    chains: int = 1
    group: str = ""
    tenant: str = ""  # whose: the engine's slots are shared between tenants in turn
    slots: int = 1  # the slots it takes: a population's members (tempering's replicas) are chains on the engine
    large: bool = False  # its request may hold TRIM_AFTER_BYTES or more: its end gives the memory back


@dataclass(frozen=True)
class Admitted:
    """The chain's prompt is tokenized and fits: it runs as soon as a slot is free."""

    prompt_tokens: int


@dataclass(frozen=True)
class Refused:
    """The chain could not be built (a prompt too long for the model, bad token ids): no session."""

    kind: str
    message: str


@dataclass(frozen=True)
class Withdrawn:
    """The chain was cancelled while it waited for a slot: it never started."""


# a pass's batch: (chain, event, its wire bytes: None for the server's own Admitted, Refused, Withdrawn),
# and the token text first seen in it (the trace and the event streams need it)
Deliver = Callable[[list[tuple[str, object, Wired | None]], dict[int, str]], None]


class ServerTrace:
    """The server's trace, shared by its one engine thread (EngineHost) and its workers' readers
    (Pool): every chain's events under the chain's session id, as they pass. A write that fails (a
    full disk) is said once, and the server serves on without a trace."""

    def __init__(self, writer: TraceWriter | None, warn: Callable[[str], None]):
        self.writer = writer
        self.error = ""
        self._warn = warn
        self._sid: dict[str, str] = {}  # chain key -> its session id, while the chain runs

    def record(self, key: str, ev: object) -> None:
        if isinstance(ev, (Admitted, Refused, Withdrawn)):  # the server's own, before or instead of a session
            return
        if isinstance(ev, SessionStart):
            self._sid[key] = ev.session_id
        if self.writer is not None:
            try:
                self.writer.write(cast(Event, ev), self._sid.get(key))  # (it leaves out the transient events itself)
            except PrestoError as e:
                self.error = e.line
                self._warn(f"presto-tui: error: {visible(e.line, keep_newlines=False)}; serving on without a trace")
                self.writer = None
        if isinstance(ev, (SessionEnd, SessionError)):
            self._sid.pop(key, None)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class EngineHost:
    stopped_line = "the engine thread has stopped; restart presto-tui serve"
    gives_back_memory = True  # (a large request's end: `give_back_memory`, in this thread)

    def __init__(self, engine: Engine, *, max_chains: int, deliver: Deliver, trace: TraceWriter | None = None,
                 classifier: CertaintyClassifier | None = None, warn: Callable[[str], None] | None = None,
                 shared: bool = False):
        self.engine = engine
        self.loop = Sessions(engine, classifier)  # each chain built as `presto-tui run` builds it
        self.max_chains = max_chains
        # several tenants (`shared`): one tenant's chains take at most max_chains - reserve slots, so that
        # another's find one free at once, and a free slot goes to the waiting tenant that runs fewest
        self.tenant_slots = max_chains - tenant_reserve(max_chains) if shared else max_chains
        self._running: dict[str, tuple[str, int]] = {}  # running chain -> its tenant, the slots it takes
        self._large: set[str] = set()  # large chains admitted and not ended: the last one's end gives memory back
        self._give_back: list[float] = []  # when to give memory back (monotonic clock), soonest first
        self._deliver = deliver
        self._warn = warn or (lambda line: print(line, file=sys.stderr))
        self.trace = ServerTrace(trace, self._warn)
        self._inbox: queue.Queue = queue.Queue()
        # admitted, waiting for a slot: the chain, its prompt's token ids and text
        self._waiting: collections.OrderedDict[str, tuple[Chain, list[int], str]] = collections.OrderedDict()
        self._vocab = Vocab(engine.token_pieces)
        self._watched: set[str] = set()  # chains someone listens to: only theirs get transient events (engine thread)
        self.pieces: dict[int, str] = {}  # every token text sent so far (read by the HTTP side)
        self._thread = threading.Thread(target=self._run, name="presto-engine", daemon=True)
        self._rate = RateWindow()
        # numbers the metrics read (ints: one thread writes them)
        self.chains_live = 0
        self.chains_waiting = 0
        self.engine_live = 0
        self.transitions = 0
        self.steps = 0
        self.faults = 0
        self.last_fault = ""
        self.failed: BaseException | None = None  # the thread itself died (a bug)

    # -- any thread ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def add(self, chain: Chain) -> None:
        self._inbox.put(("add", chain))

    def cancel(self, key: str) -> None:
        self._inbox.put(("cancel", key))

    def watch(self, key: str, on: bool) -> None:
        """Build the chain's transient events (someone listens to it), or stop building them."""
        self._inbox.put(("watch", (key, on)))

    def give_back(self) -> None:
        """The HTTP side has let a large request's objects go: hand back what it freed (`give_back_memory`)."""
        self._inbox.put(("give_back", None))

    def stop(self, timeout: float | None = None) -> None:
        """Cancel every chain (their sessions end `cancelled` in the trace), close the trace."""
        if self._thread.is_alive():
            self._inbox.put(("stop", None))
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def transitions_per_s(self) -> float:
        return self._rate.per_s()

    def worker_numbers(self) -> list[dict]:
        """Per engine worker (serve --workers: pool.py); one engine in this thread has none."""
        return []

    def numbers(self) -> dict[str, int | str | float]:
        """The numbers /metrics and /health show, as of the last pass."""
        return {"chains_live": self.chains_live, "chains_waiting": self.chains_waiting,
                "engine_live": self.engine_live, "transitions": self.transitions, "steps": self.steps,
                "faults": self.faults, "last_fault": self.last_fault, "transitions_per_s": self.transitions_per_s()}

    # -- the engine thread ----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                out: list[tuple[str, object]] = []
                busy = bool(self.loop.active)
                for kind, arg in self._drain(block=not busy):
                    if kind == "stop":
                        self._shutdown(out)
                        return
                    if kind == "add":
                        self._admit(arg, out)
                    elif kind == "cancel":
                        self._cancel(arg, out)
                    elif kind == "watch":
                        key, on = arg
                        (self._watched.add if on else self._watched.discard)(key)
                    elif kind == "give_back" and not (self._give_back and self._give_back[0] <= time.monotonic()):
                        self._give_back.insert(0, time.monotonic())  # (one pass for the asks one loop sees)
                self._fill(out)
                if self.loop.active:
                    try:
                        out.extend(self.loop.step(  # type: ignore[arg-type]
                            transient=self._watched.__contains__ if self._watched else False))
                        self.steps += 1
                    except Exception as e:  # an engine failure: every open chain ends with its error
                        self.faults += 1
                        self.last_fault = describe(e)[1]
                        out.extend(self.loop.fail_all(e))  # type: ignore[arg-type]
                self._publish(out)
                if self._give_back and self._give_back[0] <= time.monotonic():
                    self._give_back.pop(0)  # (the loop has let the chain go; its events are published)
                    del out
                    give_back_memory(self.engine)
        except BaseException as e:  # a bug in this thread: the server says so on /health
            self.failed = e
            self._warn(f"presto-tui: internal error: engine thread stopped: {visible(describe(e)[1])}")
            raise

    def _drain(self, block: bool) -> list[tuple[str, Any]]:
        cmds = []
        try:
            cmds.append(self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait())
            while True:
                cmds.append(self._inbox.get_nowait())
        except queue.Empty:
            pass
        return cmds

    def _admit(self, chain: Chain, out: list) -> None:
        if chain.large:
            self._large.add(chain.key)
        e = self.engine
        try:
            p = chain.prompt
            ids = list(p.ids) if p.ids is not None else e.encode_prompt(p.text, p.history)
            self._check_ids(ids)
            check_context(e, len(ids), chain.params.validate())
            text = p.text if p.ids is None else e.decode(ids)
        except Exception as exc:
            out.append((chain.key, Refused(*describe(exc))))
            return
        self._waiting[chain.key] = (chain, ids, text)
        out.append((chain.key, Admitted(len(ids))))

    def _check_ids(self, ids: list[int]) -> None:
        """Token ids a client sent must be the model's: an id the engine refuses at submit time
        would fail the engine step, and with it every chain on the loop."""
        size = self.engine.info.get("vocab_size") or _tokenizer_size(self.engine)
        if size and (bad := [i for i in ids if i >= size]):
            raise InputError(f"token id {bad[0]} is not in the model's vocabulary (ids below {size})")

    def _slots(self, chain: Chain) -> int:
        return max(1, min(chain.slots, self.tenant_slots))  # (admission refuses more: it would never start)

    def _next_waiting(self) -> str | None:
        """The chain to start: the first waiting one of the tenant that takes fewest slots (tenants in
        turn), if it fits in the free slots and its tenant's share (None: none does)."""
        running: collections.Counter[str] = collections.Counter()
        for k in self.loop.active:
            tenant, slots = self._running.get(str(k), ("", 1))
            running[tenant] += slots
        free = self.max_chains - sum(running.values())
        best: tuple[int, str] | None = None
        seen: set[str] = set()
        for key, (chain, _, _) in self._waiting.items():
            t = chain.tenant
            if t in seen:
                continue
            seen.add(t)
            if best is None or running[t] < best[0]:
                best = (running[t], key)
        if best is None:
            return None
        chain = self._waiting[best[1]][0]
        slots = self._slots(chain)
        return best[1] if slots <= free and running[chain.tenant] + slots <= self.tenant_slots else None

    def _fill(self, out: list) -> None:
        while self._waiting and len(self.loop.active) < self.max_chains:
            key = self._next_waiting()
            if key is None:
                break
            chain, ids, text = self._waiting.pop(key)
            self._running[key] = (chain.tenant, self._slots(chain))
            try:
                out.extend(self.loop.start(key, chain.params, ids, prompt=text, chain=chain.chain, chains=chain.chains,
                                           group=chain.group))
            except StartFailed as e:
                out.extend((key, ev) for ev in e.events)

    def _cancel(self, key: str, out: list) -> None:
        if self._waiting.pop(key, None) is not None:
            out.append((key, Withdrawn()))
        else:
            out.extend(self.loop.cancel(key))

    def _shutdown(self, out: list) -> None:
        for key in list(self._waiting):
            self._cancel(key, out)
        for active in list(self.loop.active):
            self._cancel(str(active), out)
        self._publish(out)
        self.trace.close()

    def _publish(self, out: list[tuple[str, object]]) -> None:
        """Trace, token text, wire bytes and numbers first, then one batch to the HTTP side."""
        moved = 0
        fresh: dict[int, str] = {}
        batch: list[tuple[str, object, Wired | None]] = []
        for key, ev in out:
            if isinstance(ev, RoundDone):
                moved += ev.k_after - ev.k_before
            own = isinstance(ev, (Admitted, Refused, Withdrawn))
            if not own and not isinstance(ev, TRANSIENT):
                new = self._vocab.new_pieces(cast(Event, ev))
                self.pieces.update(new)
                fresh.update(new)
            self.trace.record(key, ev)
            if isinstance(ev, (SessionEnd, SessionError, Refused, Withdrawn)):
                self._watched.discard(key)
                self._running.pop(key, None)
                if key in self._large:
                    self._large.discard(key)
                    if not self._large:
                        now = time.monotonic()
                        self._give_back = [now, now + GIVE_BACK_AGAIN_S]
            batch.append((key, ev, None if own else wired(cast(Event, ev))))
        if moved:
            self.transitions += moved
            self._rate.add(moved)
        self.chains_live = len(self.loop.active)
        self.chains_waiting = len(self._waiting)
        self.engine_live = self.engine.live
        if batch:
            self._deliver(batch, fresh)

    @property
    def trace_error(self) -> str:
        return self.trace.error


def tenant_reserve(max_chains: int) -> int:
    """Slots one tenant leaves to the others on a server of several tenants: a quarter (none of one)."""
    return max_chains // 4 if max_chains > 1 else 0


def _tokenizer_size(engine: Engine) -> int | None:
    tok = getattr(getattr(engine, "text", None), "tok", None)
    try:
        return len(tok) if tok is not None else None
    except TypeError:
        return None
