"""Where keys go in the app, driven with Pilot as a person would: typing never acts as a key,
Tab moves between the panes and marks the focused one, quitting asks while a prompt runs, the
settings open on their first field; and what the screen says after a cancel, of an export into
a file, and in narrow terminals."""

from __future__ import annotations

import itertools

import pytest
from test_app import DATA, SlowBackend, make_chat, submit, text_of, toasts, wait_until
from textual.geometry import Region

from presto_tui.logs.reader import read_trace
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.prefetch.tree import NodeStatus
from presto_tui.runtime.session.events import RoundDone, SessionEnd
from presto_tui.runtime.session.runner import run_session
from presto_tui.runtime.session.vocab import event_token_ids
from presto_tui.views.app import replay_app
from presto_tui.views.dialogs.quit import ConfirmQuitScreen
from presto_tui.views.screens.overview import OverviewScreen
from presto_tui.views.state.layout import LEGEND, symbol
from presto_tui.views.state.reducer import AppState
from presto_tui.views.widgets.tree import RoundTreeView


def shown_lines(widget) -> list[str]:
    """The lines a widget puts on screen (after its own cropping and ellipses)."""
    w, h = widget.size
    return [strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, w, h))]


# -- typing goes where a person types -----------------------------------------------------------------

# every single-letter key of the round view and the chat, and the issue's own words
TYPED = "a dog ran home; the cat [sat] on + - / n N g f p q i o e c s h j k l ?"


async def test_typing_while_a_prompt_runs_goes_into_the_prompt(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an export would land in exports/ here
    app, session = make_chat(SlowBackend(delay=0.2), prefetch="none")  # 12 calls: a few seconds
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        prompt = scr.query_one("#prompt")
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.rounds)
        assert app.focused is prompt
        await pilot.press(*TYPED)
        assert prompt.value == TYPED
        # no key acted: no dialog, no export, no clipboard, no pause, no quit
        assert app.screen is scr and app.is_running and not session.paused
        assert not (tmp_path / "exports").exists() and not app.clipboard
        assert scr.tree_view.mode == "full" and scr.search is None
        await wait_until(pilot, lambda: scr.state.current.status == "done")
        # on the tree, the same letters are keys
        await pilot.press("tab")
        assert app.focused is scr.tree_view
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_tab_moves_between_the_panes_in_order_and_marks_the_focused_one():
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        prompt = scr.query_one("#prompt")
        assert app.focused is prompt
        assert "Tab moves to the tree, where keys act" in prompt.placeholder
        forward = []
        for _ in range(4):
            await pilot.press("tab")
            forward.append(app.focused.id)
        assert forward == ["tree", "right", "output", "prompt"]
        back = []
        for _ in range(4):
            await pilot.press("shift+tab")
            back.append(app.focused.id)
        assert back == ["output", "right", "tree", "prompt"]
        # each pane looks different while it has the focus
        marks = {"tree": lambda: scr.query_one("#tree-title").styles.background,
                 "right": lambda: scr.query_one("#right").styles.border_left,
                 "output": lambda: scr.query_one("#output").styles.border_top}
        await pilot.pause()
        blurred = {pane: look() for pane, look in marks.items()}
        for pane in ("tree", "right", "output"):
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused.id == pane
            for other, look in marks.items():
                assert (look() != blurred[other]) == (other == pane), (pane, other)


async def test_escape_in_the_prompt_cancels_the_run_and_keeps_what_was_typed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app, _ = make_chat(SlowBackend(delay=0.4), prefetch="none")  # long enough to be cancelled
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        prompt = scr.query_one("#prompt")
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.rounds)
        await pilot.press(*"next one", "escape")
        await wait_until(pilot, lambda: scr.state.current.status == "cancelled")
        await wait_until(pilot, lambda: not scr.running)
        assert prompt.value == "next one" and app.focused is prompt
        await pilot.press("enter")  # what was typed is the next prompt
        await wait_until(pilot, lambda: len(scr.state.sessions) == 2 and scr.state.current.status == "done")
        assert scr.state.current.start.prompt == "next one"


# -- quitting --------------------------------------------------------------------------------------------

