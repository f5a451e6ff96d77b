"""The HTTP side's book of requests: admission, what each chain has emitted, who listens.

Everything here runs on the server's asyncio loop.  The engine thread's batches
arrive through `take` (scheduled with `call_soon_threadsafe`); a request's
handler waits on its `RequestRun`, and event-stream listeners (`Listener`) get
each event as the trace's JSON object, token text first.  A request's recorded
events are kept until it is among the last `keep` finished ones, so a listener
that subscribes after a request began still gets it from its first event.

Admission is counted in chains: up to `max_chains` run on the engine at once
and up to `max_queue` more wait for a slot; a request that would go beyond is
refused with 429 and a Retry-After from the recent chains' durations.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import time
import uuid
from dataclasses import dataclass, field

from presto_tui.api.events import (
    TRANSIENT,
    Event,
    SessionEnd,
    SessionError,
    SessionStart,
    SessionSummary,
    Vocab,
    cut_at_eos,
    cut_at_stop,
)
from presto_tui.errors import InputError
from presto_tui.serve.host import Admitted, Chain, EngineHost, Refused, Withdrawn
from presto_tui.serve.protocol import Ask, Choice
from presto_tui.serve.wire import encode_event, vocab_object

LISTENER_BACKLOG = 256  # a listener this far behind loses transient events (never recorded ones)
LISTENER_LIMIT = 100_000  # a listener this far behind is dropped: its client reads slower than chains run


class Busy(Exception):
    """The queue is full: come back after `retry_after` seconds (HTTP 429)."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class ChainRun:
    index: int  # the choice's index in the answer
    key: str
    summary: SessionSummary = field(default_factory=SessionSummary)
    prompt_tokens: int | None = None
    session_id: str | None = None
    end: object | None = None  # SessionEnd, SessionError, Refused or Withdrawn
    since: float = field(default_factory=time.monotonic)

    @property
    def status(self) -> str:
        e = self.end
        if isinstance(e, SessionEnd):
            return e.reason
        return "error" if isinstance(e, SessionError) else "refused" if isinstance(e, Refused) else "cancelled"


class RequestRun:
    def __init__(self, rid: str, ask: Ask, chains: list[ChainRun]):
        self.id, self.ask, self.chains = rid, ask, chains
        self.created = int(time.time())
        self.events: list[tuple[ChainRun, Event]] = []  # recorded events, for listeners that come late
        self.listeners: set[Listener] = set()
        self.changed = asyncio.Event()  # set on every change; waiters clear it

    @property
    def admitted(self) -> bool:
        return all(c.prompt_tokens is not None or c.end is not None for c in self.chains)

    @property
    def finished(self) -> bool:
        return all(c.end is not None for c in self.chains)

    @property
    def transitions(self) -> int:
        return sum(c.summary.transitions for c in self.chains)

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
        presto = {"session_id": c.session_id, **c.summary.to_dict()}
        if not isinstance(end, SessionEnd):
            return Choice(c.index, "", "error" if c.status in ("error", "refused") else "cancelled", 0, presto)
        tokens = cut_at_eos(end.tokens, eos_id)
        text, stopped = cut_at_stop(end.text, self.ask.stop)
        reason = "stop" if stopped or len(tokens) < len(end.tokens) else "length"
        return Choice(c.index, text, reason if end.reason == "done" else "cancelled", len(tokens), presto)


class Listener:
    """One event stream: wire objects in a queue (None: the stream is over)."""

    def __init__(self, pieces: dict[int, str]):
        self.queue: asyncio.Queue[dict | None] = asyncio.Queue()
        self.dropped = False
        self._vocab = Vocab(lambda ids: [pieces.get(i, "") for i in ids])

    def push(self, run: RequestRun, chain: ChainRun, ev: Event) -> None:
        if self.dropped:
            return
        if isinstance(ev, TRANSIENT) and self.queue.qsize() > LISTENER_BACKLOG:
            return  # progress for a person: the next one will do
        if self.queue.qsize() > LISTENER_LIMIT:  # the stream ends; a client sees it end before the sessions do
            self.dropped = True
            self.close()
            return
        new = self._vocab.new_pieces(ev)
        if new:
            self.queue.put_nowait(vocab_object(new))
        obj = encode_event(ev)
        if chain.session_id is not None and not isinstance(ev, SessionStart):
            obj["sid"] = chain.session_id
        obj["request_id"], obj["choice"] = run.id, chain.index  # ("request" is a request event's own field)
        self.queue.put_nowait(obj)

    def close(self) -> None:
        self.queue.put_nowait(None)


