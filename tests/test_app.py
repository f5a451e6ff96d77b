"""The Textual app, driven as a person would with Pilot: replay from fixed traces, chat on the
synthetic backend (submit, navigate, inspect, pause, cancel, failures)."""

from __future__ import annotations

import time
from pathlib import Path

from helpers import ScriptedEngine
from textual.widgets._toast import Toast

from presto_tui.logs.reader import read_trace
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.chat import ChatSession
from presto_tui.runtime.session.events import SessionEnd
from presto_tui.views.app import chat_app, replay_app
from presto_tui.views.widgets import RoundTreeView

DATA = Path(__file__).parent / "data"


async def wait_until(pilot, cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not reached in time")


def text_of(app, selector) -> str:
    return str(app.screen.query_one(selector).content)


async def test_replay_navigates_rounds_and_nodes():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        timeline = app.screen.state.all_rounds()
        assert app.screen.cursor == timeline[0]
        await pilot.press("right_square_bracket")
        assert app.screen.cursor == timeline[1]
        await pilot.press("end")
        assert app.screen.cursor == timeline[-1]
        await pilot.press("home")
        assert app.screen.cursor == timeline[0]
        tree = app.screen.query_one("#tree", RoundTreeView)
        assert tree.selected == 0
        # walk down the realized path and back up
        await pilot.press("right")
        first = tree.selected
        assert first in (1, 2) and tree.round_tree.node(first).on_path
        assert f"node #{first}" in text_of(app, "#inspector")
        await pilot.press("left")
        assert tree.selected == 0
        await pilot.press("down")  # reject child
        assert tree.selected == 2
        await pilot.press("left", "up")  # accept child
        assert tree.selected == 1
        inspector = text_of(app, "#inspector")
        assert "decision k=" in inspector and "cut" in inspector


async def test_replay_toggle_rounded_and_show_more():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        tree = app.screen.query_one("#tree", RoundTreeView)
        full_rows = len(tree.lay.rows)
        await pilot.press("f")
        assert tree.mode == "rounded"
        assert all(r.node.rounded or r.node.on_path or r.node.id == 0 for r in tree.lay.rows)
        assert len(tree.lay.rows) <= full_rows
        assert "[rounded]" in text_of(app, "#tree-title")
        await pilot.press("f")
        assert tree.mode == "full"
        before = tree.lay.hidden
        await pilot.press("plus")
        assert tree.lay.hidden <= before


async def test_replay_click_selects_a_node():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        tree = app.screen.query_one("#tree", RoundTreeView)
        target_row = next(i for i, r in enumerate(tree.lay.rows) if r.node.id != 0)
        node_id = tree.lay.rows[target_row].node.id
        await pilot.click("#tree", offset=(len(tree.lay.rows[target_row].prefix) + 1, target_row))
        assert tree.selected == node_id
        assert f"node #{node_id}" in text_of(app, "#inspector")


async def test_replay_plays_and_scrubs():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")  # 8 rounds/s
        await pilot.press("space")
        assert app.screen.playing
        timeline = app.screen.state.all_rounds()
        await wait_until(pilot, lambda: app.screen.cursor == timeline[-1] and not app.screen.playing, timeout=10)
        assert "⏸" in text_of(app, "#timeline")
        # stats show the numbers as of the round on screen
        await pilot.press("home")
        first = app.screen.state.sessions[0]
        assert f"transitions {first.rounds[0].k_after}/" in text_of(app, "#stats")


async def test_replay_output_is_cut_at_the_first_eos():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        timeline = app.screen.state.all_rounds()
        with_eos = [i for i, (s, r) in enumerate(timeline)
                    if 0 in app.screen.state.sessions[s].rounds[r].tree.final_state.tokens]  # 0: the synthetic EOS
        assert with_eos, "the fixture should hold a state with an EOS"
        for _ in range(with_eos[0]):
            await pilot.press("right_square_bracket")
        tokens = list(app.screen.current_round().tree.final_state.tokens)
        out = text_of(app, "#output-text")
        assert "<eos>" not in out and f"[EOS; {len(tokens) - tokens.index(0)} more tokens" in out


async def test_replay_in_80x24_keeps_every_panel():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        for sel in ("#tree", "#inspector", "#stats", "#output", "#timeline"):
            w = app.screen.query_one(sel)
            assert w.region.width > 0 and w.region.height > 0, sel
        await pilot.resize_terminal(160, 50)
        await pilot.pause()
        assert app.screen.query_one("#tree").region.width > 60


async def test_untrusted_text_appears_literally():
    app = replay_app(read_trace(DATA / "hostile.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        out = text_of(app, "#output-text")
        assert "[bold red]boom[/]" in out and "\\x1b[2J" in out and "\\x07" in out and "\\x9b" in out
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
        # and the inspector's diff of generated text likewise
        for _ in range(6):
            await pilot.press("right")
        ins = text_of(app, "#inspector")
        assert "\x1b" not in ins and "\x9b" not in ins


def SlowBackend(delay=0.0, fail_on_call=None):
    """Synthetic model whose calls take a while and can be made to fail."""
    return ScriptedEngine(delay=delay, fail_on_call=fail_on_call)


def make_chat(backend=None, factory=None, trace_opener=None, **params):
    session = ChatSession(engine_factory=factory or (lambda model: backend), trace_opener=trace_opener)
    app = chat_app(session, SamplerParams(**{**dict(max_new_tokens=24, steps=12, budget=4), **params}),
                   backend="synthetic", model=None)
    return app, session


def toasts(app) -> list[str]:
    """The notifications a person sees on screen now."""
    return [str(t.render()) for t in app.screen.query(Toast)]


async def submit(pilot, app, prompt):
    app.screen.query_one("#prompt").focus()
    await pilot.press(*prompt, "enter")


async def test_chat_runs_a_prompt_and_draws_its_rounds():
    backend = SlowBackend()
    app, session = make_chat(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        scr = app.screen
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.status == "done")
        await wait_until(pilot, lambda: not scr.running)
        s = scr.state.current
        assert s.summary.transitions == 12 and s.rounds
        assert scr.cursor == (0, len(s.rounds) - 1)  # followed the live rounds
        tree = scr.query_one("#tree", RoundTreeView)
        assert tree.round_tree is s.rounds[-1].tree
        await pilot.press("right")
        assert tree.selected in (1, 2)
        assert "node #" in text_of(app, "#inspector")
        assert "12/12" in text_of(app, "#stats")
        # token text came from the worker's vocabulary, not placeholders
        assert "<" not in text_of(app, "#output-text").split("\n", 1)[1]
        # multi-turn: the first answer enters the history of the next prompt
        assert session.history and session.history[0][0] == "the cat"


async def test_chat_cancel_takes_effect_within_one_round():
    backend = SlowBackend(delay=0.15)
    app, _ = make_chat(backend, prefetch="none")  # one transition per round: 12 rounds
    async with app.run_test(size=(100, 30)) as pilot:
        scr = app.screen
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and len(scr.state.current.rounds) >= 2)
        await pilot.press("escape")
        rounds_at_cancel = len(scr.state.current.rounds)
        await wait_until(pilot, lambda: scr.state.current.status == "cancelled")
        assert len(scr.state.current.rounds) <= rounds_at_cancel + 1
        await wait_until(pilot, lambda: not scr.running)


async def test_chat_pause_and_resume():
    backend = SlowBackend(delay=0.1)
    app, _ = make_chat(backend, prefetch="none")
    async with app.run_test(size=(100, 30)) as pilot:
        scr = app.screen
        await submit(pilot, app, "a dog")
        await wait_until(pilot, lambda: scr.state.current and len(scr.state.current.rounds) >= 1)
        await pilot.press("p")
        await pilot.pause(0.4)
        n = len(scr.state.current.rounds)
        await pilot.pause(0.5)
        assert len(scr.state.current.rounds) <= n + 1  # stopped after the current round
        await pilot.press("p")
        await wait_until(pilot, lambda: scr.state.current.status == "done")


async def test_chat_worker_failure_is_shown_once_and_app_stays_usable():
    backend = SlowBackend(fail_on_call=3)
    app, _ = make_chat(backend)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        scr = app.screen
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.status == "error")
        await wait_until(pilot, lambda: not scr.running)
        assert "out of memory" in text_of(app, "#stats")
        await pilot.pause(0.2)
        assert sum("out of memory" in t for t in toasts(app)) == 1  # one toast per failure
        await submit(pilot, app, "a dog")  # the next prompt runs normally
        await wait_until(pilot, lambda: len(scr.state.sessions) == 2 and scr.state.current.status == "done")


async def test_settings_apply_to_the_next_prompt():
    backend = SlowBackend()
    app, _ = make_chat(backend)
    async with app.run_test(size=(100, 40)) as pilot:
        scr = app.screen
        await pilot.press("ctrl+s")
        await pilot.pause()
        settings = app.screen
        budget = settings.query_one("#f-budget")
        budget.value = "0"
        await pilot.click("#save")
        assert "--budget must lie in [1, 4096]" in str(settings.query_one("#settings-error").content)
        budget.value = "2"
        settings.query_one("#f-prefetch").value = "bfs"
        await pilot.pause(0.3)  # a second click at once would count as a double click
        await pilot.click("#save")
        await pilot.pause()
        assert scr.params.budget == 2 and scr.params.prefetch == "bfs"
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.status == "done")
        assert scr.state.current.params["budget"] == 2
        assert all(len(r.tree.requests) <= 2 for r in scr.state.current.rounds)


