"""The shared test helpers check what they promise, so that a test built on them can fail: the
one-error-line check refuses every untidy failure, and GatedEngine holds its engine in both of its
ways and otherwise decodes what the synthetic engine decodes."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from helpers import GatedEngine, error_line, wait_for

from presto_tui.runtime.core.types import Request
from presto_tui.runtime.engines.synthetic import SyntheticEngine

LINE = "presto-tui: error: --alpha must lie in (0, 1000], got 0\n"
REQUEST = Request(prefix=(1, 2), n_new=3, seed=5, tau=1.0)


def result(exit_code: int = 2, stdout: str = "", stderr: str = LINE):
    """What CliRunner returns, as far as error_line reads it."""
    return SimpleNamespace(exit_code=exit_code, stdout=stdout, stderr=stderr, output=stdout + stderr)


def finish(engine, handle):
    """Step `engine` until `handle` is done; its tokens."""
    for _ in range(100):
        for h, proposal in engine.step():
            if h == handle:
                return proposal.tokens
    raise AssertionError("the request never finished")


def test_error_line_returns_the_message_after_the_prefix():
    assert error_line(result()) == "--alpha must lie in (0, 1000], got 0"
    assert error_line(result(exit_code=1, stdout="\n", stderr="\npresto-tui: error: disk full\n\n"), 1) == "disk full"


@pytest.mark.parametrize("res", [
    result(exit_code=1),
    result(exit_code=0),
    result(stderr=LINE + LINE),
    result(stderr=LINE.removeprefix("presto-tui: error: ")),
    result(stderr="warning: slow\n" + LINE),
    result(stdout="the cat sat\n"),
    result(stderr=LINE.replace("got 0", "got 0 Traceback (most recent call last)")),
    result(stderr=LINE.replace("got 0", "got 0. Try 'presto-tui run --help' for help.")),
    result(stderr="Usage: presto-tui run [OPTIONS] PROMPT\n" + LINE),
    result(stderr=""),
])
def test_error_line_refuses_every_untidy_failure(res):
    with pytest.raises(AssertionError):
        error_line(res)


def test_a_shut_engine_decodes_nothing_until_it_is_opened():
    expected = finish(plain := SyntheticEngine(), plain.submit(REQUEST))
    engine = GatedEngine(shut=True)
    h = engine.submit(REQUEST)
    assert [engine.step() for _ in range(5)] == [[]] * 5 and engine.progress(h) == 0 and engine.live == 1
    engine.open()
    assert finish(engine, h) == expected
    engine.shut()
    h = engine.submit(REQUEST)
    assert engine.step() == [] and engine.progress(h) == 0


def test_a_counted_engine_holds_each_call_until_it_is_let_through():
    expected = finish(plain := SyntheticEngine(), plain.submit(REQUEST))
    engine = GatedEngine(counted=True)
    with pytest.raises(AssertionError):
        GatedEngine().let_through()  # only a counted engine counts
    for call in (1, 2):  # each call (a batch sent to the idle engine) waits in its first step
        h = engine.submit(REQUEST)
        tokens: list = []
        stepping = threading.Thread(target=lambda h=h, tokens=tokens: tokens.extend(finish(engine, h)))
        stepping.start()
        try:
            wait_for(lambda: engine.waiting, f"call {call} to wait", timeout=10)
            assert engine.progress(h) == 0 and stepping.is_alive()
        finally:
            engine.let_through()
        stepping.join(timeout=30)
        assert not stepping.is_alive() and tokens == list(expected) and engine.calls == call