async def test_quitting_while_a_prompt_runs_asks_first(tmp_path):
    from presto_tui.logs.writer import TraceWriter

    path = tmp_path / "chat.jsonl"

    def opener(engine, params):
        return TraceWriter(path, command="chat", backend=engine.name, model=engine.model,
                           params=params.to_dict(), pieces=engine.token_pieces)

    app, session = make_chat(SlowBackend(delay=0.5), trace_opener=opener, prefetch="none")  # runs for 6 s
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.rounds)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmQuitScreen)
        assert "A prompt is running: quit and end its session as cancelled? (y/n)" in text_of(app, "Static")
        await pilot.press("enter")  # the focus is on "keep running": a stray Enter loses nothing
        await pilot.pause()
        assert app.screen is scr and app.is_running and scr.running
        # q on the tree asks too; escape keeps the run
        await pilot.press("tab", "q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmQuitScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is scr and app.focused is scr.tree_view and scr.running
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("y")
        await wait_until(pilot, lambda: not scr.running, timeout=10)
    session.close()
    (sess,) = read_trace(path).sessions
    assert isinstance(sess.events[-1], SessionEnd) and sess.events[-1].reason == "cancelled"


async def test_ctrl_q_twice_quits_while_a_prompt_runs():
    app, _ = make_chat(SlowBackend(delay=0.5), prefetch="none")
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.rounds)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmQuitScreen)
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: not scr.running, timeout=10)
        assert scr.state.current.status == "cancelled"


@pytest.mark.parametrize("dialog", [None, "ctrl+s", "f1"])
async def test_with_nothing_running_ctrl_q_quits_at_once_from_anywhere(dialog):
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(120, 40)) as pilot:
        if dialog:
            await pilot.press(dialog)
            await pilot.pause()
            assert app.screen.is_modal
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running


# -- settings --------------------------------------------------------------------------------------------

async def test_settings_open_with_the_first_field_focused():
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(100, 40)) as pilot:
        scr = app.screen
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "f-sampler"
        await pilot.press("end", *"x", "enter")  # typing goes into it; Enter saves (and refuses this)
        await pilot.pause()
        assert app.focused.value == "powermhx" and "sampler" in text_of(app, "#settings-error")
        await pilot.press("backspace", "enter")
        await pilot.pause()
        assert app.screen is scr


# -- after a cancel, nothing shows as still decoding ------------------------------------------------------

def cancelled_stream_events():
    """A streaming session cancelled while its last recorded epoch had a request still decoding.

    The synthetic engine is deterministic, so each cancel point gives the same events; the first
    point that leaves a live node in the last epoch is taken."""
    params = SamplerParams(prefetch="stream", max_new_tokens=48, steps=16, budget=8)
    for stop in range(10, 400, 3):
        engine = SyntheticEngine()
        checks = itertools.count()
        events = list(run_session(engine, params, engine.encode_prompt("the cat"), prompt="the cat",
                                  cancel=lambda checks=checks, stop=stop: next(checks) >= stop))
        rounds = [ev for ev in events if isinstance(ev, RoundDone)]
        if rounds and isinstance(events[-1], SessionEnd) and events[-1].reason == "cancelled" and any(
                rec.status == NodeStatus.LIVE for rec in rounds[-1].tree.table.values()):
            ids = sorted({i for ev in events for i in event_token_ids(ev)})
            return events, dict(zip(ids, engine.token_pieces(ids)))
    raise AssertionError("no cancel point left a request decoding in the last epoch")


def test_a_session_that_ended_has_no_request_still_decoding():
    events, _ = cancelled_stream_events()
    recorded = [ev for ev in events if isinstance(ev, RoundDone)]
    live = {i: rec for i, rec in recorded[-1].tree.table.items() if rec.status == NodeStatus.LIVE}
    state = AppState()
    for ev in events:
        state.apply(ev)
    (s,) = state.sessions
    assert s.status == "cancelled"
    last = s.rounds[-1].tree
    assert not any(rec.status == NodeStatus.LIVE for rec in last.table.values())
    for i in live:  # aborted where they were, with what they had decoded
        v = last.node(i)
        assert v.status == NodeStatus.ABORTED and last.requests[v.decision.request].done is not None
    assert s.rounds[:-1] == recorded[:-1]  # earlier epochs are as they were recorded


