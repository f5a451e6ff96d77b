"""Sampling from Python: many prompts at once on one engine, typed results, events as they happen.

    import presto_tui

    engine = presto_tui.Engine(backend="synthetic")
    results = presto_tui.sample(engine, ["the cat", "a dog"], presto_tui.Params(steps=8), chains=4,
                                trace="sessions/nb.jsonl")
    results[0].text, results[0].answer, results[0].diagnostics.warnings

    for session, event in presto_tui.stream(engine, "the cat"):      # synchronous
        ...

    async with engine.session("the cat") as session:                # asynchronous, with cancel
        async for number, event in session:
            if ...: session.cancel()
        result = await session.result()

Every session runs exactly as `presto-tui run` runs it (the same drivers on the same engine
loop): the same prompt, parameters and seed give the same tokens.  Chain m of a prompt runs
on the seed `--chains` gives it (chain 1 keeps the seed).  Sessions, chains, blocks and
transitions are numbered from 1, as everywhere (docs/numbering.md); the events themselves are
the trace's records, whose indices count from 0 (`Transition.block`, `.k`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from presto_tui.api.params import Params  # (the public name: its signatures show it)
from presto_tui.errors import InputError
from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.names import unknown_name
from presto_tui.runtime.core.params import SamplerParams, params_from
from presto_tui.runtime.core.spec import SAMPLER_PARAMS, Limit, ParamError
from presto_tui.runtime.session.chains import CHAINS, chain_drivers
from presto_tui.runtime.session.cost import StepCost
from presto_tui.runtime.session.diagnostics import ChainsReport, chains_report, require
from presto_tui.runtime.session.events import Event, SessionEnd, SessionError, SessionStart
from presto_tui.runtime.session.loop import EngineLoop, default_concurrency, display_text, run_chains
from presto_tui.runtime.session.summary import SessionSummary

__all__ = ["CONCURRENCY", "ChainResult", "Job", "Result", "Session", "SessionEvent", "sample", "stream", "stream_jobs"]

CONCURRENCY = Limit(1, 256, integer=True)  # sessions at once on one engine


class SessionEvent(NamedTuple):
    """An event of session number `session` (from 1 in the run: session s is chain (s - 1) % chains + 1
    of prompt (s - 1) // chains + 1)."""

    session: int
    event: Event


@dataclass(frozen=True)
class ChainResult:
    """One session's outcome: a chain of an MH sampler, or a baseline's answer."""

    chain: int  # from 1, as `summary.chain`, the DataFrames and every screen count it
    session_id: str
    status: str  # done, cancelled or error
    text: str  # the response a user gets: up to and excluding EOS
    tokens: tuple[int, ...]  # the final state's tokens (an MH chain's n tokens, EOS and after included)
    summary: SessionSummary  # every number `presto-tui run` prints, from the session's events

    @property
    def error(self) -> str:
        return self.summary.error

    @property
    def log_likelihood(self) -> float | None:
        """Mean log p0 per token of the response (paper eq. 21)."""
        return self.summary.answer_loglik

    @property
    def confidence(self) -> float | None:
        """Mean confidence of the response (paper eq. 22)."""
        return self.summary.answer_confidence

    def to_dict(self) -> dict:
        return {"chain": self.chain, **self.summary.to_dict()}

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 40 else self.text[:39] + "…"
        return f"ChainResult(chain={self.chain}, {self.status}, text={text!r})"


@dataclass(frozen=True)
class Result:
    """A prompt's outcome: its chains (one unless `chains=M`), their diagnostics, the trace."""

    prompt: str
    chains: tuple[ChainResult, ...]
    diagnostics: ChainsReport | None  # M >= 2: split R-hat, ESS, MCSE per block and the vote
    trace: Path | None

    @property
    def text(self) -> str:
        """Chain 1's response (the single chain's, with one)."""
        return self.chains[0].text

    @property
    def tokens(self) -> tuple[int, ...]:
        return self.chains[0].tokens

    @property
    def answer(self) -> str:
        """The response most chains agree on (self-consistency's vote); chain 1's with one chain."""
        if self.diagnostics is None or self.diagnostics.vote.majority is None:
            return self.text
        return self.diagnostics.vote.majority.answer

    @property
    def status(self) -> str:
        """done when every chain finished; else the first other status."""
        return next((c.status for c in self.chains if c.status != "done"), "done")

    def __repr__(self) -> str:
        clip = lambda t: t if len(t) <= 40 else t[:39] + "…"
        return (f"Result(prompt={clip(self.prompt)!r}, {self.status}, {len(self.chains)} chain"
                f"{'s' if len(self.chains) != 1 else ''}, answer={clip(self.answer)!r})")

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"prompt": self.prompt, "text": self.text, "answer": self.answer,
                               "status": self.status, "trace": str(self.trace) if self.trace else None,
                               "chains": [c.to_dict() for c in self.chains]}
        if self.diagnostics is not None:
            out["diagnostics"] = self.diagnostics.to_dict()
        return out


