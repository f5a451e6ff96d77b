"""One engine loop for any number of chains (the repository's docs/architecture.md).

`EngineLoop` owns the engine while it runs: before every engine step it asks
each chain (a `Driver`) what to submit and what to abort, steps the engine
once, times the step (`StepCost`: what a step with n live requests costs,
shared by every chain), and hands each finished proposal to the chain that
asked for it.  Chains join and leave between steps: `run_chains` feeds it from
an iterator, `concurrency` at a time; a server feeds it from a queue.

Cancellation is checked before every engine step, so Ctrl-C in the app or an
Escape stops within one step; every open session then ends `cancelled` and
its live requests are aborted.  An engine failure ends every open session
with an `error` event before it propagates.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Hashable, Iterator, Sequence

from presto_tui.errors import EngineError, PrestoError, describe
from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.types import SeqState
from presto_tui.runtime.prefetch.stream.shared import Load, SharedBudget
from presto_tui.runtime.session.cost import StepCost
from presto_tui.runtime.session.driver import Driver, SessionDriver, check_context, display_text
from presto_tui.runtime.session.events import Event

__all__ = ["Driver", "EngineLoop", "InternalError", "SessionDriver", "StartFailed", "check_context", "display_text",
           "make_driver", "run_chains"]


class InternalError(PrestoError):
    kind = "internal"


class StartFailed(Exception):
    """A chain could not start: `events` end its session (with its error), `__cause__` says why."""

    def __init__(self, events: list[Event]):
        super().__init__("a chain could not start")
        self.events = events


@contextlib.contextmanager
def engine_faults():
    """What the engine raises is an engine failure (out of memory, a lost worker, a refused
    request), whatever its Python type."""
    try:
        yield
    except PrestoError:
        raise
    except Exception as e:
        raise EngineError(describe(e)[1]) from e


def make_driver(engine: Engine, params: SamplerParams, prompt_ids: Sequence[int], *, prompt: str = "",
                classifier: CertaintyClassifier | None = None, state: SeqState | None = None,
                **chain) -> SessionDriver:
    """The session `params` select, as its method makes it (`Method.driver`): an MH chain's under its
    prefetch rule (`classifier`: the epsilon classes' model; `state`: start the chain's first block
    from this state, no extension), or a one-shot method's.  `chain`: the chain's index, count and
    group under `--chains`."""
    method = params.method
    if method.chain:
        return method.driver(engine, params, prompt_ids, prompt=prompt, classifier=classifier, state=state, **chain)
    return method.driver(engine, params, prompt_ids, prompt=prompt, **chain)


Key = Hashable


class EngineLoop:
    """The engine and the chains on it; one thread calls its methods (a server queues its requests)."""

    def __init__(self, engine: Engine, cost: StepCost | None = None):
        self.engine = engine
        self.cost = cost or StepCost()
        self.active: dict[Key, SessionDriver] = {}
        self.budget = SharedBudget(self.load)  # the streaming chains' speculation, one budget for the engine
        self._owner: dict[int, Key] = {}  # engine handle -> chain
        self.snapshots = 0  # transient progress events built ...
        self.snapshot_s = 0.0  # ... and the seconds they took
        self._snapshots_after = 0.0  # (perf_counter) none before this: their share of the loop's time is bounded

    def add(self, key: Key, driver: SessionDriver) -> list[Event]:
        """Start a chain; its requests join the next step.  A chain that cannot start ends with
        its error event, and the error propagates."""
        driver.cost = self.cost
        driver.peers = lambda: len(self.active)
        driver.budget = self.budget
        self.active[key] = driver
        try:
            return driver.start()
        except Exception as e:
            del self.active[key]
            self.budget.leave(driver)
            raise StartFailed(driver.fail(e)) from e

    def cancel(self, key: Key) -> list[Event]:
        """End a chain as cancelled and abort its requests (a client went away, Escape, Ctrl-C)."""
        d = self.active.get(key)
        if d is None:
            return []
        events = d.cancel()
        self._drop(key)
        return events

    def _drop(self, key: Key) -> None:
        for h in self.active[key].handles():
            self.engine.abort(h)
        for h in [h for h, k in self._owner.items() if k == key]:  # and what the chain aborted itself
            del self._owner[h]
        self.budget.leave(self.active.pop(key))

    def load(self) -> Load:
        """What the engine's steps cost now (learned) and how many chains share them."""
        a, b, p = self.cost.plane()
        return Load(a, b, p, self.cost.turnover, len(self.active))

    def step(self, transient: bool | Callable[[Key], bool] = False) -> list[tuple[Key, Event]]:
        """One pass: every chain's aborts and submissions, one engine step, deliveries, advances.
        Chains that ended leave the loop.  `transient`: whether to add progress events (each chain's
        at most every SNAPSHOT_EVERY_S), for every chain or for those it says yes to (a server: the
        chains someone listens to).  Building one walks the chain's live tree, which grows with the
        chain (a streaming epoch of long states): after a pass whose progress events took t seconds,
        none is built for (1/SNAPSHOT_SHARE - 1) t, so that they never take more than that share of
        the loop's time, however long the chains."""
        out: list[tuple[Key, Event]] = []
        engine = self.engine
        taken = 0  # requests the engine takes before this step (each starts with its prefill)
        with engine_faults():
            for key, d in self.active.items():
                for h in d.to_abort():
                    if self._owner.pop(h, None) is not None:
                        d.aborted(h, engine.abort(h))
                for tag, req in d.to_submit():
                    h = engine.submit(req)
                    self._owner[h] = key
                    d.submitted(tag, h)
                    taken += 1
            live = engine.live
            if not live:
                raise InternalError("every chain is waiting but no request is live")
            t0 = engine.clock()
            finished = engine.step()
            t1 = engine.clock()
            self.cost.record(live, t1 - t0, taken)
            for d in self.active.values():
                d.stepped(t0, t1, live)
        for h, prop in finished:
            key = self._owner.pop(h, None)
            if key in self.active:
                self.active[key].delivered(h, prop)
        now = time.perf_counter()
        wants = transient if callable(transient) else (lambda _key: transient)
        snapshots = bool(transient) and now >= self._snapshots_after
        spent = 0.0
        for key in list(self.active):
            d = self.active[key]
            out.extend((key, ev) for ev in d.advance())
            if snapshots and wants(key):
                t0 = time.perf_counter()
                snap = d.snapshot(now)
                spent += time.perf_counter() - t0
                if snap is not None:
                    out.append((key, snap))
                    self.snapshots += 1
            if d.done:
                self._drop(key)
        if spent:
            self.snapshot_s += spent
            self._snapshots_after = time.perf_counter() + spent * (1 / SNAPSHOT_SHARE - 1)
        return out

    def fail_all(self, exc: BaseException) -> list[tuple[Key, Event]]:
        """Every open chain ends with an error event (none for Ctrl-C); their requests are aborted."""
        out: list[tuple[Key, Event]] = []
        for key in list(self.active):
            events = self.active[key].fail(exc) if not isinstance(exc, (KeyboardInterrupt, GeneratorExit)) else []
            with contextlib.suppress(Exception):  # the engine itself may be what failed
                self._drop(key)
            if (d := self.active.pop(key, None)) is not None:
                self.budget.leave(d)
            out.extend((key, ev) for ev in events)
        return out


