"""The HTTP side's book of requests: admission, tenants, what each chain has emitted, who listens.

Everything here runs on the server's asyncio loop.  The engine thread's batches
arrive through `take` (scheduled with `call_soon_threadsafe`); a request's
handler waits on its `RequestRun`, and event-stream listeners (`Listener`) get
each event as the trace's JSON object, token text first.

Every request belongs to the tenant of the key that sent it (`Tenant`): its id is
looked up among that tenant's requests only, and a listener sees only its
tenant's requests unless its key is an admin key.  An id the server makes is 128
random bits; one a client gives is its tenant's, and is refused if the tenant
used it before, or if it is an id the server made for the tenant (the last
`USED_IDS` ids of either kind are remembered, and every request still held).

Memory is bounded everywhere: each event is encoded once, as the bytes every
listener sends.  A request keeps its recorded events (for listeners that come
late) until it is among the last `keep` finished requests and their events fit in
`keep_bytes`; what one live request records is bounded by the server's caps on
steps and tokens (`--max-steps`, `--max-tokens`).  A listener to one request reads
them where the request keeps them; a listener to every request holds at most
`listener_bytes` not yet sent, and one that falls further behind is dropped, with
a last `dropped` event saying why, its backlog released at once (as is a
listener to a request whose events are let go before it has sent them).

Admission is counted in chains: up to `max_chains` run on the engine at once
and up to `max_queue` more wait for a slot, for each tenant (all tenants together:
that times the tenants); a request that would go beyond is refused with 429 and a
Retry-After from the recent chains' durations.  It is counted in tokens, live
engine requests and memory too: what a tenant's running and queued requests may
cost, keep live and hold (app.within_caps) stays within `max_tenant_tokens`,
`max_tenant_live` and `max_tenant_memory` (429 above).  Which waiting chain gets a
free slot is the host's (tenants in turn: host.EngineHost._next_waiting).  At most
`max_listeners` event streams are open at once (429 above), so that listeners
never take every connection a server holds.

The engine thread builds the transient events (a round in flight, the streaming
epoch's live tree: costly with long chains) only for chains someone listens to
(`_watch`: a listener to their request, or to every request of their tenant).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import math
import secrets
import time
from dataclasses import dataclass, field

import orjson

from presto_tui.api.events import (
    TRANSIENT,
    Event,
    SessionEnd,
    SessionError,
    SessionStart,
    SessionSummary,
    cut_at_eos,
    cut_at_stop,
)
from presto_tui.errors import InputError
from presto_tui.serve.host import TRIM_AFTER_BYTES, Admitted, Chain, Refused, Withdrawn, give_back_memory
from presto_tui.serve.protocol import Ask, Choice
from presto_tui.serve.tenants import ANYONE, Tenant
from presto_tui.serve.wire import DROPPED, Wired, vocab_object, wired

LISTENER_BYTES = 4 << 20  # what one event stream may hold unsent before it is dropped
KEEP_BYTES = 64 << 20  # recorded events of finished requests kept for late listeners, at most
USED_IDS = 1 << 16  # client request ids remembered, to refuse one used again
SEND_AT_ONCE = 1 << 16  # an event stream sends what it holds in pieces of about this size


class Busy(Exception):
    """The queue is full: come back after `retry_after` seconds (HTTP 429)."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


def sse(obj: dict) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


@dataclass(frozen=True, slots=True)
class Line:
    """One event as every listener sends it, encoded once; `ids`: the token ids whose text must go first."""

    ids: tuple[int, ...]
    data: bytes
    transient: bool = False


