"""Shared test helpers: small synthetic models and engines held by the test, trajectory collection,
the one-error-line check of the commands, and waiting on a condition (fixtures are in conftest.py)."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.session.events import BlockStart, RoundDone
from presto_tui.runtime.session.runner import run_session


def small_backend(vocab: int = 5, order: int = 2, seed: int = 1, sharpness: float = 1.5):
    return SyntheticEngine(SyntheticLM(vocab_size=vocab, order=order, seed=seed, sharpness=sharpness))


def run_chains_from(engine, params: list[SamplerParams], chain, *, concurrency: int = 64):
    """One chain per entry of `params` (their seeds differ), each advanced from `chain` to the end of its
    block; the ends in `params`' order.  Streaming chains share one engine loop, `concurrency` at a time
    (each chain's draws are keyed by its seed and its end does not depend on the width the others leave it:
    tests/test_coupling.py for any budget, tests/test_shared.py for chains at once); the other rules step
    their kernel, a chain at a time."""
    from presto_tui.runtime.prefetch.kernel import build_kernel

    if any(p.prefetch == "stream" for p in params):
        from presto_tui.runtime.session.loop import make_driver, run_chains

        assert all(p.prefetch == "stream" for p in params), "streaming and round rules in one call"
        drivers = [make_driver(engine, p.with_(max_new_tokens=chain.state.T, block_size=None), chain.state.prompt,
                               state=chain.state) for p in params]
        k = [0] * len(drivers)
        for i, ev in run_chains(engine, drivers, concurrency=concurrency):
            if isinstance(ev, RoundDone):
                k[i] = ev.k_after
        return [type(chain)(d.state, chain.block, n) for d, n in zip(drivers, k)]
    ends = []
    for p in params:
        kernel, c = build_kernel(p), chain
        while c.k < p.steps:
            c, _ = kernel.step(engine, c)
        ends.append(c)
    return ends


def trajectory(backend, params: SamplerParams, prompt=(1, 2)):
    """The chain's generated tokens after every block extension and every transition."""
    states, trees = [], []
    for ev in run_session(backend, params, list(prompt)):
        if isinstance(ev, BlockStart):
            states.append(("extend", ev.block, ev.tokens))
        elif isinstance(ev, RoundDone):
            trees.append(ev.tree)
            states.extend(s.tokens for s in ev.tree.states_after_steps())
    return states, trees


class RecordNoiseBackend(SyntheticEngine):
    """A synthetic model whose per-token records carry noise that depends on the request.

    On a real engine the same token in the same context gets slightly different
    log-probabilities and entropies from different calls (batch shapes change
    the float arithmetic).  Here the noise is a deterministic function of the
    request (its seed and prefix length), large enough to change MH decisions,
    so that a sampler which takes a token's records from another request than
    the sequential chain would is caught.  Tokens are untouched.
    """

    def __init__(self, *args, noise: float = 0.3, **kwargs):
        super().__init__(*args, **kwargs)
        self.noise = noise

    def finished(self, req, p):
        import numpy as np

        from presto_tui.runtime.core.types import Proposal

        rng = np.random.default_rng([req.seed, len(req.prefix), 0x4E])
        n = len(p.tokens)
        jitter = lambda: tuple(float(v) for v in self.noise * rng.uniform(-1, 1, n))
        lq, lp, h = jitter(), jitter(), jitter()
        return Proposal(p.tokens, tuple(a + b for a, b in zip(p.logq, lq)),
                        tuple(a + b for a, b in zip(p.logp, lp)),
                        tuple(max(0.0, a + b) for a, b in zip(p.entropy, h)),
                        tuple(tuple(a + b for a, b in zip(row, lq)) for row in p.logq_at))


def noisy_backend(vocab: int = 4, seed: int = 1, sharpness: float = 2.5, noise: float = 0.3):
    return RecordNoiseBackend(SyntheticLM(vocab_size=vocab, order=2, seed=seed, sharpness=sharpness), noise=noise)