async def test_enter_in_a_settings_field_saves_and_is_not_a_prompt(tmp_path):
    backend = SlowBackend()
    app, _ = make_chat(backend)
    async with app.run_test(size=(100, 40)) as pilot:
        scr = app.screen
        await pilot.press("ctrl+s")
        await pilot.pause()
        app.screen.query_one("#f-budget").focus()
        await pilot.press("ctrl+u", "2", "0", "enter")
        await pilot.pause(0.3)
        assert app.screen is scr and scr.params.budget == 20
        assert scr.state.current is None and not scr.running  # nothing was sampled


async def test_help_screen_lists_bindings():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert type(app.screen).__name__ != "HelpScreen"


def test_no_textual_in_views_state_and_layout():
    import subprocess
    import sys

    code = ("import sys, presto_tui.views.state, presto_tui.views.layout; "
            "sys.exit(int(any(m.split('.')[0] == 'textual' for m in sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0



async def test_chat_engine_start_failure_is_reported_and_retried():
    from presto_tui.errors import EngineError

    attempts = []

    def factory(model):
        attempts.append(model)
        if len(attempts) == 1:
            raise EngineError("could not start --backend vllm on x: simulated")
        return SlowBackend()

    app, _ = make_chat(factory=factory, max_new_tokens=8)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        scr = app.screen
        await wait_until(pilot, lambda: attempts)
        await pilot.pause(0.2)
        assert any("simulated" in t for t in toasts(app)) and not scr.running
        await submit(pilot, app, "the cat")  # the prompt starts the engine again
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.status == "done")
        assert len(attempts) == 2


async def test_quit_while_a_call_is_in_flight_ends_the_session_cancelled(tmp_path):
    from presto_tui.logs.writer import TraceWriter

    backend = SlowBackend(delay=0.3)
    path = tmp_path / "chat.jsonl"

    def opener(engine, params):
        return TraceWriter(path, command="chat", backend=engine.name, model=engine.model,
                           params=params.to_dict(), pieces=engine.token_pieces)

    app, session = make_chat(backend, trace_opener=opener, prefetch="none")
    async with app.run_test(size=(100, 30)) as pilot:
        scr = app.screen
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.rounds)
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: not scr.running, timeout=10)
    session.close()
    (sess,) = read_trace(path).sessions
    assert isinstance(sess.events[-1], SessionEnd) and sess.events[-1].reason == "cancelled"
    assert sess.summary().status == "cancelled"


async def test_replay_shows_reader_warnings(tmp_path):
    raw = (DATA / "replay.jsonl").read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(raw[:-30])  # a session cut off mid-write
    app = replay_app(read_trace(cut))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.pause()
        assert any("truncated final line" in t for t in toasts(app))