SNAPSHOT_SHARE = 0.1  # progress events take at most about this share of an engine loop's time
BATCH_LIVE = 64  # requests an engine decodes at once for little more than one sequence
COST_POLICY_LIVE = 8  # what the cost policy keeps live on average, about (13 alone on a CPU's cost, 8 with 4 chains)


def default_concurrency(sessions: int, params: SamplerParams) -> int:
    """Enough sessions at once to keep about BATCH_LIVE requests live, never more than there are."""
    return max(1, min(sessions, BATCH_LIVE // max(1, params.method.width(params))))


def run_chains(engine: Engine, drivers: Iterator[SessionDriver] | Sequence[SessionDriver], *, concurrency: int = 1,
               cancel: Callable[[], bool] | None = None, transient: bool = False,
               loop: EngineLoop | None = None) -> Iterator[tuple[int, Event]]:
    """Run chains through one engine loop, `concurrency` at a time, in the order given.

    Yields (chain index, event); events of one chain come in order, chains interleave.
    """
    source = iter(drivers)
    loop = loop or EngineLoop(engine)
    started = itertools.count()
    exhausted = False

    def refill() -> Iterator[tuple[int, Event]]:
        nonlocal exhausted
        while not exhausted and len(loop.active) < concurrency:
            d = next(source, None)
            if d is None:
                exhausted = True
                break
            i = next(started)
            try:
                events = loop.add(i, d)
            except StartFailed as e:
                yield from ((i, ev) for ev in e.events)
                raise e.__cause__ from None  # type: ignore[misc]
            yield from ((i, ev) for ev in events)

    try:
        yield from refill()
        while loop.active:
            if cancel is not None and cancel():
                for i in list(loop.active):
                    yield from ((i, ev) for ev in loop.cancel(i))  # type: ignore[misc]
                return
            yield from loop.step(transient)  # type: ignore[misc]
            yield from refill()
    except BaseException as e:
        yield from loop.fail_all(e)  # type: ignore[misc]
        raise