@dataclass
class ChainRun:
    index: int  # the choice's index in the answer
    key: str
    # its numbers as they come (the events it folds stay with it: its draws, its critical path's log);
    # as it ends, what its answer reports is kept (`presto`, `transitions`) and the summary let go (`close`)
    summary: SessionSummary | None = field(default_factory=SessionSummary)
    _kept: tuple[dict, int] = field(default_factory=lambda: ({}, 0))
    prompt_tokens: int | None = None
    session_id: str | None = None
    end: object | None = None  # SessionEnd, SessionError, Refused or Withdrawn
    since: float = field(default_factory=time.monotonic)

    @property
    def presto(self) -> dict:
        """Its numbers as its answer reports them (`presto-tui run --json`'s, with its session's id)."""
        if self.summary is None:
            return self._kept[0]
        return {"session_id": self.session_id, **self.summary.to_dict()}

    @property
    def transitions(self) -> int:
        return self._kept[1] if self.summary is None else self.summary.transitions

    def close(self, end: object) -> None:
        """The chain has ended: the numbers its answer reports stay, its summary goes.  A finished request is
        kept a while (for late listeners and the cancel route); with the summaries of its chains it kept
        every event they folded, 36 MiB after 6 tempering replicas ran 15 s at 4,096 tokens, freed only as
        the request was forgotten, after the memory it freed had been given back."""
        self.end = end
        if self.summary is not None:
            self._kept = (self.presto, self.transitions)
            self.summary = None

    @property
    def status(self) -> str:
        e = self.end
        if isinstance(e, SessionEnd):
            return e.reason
        return "error" if isinstance(e, SessionError) else "refused" if isinstance(e, Refused) else "cancelled"


class RequestRun:
    def __init__(self, rid: str, tenant: Tenant, ask: Ask, chains: list[ChainRun]):
        self.id, self.tenant, self.ask, self.chains = rid, tenant, ask, chains
        self.created = int(time.time())
        self.tokens = 0  # what its chains may cost, on its tenant's account while it runs ...
        self.live = 0  # ... the engine requests they may keep live at once
        self.memory = 0  # ... and the bytes those may hold
        self.large = False  # it may hold TRIM_AFTER_BYTES or more: what it freed goes back (Hub._hand_back)
        self.lines: list[Line] = []  # recorded events, for listeners that come late
        self.kept_bytes = 0
        self.listeners: set[Listener] = set()
        self.changed = asyncio.Event()  # set on every change; waiters clear it

    @property
    def book_key(self) -> tuple[str, str]:
        return (self.tenant.name, self.id)

    @property
    def admitted(self) -> bool:
        return all(c.prompt_tokens is not None or c.end is not None for c in self.chains)

    @property
    def finished(self) -> bool:
        return all(c.end is not None for c in self.chains)

    @property
    def transitions(self) -> int:
        return sum(c.transitions for c in self.chains)

    def failure(self) -> tuple[str, str] | None:
        """(kind, message) of the first chain that failed or was refused."""
        for c in self.chains:
            if isinstance(c.end, (SessionError, Refused)):
                return (c.end.kind, c.end.message)
        return None

    @property
    def prompt_tokens(self) -> int:
        # n chains of one prompt count its tokens once, as OpenAI counts them
        n = self.ask.n
        return sum(c.prompt_tokens or 0 for c in self.chains[::n])

    def choice(self, c: ChainRun, eos_id: int | None) -> Choice:
        end = c.end
        presto = c.presto
        if not isinstance(end, SessionEnd):
            return Choice(c.index, "", "error" if c.status in ("error", "refused") else "cancelled", 0, presto)
        tokens = cut_at_eos(end.tokens, eos_id)
        text, stopped = cut_at_stop(end.text, self.ask.stop)
        reason = "stop" if stopped or len(tokens) < len(end.tokens) else "length"
        return Choice(c.index, text, reason if end.reason == "done" else "cancelled", len(tokens), presto)


