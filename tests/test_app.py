"""The Textual app, driven as a person would with Pilot: replay from fixed traces, chat on the
synthetic backend (submit, navigate, inspect, pause, cancel, failures)."""

from __future__ import annotations

import time
from pathlib import Path

from presto_tui.logs.reader import read_trace
from presto_tui.runtime.params import SamplerParams
from presto_tui.runtime.synthetic import SyntheticBackend
from presto_tui.views.app import PrestoApp, replay_app
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
    return str(app.query_one(selector).content)


async def test_replay_navigates_rounds_and_nodes():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        timeline = app.state.all_rounds()
        assert app.cursor == timeline[0]
        await pilot.press("right_square_bracket")
        assert app.cursor == timeline[1]
        await pilot.press("end")
        assert app.cursor == timeline[-1]
        await pilot.press("home")
        assert app.cursor == timeline[0]
        tree = app.query_one("#tree", RoundTreeView)
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
        tree = app.query_one("#tree", RoundTreeView)
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
        tree = app.query_one("#tree", RoundTreeView)
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
        assert app.playing
        timeline = app.state.all_rounds()
        await wait_until(pilot, lambda: app.cursor == timeline[-1] and not app.playing, timeout=10)
        assert "⏸" in text_of(app, "#timeline")
        # stats show the numbers as of the round on screen
        await pilot.press("home")
        first = app.state.sessions[0]
        assert f"transitions {first.rounds[0].k_after}/" in text_of(app, "#stats")


async def test_replay_output_is_cut_at_the_first_eos():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        timeline = app.state.all_rounds()
        with_eos = [i for i, (s, r) in enumerate(timeline)
                    if 0 in app.state.sessions[s].rounds[r].tree.final_state.tokens]  # 0: the synthetic EOS
        assert with_eos, "the fixture should hold a state with an EOS"
        for _ in range(with_eos[0]):
            await pilot.press("right_square_bracket")
        tokens = list(app.current_round().tree.final_state.tokens)
        out = text_of(app, "#output-text")
        assert "<eos>" not in out and f"[EOS; {len(tokens) - tokens.index(0)} more tokens" in out


async def test_replay_in_80x24_keeps_every_panel():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        for sel in ("#tree", "#inspector", "#stats", "#output", "#timeline"):
            w = app.query_one(sel)
            assert w.region.width > 0 and w.region.height > 0, sel
        await pilot.resize_terminal(160, 50)
        await pilot.pause()
        assert app.query_one("#tree").region.width > 60


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


class SlowBackend(SyntheticBackend):
    """Synthetic model whose calls take a while and can be made to fail."""

    def __init__(self, delay=0.0, fail_on_call=None):
        super().__init__()
        self.delay, self.fail_on_call, self.calls = delay, fail_on_call, 0

    def generate(self, requests):
        self.calls += 1
        if self.fail_on_call == self.calls:
            raise MemoryError("out of memory (simulated)")
        time.sleep(self.delay)
        return super().generate(requests)


def chat_app(backend, **params):
    return PrestoApp(mode="chat", pieces=backend.token_pieces,
                     params=SamplerParams(max_new_tokens=24, steps=12, budget=4, **params),
                     backend_factory=lambda model: backend, title="test")


async def submit(pilot, app, prompt):
    app.query_one("#prompt").focus()
    await pilot.press(*prompt, "enter")


async def test_chat_runs_a_prompt_and_draws_its_rounds():
    backend = SlowBackend()
    app = chat_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: app.state.current and app.state.current.status == "done")
        await wait_until(pilot, lambda: not app.running)
        s = app.state.current
        assert s.summary.transitions == 12 and s.rounds
        assert app.cursor == (0, len(s.rounds) - 1)  # followed the live rounds
        tree = app.query_one("#tree", RoundTreeView)
        assert tree.round_tree is s.rounds[-1].tree
        await pilot.press("right")
        assert tree.selected in (1, 2)
        assert "node #" in text_of(app, "#inspector")
        assert "12/12" in text_of(app, "#stats")
        # multi-turn: the first answer enters the history of the next prompt
        assert app.history and app.history[0][0] == "the cat"


async def test_chat_cancel_takes_effect_within_one_round():
    backend = SlowBackend(delay=0.15)
    app = chat_app(backend, prefetch="none")  # one transition per round: 12 rounds
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: app.state.current and len(app.state.current.rounds) >= 2)
        await pilot.press("escape")
        rounds_at_cancel = len(app.state.current.rounds)
        await wait_until(pilot, lambda: app.state.current.status == "cancelled")
        assert len(app.state.current.rounds) <= rounds_at_cancel + 1
        await wait_until(pilot, lambda: not app.running)


async def test_chat_pause_and_resume():
    backend = SlowBackend(delay=0.1)
    app = chat_app(backend, prefetch="none")
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, app, "a dog")
        await wait_until(pilot, lambda: app.state.current and len(app.state.current.rounds) >= 1)
        await pilot.press("p")
        await pilot.pause(0.4)
        n = len(app.state.current.rounds)
        await pilot.pause(0.5)
        assert len(app.state.current.rounds) <= n + 1  # stopped after the current round
        await pilot.press("p")
        await wait_until(pilot, lambda: app.state.current.status == "done")


async def test_chat_worker_failure_is_shown_and_app_stays_usable():
    backend = SlowBackend(fail_on_call=3)
    app = chat_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: app.state.current and app.state.current.status == "error")
        await wait_until(pilot, lambda: not app.running)
        assert "out of memory" in text_of(app, "#stats")
        await submit(pilot, app, "a dog")  # the next prompt runs normally
        await wait_until(pilot, lambda: len(app.state.sessions) == 2 and app.state.current.status == "done")


async def test_settings_apply_to_the_next_prompt():
    backend = SlowBackend()
    app = chat_app(backend)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("ctrl+s")
        await pilot.pause()
        screen = app.screen
        budget = screen.query_one("#f-budget")
        budget.value = "0"
        await pilot.click("#save")
        assert "--budget must be >= 1" in str(screen.query_one("#settings-error").content)
        budget.value = "2"
        screen.query_one("#f-prefetch").value = "bfs"
        await pilot.pause(0.3)  # a second click at once would count as a double click
        await pilot.click("#save")
        await pilot.pause()
        assert app.params.budget == 2 and app.params.prefetch == "bfs"
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: app.state.current and app.state.current.status == "done")
        assert app.state.current.params["budget"] == 2
        assert all(len(r.tree.requests) <= 2 for r in app.state.current.rounds)


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
    from presto_tui.runtime.engines import BackendError

    attempts = []

    def factory(model):
        attempts.append(model)
        if len(attempts) == 1:
            raise BackendError("could not start --backend vllm on x: simulated")
        return SlowBackend()

    app = PrestoApp(mode="chat", pieces=lambda ids: [], params=SamplerParams(max_new_tokens=8, steps=4),
                    backend_factory=factory, title="test")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: attempts)
        await pilot.pause(0.2)
        assert app.backend is None and not app.running
        await submit(pilot, app, "the cat")  # the prompt starts the engine again
        await wait_until(pilot, lambda: app.state.current and app.state.current.status == "done")
        assert len(attempts) == 2


async def test_replay_shows_reader_warnings(tmp_path):
    raw = (DATA / "replay.jsonl").read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(raw[:-30])  # a session cut off mid-write
    app = replay_app(read_trace(cut))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert any("truncated final line" in n.message for n in app._notifications)