class Hub:
    def __init__(self, host: EngineHost, *, max_chains: int, max_queue: int, keep: int = 16):
        self.host = host
        self.max_chains, self.max_queue = max_chains, max_queue
        self.runs: dict[str, RequestRun] = {}  # live and recently finished, by id
        self._finished: collections.deque[str] = collections.deque()
        self._keep = keep
        self._chains: dict[str, tuple[RequestRun, ChainRun]] = {}
        self._listeners: set[Listener] = set()  # every request's events
        self._durations: collections.deque[float] = collections.deque(maxlen=32)
        self.in_flight = 0  # chains reserved and not yet ended
        self.chain_ends: collections.Counter[str] = collections.Counter()

    @property
    def capacity(self) -> int:
        return self.max_chains + self.max_queue

    @property
    def live_requests(self) -> int:
        return sum(1 for r in self.runs.values() if not r.finished)

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: a recent chain's mean duration."""
        if not self._durations:
            return 1
        return max(1, min(600, math.ceil(sum(self._durations) / len(self._durations))))

    # -- requests -----------------------------------------------------------------------------
    def reserve(self, ask: Ask) -> RequestRun:
        """Admit a request's chains (InputError if it can never fit, Busy if not now)."""
        if ask.chains > self.capacity:
            raise InputError(f"this request asks for {ask.chains} chains (prompts x n); this server takes at most "
                             f"{self.capacity} at once (--max-chains {self.max_chains} + --max-queue {self.max_queue})")
        if self.in_flight + ask.chains > self.capacity:
            raise Busy(f"the server is busy ({self.in_flight} chains running or queued, at most {self.capacity}); "
                       "try again later", self.retry_after())
        rid = ask.request_id or f"cmpl-{uuid.uuid4().hex[:24]}"
        old = self.runs.get(rid)
        if old is not None:
            if not old.finished:
                raise InputError(f"request_id {rid!r} is in use by a running request")
            self._forget(rid)
        n = ask.n
        chains = [ChainRun(i, f"{rid}/{i}") for i in range(ask.chains)]
        run = RequestRun(rid, ask, chains)
        self.runs[rid] = run
        self.in_flight += len(chains)
        for c in chains:
            self._chains[c.key] = (run, c)
            prompt = ask.prompts[c.index // n]
            self.host.add(Chain(c.key, prompt, ask.params, c.index % n, n, f"{rid}/{c.index // n}" if n > 1 else ""))
        return run

    def cancel(self, run: RequestRun) -> None:
        """End the request's chains (a client went away, a timeout): the engine thread aborts their
        requests in its next pass; their sessions end `cancelled`."""
        for c in run.chains:
            if c.end is None:
                self.host.cancel(c.key)

    def _forget(self, rid: str) -> None:
        run = self.runs.pop(rid, None)
        if run is not None:
            for c in run.chains:
                self._chains.pop(c.key, None)
            with contextlib.suppress(ValueError):
                self._finished.remove(rid)

    # -- from the engine thread --------------------------------------------------------------
    def take(self, batch: list[tuple[str, object]]) -> None:
        touched: set[RequestRun] = set()
        for key, item in batch:
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
            if not isinstance(ev, TRANSIENT):
                c.summary.update(ev)
                run.events.append((c, ev))
            for listener in (*run.listeners, *self._listeners):
                listener.push(run, c, ev)
            if isinstance(ev, (SessionEnd, SessionError)):
                self._ended(run, c, ev)
        for run in touched:
            run.changed.set()
            if run.finished:
                for listener in run.listeners:
                    listener.close()
                run.listeners.clear()

    def _ended(self, run: RequestRun, c: ChainRun, end: object) -> None:
        if c.end is not None:
            return
        c.end = end
        self.in_flight -= 1
        self.chain_ends[c.status] += 1
        if c.status == "done":
            self._durations.append(time.monotonic() - c.since)
        if run.finished:
            self._finished.append(run.id)
            while len(self._finished) > self._keep:
                self._forget(self._finished[0])

    # -- listeners ----------------------------------------------------------------------------
    def listen(self, rid: str | None) -> Listener:
        """A listener for one request's events from its first (KeyError if unknown), or for every
        request's from now on."""
        listener = Listener(self.host.pieces)
        if rid is None:
            self._listeners.add(listener)
            return listener
        run = self.runs[rid]
        for c, ev in run.events:
            listener.push(run, c, ev)
        if run.finished:
            listener.close()
        else:
            run.listeners.add(listener)
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

    def unlisten(self, listener: Listener) -> None:
        self._listeners.discard(listener)
        for run in self.runs.values():
            run.listeners.discard(listener)