class Listener:
    """One event stream.  Every request's (`run` None): the bytes still to send, queued as events
    come, at most `limit` of them; `tenant`: whose requests it sees (None: everyone's).  One
    request's: it reads the request's recorded events where the request keeps them (`cursor`),
    so that it copies nothing, and queues only the transient ones that come while it has read
    everything else."""

    def __init__(self, pieces: dict[int, str], limit: int = LISTENER_BYTES, tenant: str | None = None,
                 run: RequestRun | None = None):
        self.pieces, self.limit, self.tenant, self.run = pieces, limit, tenant, run
        self.cursor = 0  # run.lines sent so far
        self._queue: collections.deque[bytes] = collections.deque()
        self.size = 0  # bytes queued
        self.closed = False
        self.dropped = False
        self._ready = asyncio.Event()
        self._seen = bytearray()  # a bit per token id whose text was sent (ids are below the vocabulary's size)

    @property
    def behind(self) -> bool:
        """A request's listener has recorded events it has not sent yet."""
        return self.run is not None and self.cursor < len(self.run.lines)

    def push(self, line: Line) -> None:
        if self.closed or (self.run is not None and (not line.transient or self.behind)):
            return  # (a request's listener reads recorded events from the request; a transient one is stale now)
        if line.transient and self.size > self.limit // 4:
            return  # progress for a person: the next one will do
        if self.size + len(line.data) > self.limit:
            self.drop()
            return
        self._put(self._encoded(line))

    def wake(self) -> None:
        self._ready.set()

    def _encoded(self, line: Line) -> bytes:
        """The line, after the text of the token ids this stream has not described yet."""
        new = sorted({i for i in line.ids if not self._has(i)})
        if not new:
            return line.data
        for i in new:
            self._mark(i)
        return sse(vocab_object({i: self.pieces.get(i, "") for i in new})) + line.data

    def _has(self, i: int) -> bool:
        return (i >> 3) < len(self._seen) and bool(self._seen[i >> 3] & (1 << (i & 7)))

    def _mark(self, i: int) -> None:
        if (i >> 3) >= len(self._seen):
            self._seen.extend(bytes((i >> 3) + 1 - len(self._seen)))
        self._seen[i >> 3] |= 1 << (i & 7)

    def _put(self, data: bytes) -> None:
        self._queue.append(data)
        self.size += len(data)
        self._ready.set()

    def drop(self, why: str | None = None) -> None:
        """The client reads slower than the chains run: its backlog goes, and its stream ends with
        one event that says so."""
        behind = self.size
        self._queue.clear()
        self.size = 0
        self.dropped = True
        self.run = None
        self._put(sse({"type": DROPPED, "reason": "this event stream was dropped: " + (why or (
            f"its client fell {behind} bytes behind, and the server holds at most {self.limit} bytes for one "
            "stream; read faster, or follow one request (?request=ID)"))}))
        self.close()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def next(self, timeout: float) -> bytes | None:
        """What to send next (several events at once when they wait), b"" after `timeout` s without
        any, None once the stream is over."""
        while not (self._queue or self.behind):
            if self.closed:
                return None
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return b""
        parts: list[bytes] = []
        n = 0
        while self._queue and n < SEND_AT_ONCE:
            parts.append(self._queue.popleft())
            n += len(parts[-1])
            self.size -= len(parts[-1])
        run = self.run
        while run is not None and self.cursor < len(run.lines) and n < SEND_AT_ONCE:
            parts.append(self._encoded(run.lines[self.cursor]))
            self.cursor += 1
            n += len(parts[-1])
        return b"".join(parts)


