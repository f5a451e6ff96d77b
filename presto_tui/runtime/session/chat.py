"""A chat: prompts sampled one after another on one engine, recorded in one trace (no Textual).

`ChatSession` owns the engine, the trace writer and the conversation history;
it runs on the app's worker thread and reports everything through `emit`:
token text (`Vocab`), session events, and `Notice`s for failures that happen
outside a session (the engine or the trace could not start).  The UI thread
only calls `cancel`, `pause`/`resume` and reads `busy`; it never touches the
engine or the trace.  `close` (after the worker has stopped) closes the trace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from presto_tui.errors import describe
from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.answers import vote
from presto_tui.runtime.session.chains import chain_drivers
from presto_tui.runtime.session.events import Event, SessionEnd, SessionStart
from presto_tui.runtime.session.loop import run_chains
from presto_tui.runtime.session.runner import display_text
from presto_tui.runtime.session.vocab import Vocab


@dataclass(frozen=True)
class VocabUpdate:
    """Text of token ids the app has not seen yet (sent before the event that uses them)."""

    pieces: dict[int, str]


@dataclass(frozen=True)
class Notice:
    """A failure outside any session (engine start, trace file): one message for the person."""

    kind: str  # input, engine, output, internal
    message: str


@dataclass(frozen=True)
class ChainEvent:
    """An event of chain `chain` of a prompt run with several chains (their events interleave)."""

    chain: int
    event: Event


@dataclass(frozen=True)
class EngineReady:
    backend: str
    model: str


@dataclass(frozen=True)
class ParamsChanged:
    """The parameters the prompts now run with changed outside the app (a restarted server has other
    defaults): the app holds, shows and sends these from now on."""

    params: SamplerParams


Emit = Callable[[object], None]


class TraceSink(Protocol):
    """Where a chat records its sessions (logs.writer.TraceWriter)."""

    path: Path

    def write(self, ev: Event, sid: str | None = None) -> None: ...

    def end_open_session(self, reason: str, text_of: Callable[[Sequence[int]], str]) -> None: ...

    def close(self) -> None: ...


def deliver(trace: TraceSink | None, ev: Event, emit: Emit, chain: int | None = None,
            sid: str | None = None) -> TraceSink | None:
    """Write `ev` of session `sid` to `trace`, then emit it (as chain `chain`'s where several run).
    A trace that fails says so once in a Notice and is dropped: the chat goes on without it (the
    trace returned, None once dropped)."""
    if trace is not None:
        try:
            trace.write(ev, sid)
        except Exception as e:
            emit(Notice(*describe(e)))
            trace = None
    emit(ev if chain is None else ChainEvent(chain, ev))
    return trace


class ChatSession:
    """The app's worker on a local engine: a chat's prompts, each run as its chains on the engine
    (started, and started again when the model changes, by `engine_factory`), their events handed
    to the app as they happen, every one written to the trace."""

    def __init__(self, *, engine_factory: Callable[[str | None], Engine], model: str | None = None,
                 classifier: CertaintyClassifier | None = None,
                 trace_opener: Callable[[Engine, SamplerParams], TraceSink | None] | None = None):
        self._factory = engine_factory
        self._model = model
        self._engine: Engine | None = None
        self._engine_model: str | None = None
        self._vocab: Vocab | None = None
        self._classifier = classifier
        self._opener = trace_opener
        self.trace: TraceSink | None = None  # once the first prompt opened it
        self.history: list[tuple[str, str]] = []
        self._lock = threading.Lock()  # one prompt (or engine start) at a time
        self._cancel = threading.Event()
        self._resume = threading.Event()
        self._resume.set()
        self.parked = threading.Event()  # set while a paused prompt's loop waits to be resumed (no step runs)

    # -- the UI thread ----------------------------------------------------------
    def cancel(self) -> None:
        """Stop the running prompt after its current step (its session ends `cancelled`)."""
        self._cancel.set()
        self._resume.set()

    def pause(self) -> None:
        self._resume.clear()

    def resume(self) -> None:
        self._resume.set()

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    # -- the worker thread --------------------------------------------------------
    def start_engine(self, model: str | None, emit: Emit) -> Engine | None:
        """Start (or restart, for another model) the engine; a failure becomes one Notice."""
        with self._lock:
            return self._ensure_engine(model, emit)

    def _ensure_engine(self, model: str | None, emit: Emit) -> Engine | None:
        if self._engine is not None and model != self._engine_model and self.trace is not None:
            # a trace holds one model's sessions and token text: another model needs another chat
            emit(Notice("input", f"this chat's trace records {self._engine.model}; to sample another model, "
                                 "start a new chat with --model (or use --no-trace)"))
            return None
        if self._engine is None or model != self._engine_model:
            self._engine = None
            try:
                engine = self._factory(model)
            except Exception as e:
                emit(Notice(*describe(e)))
                return None
            self._engine, self._engine_model = engine, model
            self._vocab = Vocab(engine.token_pieces)
            emit(EngineReady(engine.name, engine.model))
        return self._engine

    def run(self, prompt: str, params: SamplerParams, model: str | None, emit: Emit, chains: int = 1) -> None:
        """Sample one prompt with `chains` chains at once; every event goes to `emit` (as a ChainEvent
        where there are several chains) and to the trace.  The conversation goes on from the answer
        most chains agree on.  Never raises: a failure inside a session ends it with an `error`
        event, one outside it becomes a Notice."""
        with self._lock:
            self._cancel.clear()
            engine = self._ensure_engine(model, emit)
            if engine is None:
                return
            try:
                if self.trace is None and self._opener is not None:
                    self.trace = self._opener(engine, params)
                ids = engine.encode_prompt(prompt, self.history)
            except Exception as e:
                emit(Notice(*describe(e)))
                return
            texts: dict[int, str] = {}  # the chains that finished, by chain
            sids: dict[int, str] = {}
            try:
                drivers = chain_drivers(engine, params, ids, chains, prompt=prompt, classifier=self._classifier)
                for m, ev in run_chains(engine, drivers, concurrency=chains, cancel=self._should_stop,
                                        transient=True):
                    if isinstance(ev, SessionStart):
                        sids[m] = ev.session_id
                    self._record(ev, emit, m if chains > 1 else None, sids.get(m))
                    if isinstance(ev, SessionEnd) and ev.reason == "done":
                        texts[m] = ev.text
            except Exception:
                pass
            majority = vote([texts[m] for m in sorted(texts)]).majority
            if majority is not None:
                self.history.append((prompt, majority.answer))

    def _record(self, ev, emit: Emit, chain: int | None = None, sid: str | None = None) -> None:
        assert self._vocab is not None
        new = self._vocab.new_pieces(ev)
        if new:
            emit(VocabUpdate(new))
        self.trace = deliver(self.trace, ev, emit, chain, sid)

    def _should_stop(self) -> bool:
        if not self._resume.is_set():
            self.parked.set()  # the loop stops here, before its next engine step, until resumed
            self._resume.wait()
            self.parked.clear()
        return self._cancel.is_set()

    def close(self) -> None:
        """After the worker has stopped: close the trace (ending a session left open)."""
        with self._lock:
            if self.trace is not None:
                engine = self._engine
                if engine is not None:
                    self.trace.end_open_session("cancelled", lambda ids: display_text(engine, ids))
                self.trace.close()