async def test_after_a_cancel_the_tree_shows_no_request_decoding():
    events, pieces = cancelled_stream_events()
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(140, 40)) as pilot:
        scr = app.screen
        scr.state.vocab.update(pieces)
        for ev in events:  # as the worker would send them
            scr._emit(ev)
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.status == "cancelled")
        tree = scr.query_one("#tree", RoundTreeView)
        await wait_until(pilot, lambda: tree.round_tree is scr.state.current.rounds[-1].tree)
        rows = shown_lines(tree)
        assert not any("decoding" in row for row in rows) and any("⊘" in row and "aborted at" in row for row in rows)


# -- exports ---------------------------------------------------------------------------------------------

async def test_an_export_into_a_file_says_it_is_a_file(tmp_path):
    from test_app import export_to

    (tmp_path / "exports").write_text("x")
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await export_to(pilot, app, tmp_path / "exports", "t")
        await export_to(pilot, app, tmp_path / "exports" / "trees", "j")
        said = toasts(app)
        assert sum("exports is a file, not a folder" in t for t in said) == 2, said
        assert not any("File exists" in t or "Not a directory" in t for t in said)


# -- the tree's title and legend in narrow terminals -------------------------------------------------------

@pytest.mark.parametrize("size", [(140, 40), (120, 40), (80, 40), (80, 24)])
async def test_the_tree_title_and_legend_are_not_cut(size):
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        scr = app.screen
        hidden = scr.tree_view.lay.hidden
        assert hidden  # the first round of this trace hides nodes of low reach
        title = shown_lines(scr.query_one("#tree-title"))
        assert "…" not in "".join(title), title
        assert f"{hidden:,} hidden (+ more)" in "\n".join(title) and "[full] reach >= 1e-03" in "\n".join(title)
        assert title[0].startswith("round 1/")
        legend = scr.query_one("#legend")
        if size[1] < 30:
            assert not legend.display  # a short terminal gives the legend's rows to the tree (it is in the help)
            return
        lines = shown_lines(legend)
        assert "…" not in "".join(lines) and len(lines) <= 3, lines
        entries = [f"{symbol(kind) if kind != 'path' else '▶'} {name}" for kind, name in LEGEND]
        assert [e for e in entries if any(e in line for line in lines)] == entries, lines
        assert lines[-1].endswith("⊘ aborted")


async def test_a_live_title_does_not_shrink_while_a_prompt_runs():
    """The in-flight part of a chat's title comes and goes every round: the tree must not jump."""
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        title = scr.query_one("#tree-title")
        long = scr._where() + " · in flight: 8 requests, 120/700 tokens decoded"
        title.show(long, scr.tree_view, steady=True)
        await pilot.pause()
        tall = title.region.height
        title.show(scr._where(), scr.tree_view, steady=True)
        await pilot.pause()
        assert title.region.height == tall
        title.show(scr._where(), scr.tree_view, steady=False)
        await pilot.pause()
        assert title.region.height < tall


def test_a_text_field_turns_off_the_actions_of_printable_keys_only():
    """A focused prompt or search bar types letters: the actions of a round view's printable keys
    (its own and its subclass's) are off meanwhile, those of ctrl and escape keys are not."""
    from presto_tui.views.screens.chat import ChatScreen
    from presto_tui.views.screens.replay import ReplayScreen
    from presto_tui.views.screens.round import typed, typed_actions

    assert [typed(k) for k in ("o", "N", "plus", "minus", "slash", "left_square_bracket", "space", "less_than_sign")] \
        == [True] * 8
    assert not any(typed(k) for k in ("escape", "ctrl+s", "enter", "tab", "home", "f1"))
    every = {"round", "overview", "chains", "search", "search_step", "goto", "export", "compare", "tokens", "history",
             "toggle_view", "reach"}
    assert typed_actions(ChatScreen) == every | {"pause", "focus_prompt"}  # not settings (ctrl+s), cancel (escape)
    assert typed_actions(ReplayScreen) == every | {"play", "speed"}