class Hub:
    def __init__(self, host, *, max_chains: int, max_queue: int, keep: int = 16, keep_bytes: int = KEEP_BYTES,
                 listener_bytes: int = LISTENER_BYTES, workers: int = 1, max_tenant_tokens: int | None = None,
                 max_listeners: int | None = None, tenants: int = 1, max_tenant_live: int | None = None,
                 max_tenant_memory: int | None = None):
        self.host = host  # an EngineHost (add, cancel, pieces, give_back) or the pool of Ray workers (pool.py)
        # max_chains on each worker's engine at once (one engine: one worker), max_queue more waiting
        self.max_chains, self.max_queue, self.workers = max_chains * workers, max_queue, workers
        self.runs: dict[tuple[str, str], RequestRun] = {}  # live and recently finished, by (tenant, id)
        self._finished: collections.deque[tuple[str, str]] = collections.deque()
        self._keep, self._keep_bytes, self.finished_bytes = keep, keep_bytes, 0
        self.listener_bytes = listener_bytes
        self._chains: dict[str, tuple[RequestRun, ChainRun]] = {}
        self._serial = itertools.count()
        self._listeners: set[Listener] = set()  # every request's events (of a tenant, or of all)
        self._durations: collections.deque[float] = collections.deque(maxlen=32)
        self._used: set[int] = set()  # client request ids used, as hashes of (tenant, id)
        self._used_order: collections.deque[int] = collections.deque()
        self.in_flight = 0  # chains reserved and not yet ended
        self.max_tenant_tokens, self.max_listeners = max_tenant_tokens, max_listeners
        self.tenant_tokens: collections.Counter[str] = collections.Counter()  # live requests' costs, by tenant
        # ... the engine requests they keep live at once and the bytes those hold, by tenant
        self.max_tenant_live, self.max_tenant_memory = max_tenant_live, max_tenant_memory
        self.tenant_live: collections.Counter[str] = collections.Counter()
        self.tenant_memory: collections.Counter[str] = collections.Counter()
        # chains reserved and not yet ended, by tenant: each tenant may hold `capacity` of them, and all
        # together `capacity` times the tenants (a tenant's full queue never refuses another's request)
        self.tenant_chains: collections.Counter[str] = collections.Counter()
        self.tenants = max(1, tenants)
        self._watched: set[str] = set()  # chains the host builds transient events for (someone listens)
        self.chain_ends: collections.Counter[str] = collections.Counter()
        self.listeners_dropped = 0

    @property
    def capacity(self) -> int:
        return self.max_chains + self.max_queue

    @property
    def live_requests(self) -> int:
        return sum(1 for r in self.runs.values() if not r.finished)

    def _all_listeners(self) -> list[Listener]:
        return [*self._listeners, *(x for r in self.runs.values() for x in r.listeners)]

    @property
    def listeners(self) -> int:
        return len(self._all_listeners())

    @property
    def listener_backlog(self) -> int:
        """Bytes the event streams hold, not yet sent."""
        return sum(x.size for x in self._all_listeners())

    @property
    def kept_bytes(self) -> int:
        """Bytes of recorded events kept for listeners that come late, live requests' and finished ones'."""
        return sum(r.kept_bytes for r in self.runs.values())

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: a recent chain's mean duration."""
        if not self._durations:
            return 1
        return max(1, min(600, math.ceil(sum(self._durations) / len(self._durations))))

    # -- requests -----------------------------------------------------------------------------
    def find(self, rid: str, tenant: str) -> RequestRun | None:
        return self.runs.get((tenant, rid))

    def reserve(self, ask: Ask, tenant: Tenant = ANYONE, tokens: int = 0, *, live: int = 0,
                memory: int = 0, slots: int = 1) -> RequestRun:
        """Admit a request's chains (InputError if it can never fit or reuses an id, Busy if not now).
        `tokens`, `live`, `memory`: what its chains may cost, keep live at once and hold (app.within_caps),
        counted against its tenant's live totals."""
        if ask.chains > self.capacity:
            running = f"--max-chains {self.max_chains // self.workers}" + (
                f" x {self.workers} workers" if self.workers > 1 else "")
            raise InputError(f"this request asks for {ask.chains} chains (prompts x n); this server takes at most "
                             f"{self.capacity} at once ({running} + --max-queue {self.max_queue})")
        rid = ask.request_id
        if rid is not None and (hash((tenant.name, rid)) in self._used or (tenant.name, rid) in self.runs):
            raise InputError(f"request_id {rid!r} was used before; a request id is never reused")
        mine = self.tenant_chains[tenant.name]
        if mine + ask.chains > self.capacity:
            raise Busy(f"the server is busy ({mine} chains of this tenant running or queued, at most "
                       f"{self.capacity}); try again later", self.retry_after())
        if self.in_flight + ask.chains > self.capacity * self.tenants:
            raise Busy(f"the server is busy ({self.in_flight} chains running or queued, at most "
                       f"{self.capacity * self.tenants}); try again later", self.retry_after())
        for cap, held, asked, what, flag in (
                (self.max_tenant_tokens, self.tenant_tokens[tenant.name], tokens, "may cost up to {} tokens",
                 "--max-tenant-tokens"),
                (self.max_tenant_live, self.tenant_live[tenant.name], live, "may keep up to {} engine requests live",
                 "--max-live-requests, twice it"),
                (self.max_tenant_memory, self.tenant_memory[tenant.name], memory, "may hold up to {} bytes",
                 "--max-request-memory")):
            if cap is not None and asked and held + asked > cap:
                raise Busy(f"this tenant's requests running or queued {what.format(held)}, and this one "
                           f"{what.format(asked).removeprefix('may ')}; together they would be over this server's "
                           f"limit of {cap} (presto-tui serve {flag}); try again later", self.retry_after())
        if rid is None:
            rid = f"cmpl-{secrets.token_hex(16)}"
        self._remember(hash((tenant.name, rid)))  # (a server-made one too: a client may not take it up)
        serial = next(self._serial)  # the engine's name for the chains: unique, whoever sent them
        n = ask.n
        chains = [ChainRun(i, f"r{serial}/{i}") for i in range(ask.chains)]
        run = RequestRun(rid, tenant, ask, chains)
        run.tokens, run.live, run.memory = tokens, live, memory
        run.large = memory >= TRIM_AFTER_BYTES
        self.tenant_tokens[tenant.name] += tokens
        self.tenant_live[tenant.name] += live
        self.tenant_memory[tenant.name] += memory
        self.runs[run.book_key] = run
        self.in_flight += len(chains)
        self.tenant_chains[tenant.name] += len(chains)
        for c in chains:
            self._chains[c.key] = (run, c)
            prompt = ask.prompts[c.index // n]
            self.host.add(Chain(c.key, prompt, ask.params, c.index % n, n, f"{rid}/{c.index // n}" if n > 1 else "",
                                tenant.name, slots, large=run.large))
        if self._listeners:  # (a listener to every request of its tenant hears these from the start)
            self._watch()
        return run

    def _remember(self, h: int) -> None:
        self._used.add(h)
        self._used_order.append(h)
        while len(self._used_order) > USED_IDS:
            self._used.discard(self._used_order.popleft())

    def cancel(self, run: RequestRun) -> None:
        """End the request's chains (a client went away, a timeout): the engine thread aborts their
        requests in its next pass; their sessions end `cancelled`."""
        for c in run.chains:
            if c.end is None:
                self.host.cancel(c.key)

    def _watch(self) -> None:
        """Tell the host which chains someone listens to: the transient events of the others (a live tree
        is costly to build with long chains) are never built."""
        tenants = {x.tenant for x in self._listeners}  # (None: every tenant's)
        wanted = {c.key for r in self.runs.values() if r.listeners or None in tenants or r.tenant.name in tenants
                  for c in r.chains if c.end is None}
        for key in wanted - self._watched:
            self.host.watch(key, True)
        for key in self._watched - wanted:
            self.host.watch(key, False)
        self._watched = wanted

    def _release(self, run: RequestRun) -> None:
        """A finished request's cost leaves its tenant's account."""
        name = run.tenant.name
        for book, spent in ((self.tenant_tokens, run.tokens), (self.tenant_live, run.live),
                            (self.tenant_memory, run.memory)):
            book[name] -= spent
            if book[name] <= 0:
                del book[name]
        run.tokens = run.live = run.memory = 0

    def _hand_back(self) -> None:
        """This side has let a large request's objects go (as it finished, and the events kept for late
        listeners as it is forgotten: 10 MiB of item 6 of benchmarks/bench_admission.py, forgotten as 16
        of the other tenant's requests finished after it): their pages go back (`host.give_back_memory`), by
        the engine thread, or off the event loop where the engine runs in other processes (--workers)."""
        if self.host.gives_back_memory:
            self.host.give_back()
        else:
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().run_in_executor(None, give_back_memory)

    def _forget(self, key: tuple[str, str]) -> None:
        run = self.runs.pop(key, None)
        if run is not None:
            for c in run.chains:
                self._chains.pop(c.key, None)
            if run.finished:
                self.finished_bytes -= run.kept_bytes
            for listener in list(run.listeners):  # one still reading it cannot read on: its events go
                if listener.behind:
                    listener.drop(f"its request's events were let go (the server keeps the last {self._keep} "
                                  "finished requests' within its budget) before this stream had sent them")
                    self.listeners_dropped += 1
            run.listeners.clear()
            run.lines = []
            if run.large and run.finished:
                self._hand_back()  # (once its lines are let go)

    # -- from the engine thread --------------------------------------------------------------
    def take(self, batch: list[tuple[str, object, Wired | None]]) -> None:
        touched: set[RequestRun] = set()
        for key, item, wire in batch:
            found = self._chains.get(key)
            if found is None:
                continue
            run, c = found
            touched.add(run)
            if isinstance(item, Admitted):
                c.prompt_tokens = item.prompt_tokens
                continue
            if isinstance(item, (Refused, Withdrawn)):
                self._ended(run, c, item)
                continue
            ev: Event = item  # type: ignore[assignment]
            if isinstance(ev, SessionStart):
                c.session_id = ev.session_id
            transient = isinstance(ev, TRANSIENT)
            listeners = [x for x in self._listeners if x.tenant in (None, run.tenant.name)]
            if transient and not (listeners or run.listeners):
                continue
            line = self._line(run, c, ev, transient, wire)
            if not transient:
                if c.summary is not None:
                    c.summary.update(ev)
                run.lines.append(line)
                run.kept_bytes += len(line.data)
            for listener in (*run.listeners, *listeners):
                listener.push(line)
                if listener.dropped:
                    self._dropped(listener)
            if isinstance(ev, (SessionEnd, SessionError)):
                self._ended(run, c, ev)
        for run in touched:
            run.changed.set()
            for listener in run.listeners:
                listener.wake()
                if run.finished:
                    listener.close()  # (it sends what it has not read yet, then ends)

    @staticmethod
    def _line(run: RequestRun, chain: ChainRun, ev: Event, transient: bool, wire: Wired | None = None) -> Line:
        """The event's wire object (as the engine's thread encoded it) with the request's fields after its own."""
        wire = wire or wired(ev)
        extra: dict = {}
        if chain.session_id is not None and not isinstance(ev, SessionStart):
            extra["sid"] = chain.session_id
        extra["request_id"], extra["choice"] = run.id, chain.index  # ("request" is a request event's own field)
        if run.tenant.name:
            extra["tenant"] = run.tenant.name
        return Line(wire.ids, b"data: " + wire.data[:-1] + b"," + orjson.dumps(extra)[1:] + b"\n\n", transient)

    def _dropped(self, listener: Listener) -> None:
        self.listeners_dropped += 1
        self._listeners.discard(listener)
        for run in self.runs.values():
            run.listeners.discard(listener)
        self._watch()

    def _ended(self, run: RequestRun, c: ChainRun, end: object) -> None:
        if c.end is not None:
            return
        c.close(end)
        self._watched.discard(c.key)  # (the host forgets it as the chain ends)
        self.in_flight -= 1
        self.tenant_chains[run.tenant.name] -= 1
        if self.tenant_chains[run.tenant.name] <= 0:
            del self.tenant_chains[run.tenant.name]
        self.chain_ends[c.status] += 1
        if c.status == "done":
            self._durations.append(time.monotonic() - c.since)
        if run.finished and self.runs.get(run.book_key) is run:
            if run.large:
                self._hand_back()
            self._release(run)
            self._finished.append(run.book_key)
            self.finished_bytes += run.kept_bytes
            while self._finished and (len(self._finished) > self._keep or self.finished_bytes > self._keep_bytes):
                self._forget(self._finished.popleft())

    # -- listeners ----------------------------------------------------------------------------
    def listen(self, rid: str | None, tenant: Tenant = ANYONE, of: str | None = None) -> Listener:
        """A listener for one request's events from its first (KeyError if this tenant has no such
        request), or for every request's from now on: the tenant's own, or with an admin key
        everyone's (`of`: one tenant's)."""
        if self.max_listeners is not None and self.listeners >= self.max_listeners:
            raise Busy(f"the server holds {self.max_listeners} event streams already (--max-event-streams); try "
                       "again later", 1)
        if rid is None:
            whose = (of if tenant.admin else tenant.name)  # None: every tenant's
            listener = Listener(self.host.pieces, self.listener_bytes, whose)
            self._listeners.add(listener)
            self._watch()
            return listener
        run = self.runs[(of if tenant.admin and of is not None else tenant.name, rid)]
        listener = Listener(self.host.pieces, self.listener_bytes, run=run)
        run.listeners.add(listener)  # (until its stream ends: it may still be reading when the request ends)
        if run.finished:
            listener.close()
        else:
            self._watch()
        return listener

    def close_listeners(self) -> None:
        """The server stops: every event stream ends."""
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        for run in self.runs.values():
            for listener in run.listeners:
                listener.close()
            run.listeners.clear()
        self._watch()

    def unlisten(self, listener: Listener) -> None:
        listener.close()
        self._listeners.discard(listener)
        for run in self.runs.values():
            run.listeners.discard(listener)
        self._watch()