class ScriptedEngine(SyntheticEngine):
    """The synthetic engine with calls that take a while or fail.

    A call is a batch submitted to an idle engine (a round, a sequential step,
    a block extension): call n is slowed by `delay` seconds, and the
    `fail_on_call`-th raises `error` as it is submitted.
    """

    def __init__(self, *args, delay: float = 0.0, fail_on_call: int | None = None,
                 error: BaseException | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.delay, self.fail_on_call, self.error = delay, fail_on_call, error
        self.calls = 0
        self._slow = False

    def submit(self, request):
        if not self.live:
            self.calls += 1
            self._slow = True
            if self.calls == self.fail_on_call:
                raise self.error or MemoryError("out of memory (simulated)")
        return super().submit(request)

    def step(self):
        if self._slow and self.delay:
            time.sleep(self.delay)
        self._slow = False
        return super().step()


class GatedEngine(ScriptedEngine):
    """The synthetic engine, held by the test in either (or both) of two ways:

    - shut: while shut, a step decodes nothing (after waiting up to 50 ms for the gate: a spinning
      thread would keep the Pilot from seeing the app idle), but the engine loop still
      turns, so chains join, leave and are cancelled as usual, until the test opens it again.
      `GatedEngine(shut=True)` starts shut; `shut()` and `open()` switch it.
    - counted: with `counted=True` each call (a batch sent to an idle engine, as ScriptedEngine
      counts them: a round, a sequential step, a block) waits in its first step until the test
      lets it through with `let_through()`, so that the screen can be checked between calls;
      `let_through(n)` lets n more through (a large n: all that are left); `waiting` is true while
      a call waits. A call not let through within `wait` seconds goes on anyway, so that a failed
      test does not hang.
    """

    def __init__(self, *args, shut: bool = False, counted: bool = False, wait: float = 20.0, **kwargs):
        super().__init__(*args, **kwargs)
        self._open = threading.Event()
        if not shut:
            self._open.set()
        self._calls_let_through = threading.Semaphore(0) if counted else None
        self.wait = wait
        self.waiting = False

    def shut(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def let_through(self, n: int = 1) -> None:
        if self._calls_let_through is None:
            raise AssertionError("let_through needs GatedEngine(counted=True)")
        self._calls_let_through.release(n)

    def step(self):
        if not self._open.is_set():
            self._open.wait(0.05)
            return []
        if self._calls_let_through is not None and self._slow:
            self.waiting = True
            try:
                self._calls_let_through.acquire(timeout=self.wait)
            finally:
                self.waiting = False
        return super().step()


# -- commands -------------------------------------------------------------------------------------

ERROR_PREFIX = "presto-tui: error: "


def error_line(res, code: int = 2) -> str:
    """The message of a command that failed as every command must (the house rule for bad input).

    `res` is a CliRunner result. Checks: exit code `code` (2 for bad input, 1 for a failure while
    running), exactly one non-blank line on stderr and it starts `presto-tui: error: `, nothing but
    blank lines on stdout, no traceback and no usage box anywhere. Returns the message after the
    prefix, for the test to check what it names.
    """
    assert res.exit_code == code, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), res.stderr
    assert not res.stdout.strip(), res.stdout
    for noise in ("Traceback", "Usage:", "Try '", "╭"):
        assert noise not in res.output, res.output
    return lines[0].removeprefix(ERROR_PREFIX)


def cli_error(*args: str, code: int = 2) -> str:
    """`presto-tui ARGS` run in this process, which must fail in one line: its error_line."""
    from typer.testing import CliRunner

    from presto_tui.cli import app

    return error_line(CliRunner().invoke(app, list(args)), code)


# -- waiting on a condition -----------------------------------------------------------------------

def wait_for(cond, what: str = "the condition", *, timeout: float = 120.0, every: float = 0.05):
    """Poll `cond` until it returns something true, and return that. The limit only stops a hang (it
    is far above any normal wait), so no test passes or fails on timing; `what` names the wait in
    the failure. In a Pilot test use `wait_until` instead: it lets the app run between polls."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


# -- driving the app (Pilot) ----------------------------------------------------------------------

async def not_a_double_click(pilot) -> None:
    """The one wait for time itself: Textual chains two clicks at one place within its threshold into a
    double click, so a test that means two single clicks lets that threshold go by."""
    await pilot.pause(pilot.app.CLICK_CHAIN_TIME_THRESHOLD)


async def wait_until(pilot, cond, timeout=10.0):
    """Poll `cond` between pauses: one pause is no reliable wait for background work (the Pilot
    counterpart of `wait_for`)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not reached in time")


def text_of(app, selector) -> str:
    """The text a widget shows (a Static's content, or what a custom widget renders)."""
    w = app.screen.query_one(selector)
    return str(w.content if hasattr(w, "content") else w.render())


def presto_command(*args: str) -> list[str]:
    """`presto-tui ARGS` as a child process that takes SIGINT as Ctrl-C, even where the tests were
    started with SIGINT ignored (a background job of a shell without job control passes that on,
    and Python then installs no KeyboardInterrupt of its own)."""
    return [sys.executable, "-c", "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from presto_tui.cli import main; main()", *args]


@contextmanager
def served(engine=None, trace: Path | None = None, **config):
    """`presto-tui serve`'s app in a thread, on `engine` (a synthetic one by default) with a trace
    where asked: (its URL, the presto Server, the uvicorn server)."""
    from presto_tui.logs.writer import TraceWriter
    from presto_tui.serve.app import ServeConfig, Server, create_app
    from presto_tui.serve.net import in_thread

    engine = engine or SyntheticEngine()
    writer = None
    if trace is not None:
        writer = TraceWriter(trace, command="serve", backend=engine.name, model=engine.model,
                             params=SamplerParams().to_dict(), pieces=engine.token_pieces, engine=dict(engine.info))
    server = Server(engine, ServeConfig(**config), trace=writer)
    with in_thread(create_app(server)) as (url, uv):
        yield url, server, uv