# -- the arguments every entry point takes ------------------------------------------------------

def as_params(params: Params | SamplerParams | dict | None) -> SamplerParams:
    """Params as given (checked), from a dict of values (read as a request's are), or the defaults."""
    if params is None:
        return SamplerParams().validate()
    if isinstance(params, SamplerParams):
        return params.validate()
    if isinstance(params, dict):
        known = [p.name for p in SAMPLER_PARAMS]
        for key in params:
            if key not in known:  # (a typo would otherwise sample with the default, silently)
                raise ParamError(unknown_name("parameter", key, known, "; presto_tui.SPEC lists them"), param=str(key))
        return params_from(params, naming=lambda name: name, strict=True)
    raise InputError(f"params should be presto_tui.Params or a dict of parameter values, got {type(params).__name__}")


def as_prompts(prompts: str | Sequence[str]) -> list[str]:
    items = [prompts] if isinstance(prompts, str) else list(prompts)
    if not items:
        raise InputError("no prompts given")
    for i, p in enumerate(items):
        if not isinstance(p, str) or not p.strip():
            raise InputError(f"prompt {i + 1} is empty or not text")
    return items


def _runtime(engine: Any):
    """The engine the samplers drive: an `Engine`'s, or one given as it is (the front-ends')."""
    return getattr(engine, "runtime", engine)


def _lock(engine: Any) -> threading.Lock:
    """An `Engine`'s lock (one run at a time uses it); a runtime engine's callers take care themselves."""
    lock = getattr(engine, "lock", None)
    return lock if lock is not None else threading.Lock()


def _open(trace: str | Path | bool | None, engine, params: SamplerParams, command: str):
    """A TraceWriter for `trace`: a path, True (sessions/<time>-<command>.jsonl), or None/False (none)."""
    if trace is None or trace is False:
        return None
    from presto_tui.logs.writer import TraceWriter, default_trace_path

    path = default_trace_path(command) if trace is True else Path(trace)
    if path.exists():
        raise InputError(f"{path}: trace file exists already; choose another path")
    return TraceWriter(path, command=command, backend=engine.name, model=engine.model, params=params.to_dict(),
                       pieces=engine.token_pieces, engine=dict(engine.info))


# -- synchronous ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Job:
    """One prompt's sessions for `stream_jobs`: `chains` chains (chain m on the seed `--chains` gives it)
    with these parameters; `ids`: its token ids where the caller has them (else the engine encodes
    `prompt`).  Jobs of one run may differ in parameters (eval's methods, lm-eval's requests).  `only`:
    just these chains (from 0), each on the seed it has among all `chains` (a resumed run's missing ones)."""

    prompt: str
    params: SamplerParams
    chains: int = 1
    ids: Sequence[int] | None = None
    only: tuple[int, ...] | None = None

    @property
    def sessions(self) -> int:
        return self.chains if self.only is None else len(self.only)


