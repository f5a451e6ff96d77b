"""Shared test helpers: small synthetic models and trajectory collection."""

from __future__ import annotations

import sys

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.session.events import BlockStart, RoundDone
from presto_tui.runtime.session.runner import run_session


def small_backend(vocab: int = 5, order: int = 2, seed: int = 1, sharpness: float = 1.5):
    return SyntheticEngine(SyntheticLM(vocab_size=vocab, order=order, seed=seed, sharpness=sharpness))


def run_chain(engine, params: SamplerParams, chain):
    """Advance `chain` to the end of its block with the rule `params` select (the streaming rule
    through the engine loop, the others through their kernel)."""
    if params.prefetch == "stream":
        from presto_tui.runtime.session.events import RoundDone
        from presto_tui.runtime.session.loop import make_driver, run_chains

        driver = make_driver(engine, params.with_(max_new_tokens=chain.state.T, block_size=None),
                             chain.state.prompt, state=chain.state)
        k = 0
        for _, ev in run_chains(engine, [driver]):
            if isinstance(ev, RoundDone):
                k = ev.k_after
        return type(chain)(driver.state, chain.block, k)
    from presto_tui.runtime.prefetch.kernel import build_kernel

    kernel = build_kernel(params)
    while chain.k < params.steps:
        chain, _ = kernel.step(engine, chain)
    return chain


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
            import time

            time.sleep(self.delay)
        self._slow = False
        return super().step()


# -- driving the app (Pilot) ----------------------------------------------------------------------

async def wait_until(pilot, cond, timeout=10.0):
    """Poll `cond` between pauses: one pause is no reliable wait for background work."""
    import time

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