def stream_jobs(engine: Any, jobs: Sequence[Job], *, concurrency: int | None = None,
                classifier: CertaintyClassifier | None = None, trace: Any = None,
                cancel: Callable[[], bool] | None = None, transient: bool = False,
                command: str = "api", cost: StepCost | None = None) -> Iterator[SessionEvent]:
    """Every (session index, event) of the jobs' sessions on one engine loop, `concurrency` sessions
    at a time (default: enough to keep the engine's batch full, each job's chains together), in the
    order the loop emits them; sessions are numbered from 1, counting the jobs' chains in order (job
    1's chain 1, 2, ..., then job 2's; a job's `only` chains alone).  `trace`: a path, True for the
    default one, or an open TraceWriter (written as the events pass; Ctrl-C ends the open sessions
    `cancelled` in it).  `cancel`: polled before
    every engine step.  `transient`: also the events for a person watching (the batch in flight,
    the epoch so far), never written to a trace.  `cost`: the step costs the engine loop learns into
    (a benchmark reads what the run kept live from it)."""
    if not jobs:
        raise InputError("no prompts given")
    checked = [Job(j.prompt, as_params(j.params), j.chains, j.ids, j.only) for j in jobs]
    for j in checked:
        CHAINS.check("chains", j.chains)
    if any(j.chains > 1 for j in checked):
        require()
    runtime = _runtime(engine)
    sessions = sum(j.sessions for j in checked)
    widest = max(j.sessions for j in checked)
    at_once = concurrency or min(sessions, max(widest, default_concurrency(sessions, checked[0].params)))
    CONCURRENCY.check("concurrency", at_once)
    writer = trace if hasattr(trace, "write") else _open(trace, runtime, checked[0].params, command)
    from presto_tui.logs.writer import recorded

    def drivers():
        for j in checked:
            ids = list(j.ids) if j.ids is not None else runtime.encode_prompt(j.prompt)
            yield from chain_drivers(runtime, j.params, ids, j.chains, prompt=j.prompt, classifier=classifier,
                                     only=j.only)

    with _lock(engine):
        try:
            loop = EngineLoop(runtime, cost) if cost is not None else None
            for i, ev in recorded(run_chains(runtime, drivers(), concurrency=at_once, cancel=cancel,
                                             transient=transient, loop=loop), writer):
                yield SessionEvent(i + 1, ev)  # (the loop's index from 0; a person's and a program's number from 1)
        except (KeyboardInterrupt, GeneratorExit):
            if writer is not None:  # the trace keeps every finished session and round
                writer.end_open_session("cancelled", lambda ids: display_text(runtime, ids))
            raise
        finally:
            if writer is not None and writer is not trace:
                writer.close()


def stream(engine: Any, prompts: str | Sequence[str], params: Params | dict | None = None, *,
           chains: int = 1, concurrency: int | None = None, classifier: CertaintyClassifier | None = None,
           trace: Any = None, cancel: Callable[[], bool] | None = None,
           transient: bool = False, command: str = "api") -> Iterator[SessionEvent]:
    """Every (session number, event) of the prompts' sessions as they happen, in the order the engine
    loop emits them (a session's own events in order, sessions interleaved); sessions are numbered
    from 1: session s is chain (s - 1) % chains + 1 of prompt (s - 1) // chains + 1.  `trace`: a path,
    True for the default one, or an open TraceWriter (written as the events pass; Ctrl-C ends the open
    sessions `cancelled` in it).  `cancel`: polled before every engine step.  `transient`: also the
    events for a person watching (the batch in flight, the epoch so far), never written to a trace."""
    p = as_params(params)
    jobs = [Job(text, p, chains) for text in as_prompts(prompts)]
    return stream_jobs(engine, jobs, concurrency=concurrency, classifier=classifier, trace=trace, cancel=cancel,
                       transient=transient, command=command)


class Collector:
    """Folds (session number from 1, event) pairs into each prompt's `Result` as they arrive."""

    def __init__(self, prompts: list[str], chains: int, trace: Path | None) -> None:
        self.prompts, self.chains, self.trace = prompts, chains, trace
        self.summaries: dict[int, SessionSummary] = {}
        self.ends: dict[int, Event] = {}
        self.sids: dict[int, str] = {}

    def add(self, i: int, ev: Event) -> None:
        if isinstance(ev, SessionStart):
            self.sids[i] = ev.session_id
            self.summaries[i] = SessionSummary()
        self.summaries.setdefault(i, SessionSummary()).update(ev)
        if isinstance(ev, (SessionEnd, SessionError)):
            self.ends[i] = ev

    def members(self, prompt: int) -> range:
        """The session numbers of prompt `prompt` (its index in the prompts, from 0)."""
        return range(prompt * self.chains + 1, (prompt + 1) * self.chains + 1)

    def finished(self, prompt: int) -> bool:
        return all(i in self.ends for i in self.members(prompt))

    def result(self, prompt: int) -> Result:
        members = self.members(prompt)
        summaries = [self.summaries.get(i, SessionSummary()) for i in members]
        chains = tuple(ChainResult(m, self.sids.get(i, ""), s.status, s.text, tuple(s.tokens), s)
                       for m, (i, s) in enumerate(zip(members, summaries), 1))
        report = chains_report(summaries) if self.chains > 1 else None
        return Result(self.prompts[prompt], chains, report, self.trace)


def sample(engine: Any, prompts: str | Sequence[str], params: Params | dict | None = None, *,
           chains: int = 1, concurrency: int | None = None, classifier: CertaintyClassifier | None = None,
           trace: Any = None, on_event: Callable[[int, Event], None] | None = None) -> list[Result]:
    """Sample every prompt with `chains` chains each on one engine (their sessions sharing its batch,
    as `presto-tui run` runs them); one `Result` per prompt, in prompt order.  A session that fails
    raises (after the trace has its `error` event); `on_event(number, event)` sees every event (sessions
    numbered from 1, as `stream` numbers them)."""
    texts = as_prompts(prompts)
    runtime = _runtime(engine)
    writer = trace if hasattr(trace, "write") else _open(trace, runtime, as_params(params), "api")
    collector = Collector(texts, chains, getattr(writer, "path", None))
    try:
        for i, ev in stream(engine, texts, params, chains=chains, concurrency=concurrency, classifier=classifier,
                            trace=writer):
            collector.add(i, ev)
            if on_event is not None:
                on_event(i, ev)
    finally:
        if writer is not None and writer is not trace:
            writer.close()
    return [collector.result(p) for p in range(len(texts))]


# -- asynchronous --------------------------------------------------------------------------------

_DONE = object()


class Session:
    """One prompt's sessions running on a thread of their own; `async for (index, event) in session`
    sees their events as they happen, `cancel()` ends them (`cancelled`, within one engine step),
    `await session.result()` is the prompt's `Result`.  Also an async context manager that cancels
    what is still running when the block is left."""

    def __init__(self, engine: Any, prompt: str, params: Params | dict | None = None, *,
                 chains: int = 1, classifier: CertaintyClassifier | None = None, trace: Any = None,
                 transient: bool = False) -> None:
        as_params(params)  # checked now, a bad value raising here rather than when it starts
        self._args = (engine, [prompt], params)
        self._kw = dict(chains=chains, classifier=classifier, trace=trace, transient=transient)
        self._cancel = threading.Event()
        self._queue: asyncio.Queue | None = None
        self._thread: threading.Thread | None = None
        self._collector = Collector([prompt], chains, None)
        self._error: BaseException | None = None
        self._finished: asyncio.Event | None = None
        self._exhausted = False  # every event has been read

    def cancel(self) -> None:
        self._cancel.set()

    def _start(self) -> None:
        if self._thread is not None:
            return
        loop = asyncio.get_running_loop()
        self._queue, self._finished = asyncio.Queue(), asyncio.Event()
        queue, finished = self._queue, self._finished

        def put(item: object) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            engine, prompts, params = self._args
            try:
                for item in stream(engine, prompts, params, cancel=self._cancel.is_set, **self._kw):
                    put(item)
            except BaseException as e:
                self._error = e
            finally:
                put(_DONE)
                loop.call_soon_threadsafe(finished.set)

        self._thread = threading.Thread(target=work, name="presto-session", daemon=True)
        self._thread.start()

    def __aiter__(self) -> AsyncIterator[SessionEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[SessionEvent]:
        if self._exhausted:
            return
        self._start()
        assert self._queue is not None
        while True:
            item = await self._queue.get()
            if item is _DONE:
                self._exhausted = True
                break
            assert isinstance(item, SessionEvent)
            self._collector.add(item.session, item.event)
            yield item
        if self._error is not None:
            raise self._error

    async def result(self) -> Result:
        """The prompt's Result once its sessions have ended (the events not yet read are read here)."""
        if not self._exhausted:
            async for _ in self:
                pass
        elif self._error is not None:
            raise self._error
        return self._collector.result(0)

    async def __aenter__(self) -> Session:
        self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()
        if self._finished is not None:
            await self._finished.wait()
