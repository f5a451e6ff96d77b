"""The Textual app, driven as a person would with Pilot: replay from fixed traces, chat on the
synthetic backend (submit, navigate, inspect, pause, cancel, failures)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import GatedEngine, ScriptedEngine, not_a_double_click, text_of, wait_until
from textual.widgets._toast import Toast

from presto_tui.logs.reader import read_trace
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.chat import ChatSession
from presto_tui.runtime.session.events import SessionEnd
from presto_tui.views.app import chat_app, replay_app
from presto_tui.views.widgets.tree import RoundTreeView

DATA = Path(__file__).parent / "data"


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
        rt = tree.round_tree
        await pilot.press("right")
        first = tree.selected
        assert first in (rt.child(0, True), rt.child(0, False)) and rt.node(first).on_path
        assert f"node #{first}" in text_of(app, "#inspector")
        await pilot.press("left")
        assert tree.selected == 0
        await pilot.press("down")  # reject child
        assert tree.selected == rt.child(0, False) and rt.node(tree.selected).accept is False
        await pilot.press("left", "up")  # accept child
        assert tree.selected == rt.child(0, True) and rt.node(tree.selected).accept is True
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


async def test_a_revealed_hidden_node_stays_through_a_redraw_of_the_same_round():
    """A chat redraws its round at every frame of a run; a node revealed by navigating to it
    stays selected and shown (and the round is not laid out again)."""
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        tree = app.screen.query_one("#tree", RoundTreeView)
        await pilot.press("f")  # the rounded view hides what is not epsilon-rounded
        hidden = next((v for v in range(1, 2 ** 8) if tree.round_tree.node(v) is not None
                       and tree.lay.row_of(v) is None), None)
        assert hidden is not None
        assert tree.select(hidden)
        lay = tree.lay
        app.screen.redraw(keep_selection=True)
        await pilot.pause()
        assert tree.selected == hidden and tree.lay is lay and tree.lay.row_of(hidden) is not None


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
        await pilot.press("tab", "right")  # the prompt kept the focus: Tab moves to the tree
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


async def test_chat_worker_failure_is_shown_once_and_app_stays_usable():
    backend = SlowBackend(fail_on_call=3)  # the third batch submitted to an idle engine fails: sequential
    app, _ = make_chat(backend, prefetch="none")  # steps are such batches (streaming's overlap keeps it busy)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        scr = app.screen
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.status == "error")
        await wait_until(pilot, lambda: not scr.running)
        assert "out of memory" in text_of(app, "#stats")
        await wait_until(pilot, lambda: any("out of memory" in t for t in toasts(app)))
        await pilot.pause()
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
        assert str(settings.query_one("#settings-error").content) == \
            "budget N (N, auto, cost:N or fill:N) must lie in [1, 4096], got 0"  # the field named by its label
        budget.value = "2"
        settings.query_one("#f-prefetch").value = "bfs"
        await not_a_double_click(pilot)
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
        await wait_until(pilot, lambda: app.screen is scr)
        assert scr.params.budget == 20
        assert scr.state.current is None and not scr.running  # nothing was sampled


async def test_help_screen_lists_bindings():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert type(app.screen).__name__ != "HelpScreen"


def test_no_textual_in_the_views_state():
    import subprocess
    import sys

    code = ("import importlib, pkgutil, sys, presto_tui.views.state as p; "
            "[importlib.import_module(m.name) for m in pkgutil.iter_modules(p.__path__, p.__name__ + '.')]; "
            "assert 'presto_tui.views.state.reducer' in sys.modules; "
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
        await wait_until(pilot, lambda: any("simulated" in t for t in toasts(app)) and not scr.running)
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
        await pilot.press("ctrl+q", "y")  # y: quit and end the running prompt's session
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


# -- colours: class, path and selection are independent channels ------------------------------------

CLASS_VARS = {"accept": "mh-accept", "reject": "mh-reject", "uncertain": "mh-uncertain", "deferred": "mh-deferred"}


def symbol_cell(tree, y):
    """The style of the node's symbol on screen row y of the tree view (after gutter and connectors)."""
    row = tree.lay.rows[y + tree.scroll_offset.y]
    x = RoundTreeView.GUTTER + len(row.prefix)
    for seg in tree.render_line(y):
        if x < len(seg.text):
            return row, seg.style
        x -= len(seg.text)
    raise AssertionError("no symbol cell")


def rgb(colour):
    from textual.color import Color

    return Color.parse(colour).rgb if isinstance(colour, str) else colour.get_truecolor()[:3]


async def test_the_path_keeps_every_class_colour_and_selection_keeps_both():
    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(110, 40)) as pilot:
        tree = app.screen.query_one("#tree", RoundTreeView)
        await pilot.pause()
        kinds_on_path = set()
        base_bg = rgb(tree.rich_style.bgcolor)
        for y in range(min(tree.size.height, len(tree.lay.rows))):
            row, style = symbol_cell(tree, y)
            if row.kind in CLASS_VARS:
                assert rgb(style.color) == rgb(app.theme_variables[CLASS_VARS[row.kind]]), row
            assert (rgb(style.bgcolor) != base_bg) == row.node.on_path, row  # the path band, and only there
            if row.node.on_path:
                kinds_on_path.add(row.kind)
        assert {"accept", "reject", "uncertain", "deferred"} <= kinds_on_path
        # select a certain reject on the path: it keeps its class colour and the path band, and
        # is marked by the cursor and bold underline on top
        target = next(r for r in tree.lay.rows if r.node.on_path and r.kind == "reject")
        tree.select(target.node.id)
        await pilot.pause()
        y = tree.lay.row_of(target.node.id) - tree.scroll_offset.y
        _, style = symbol_cell(tree, y)
        assert rgb(style.color) == rgb(app.theme_variables["mh-reject"])
        assert rgb(style.bgcolor) != base_bg and style.bold and style.underline
        assert tree.render_line(y).text.startswith("❯")


def test_palette_has_light_variants_that_differ():
    from presto_tui.views.palette import theme_variables

    dark, light = theme_variables(True), theme_variables(False)
    assert set(dark) == set(light) and all(dark[k] != light[k] for k in CLASS_VARS.values())


async def test_light_theme_uses_the_light_palette():
    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        app.theme = "textual-light"
        await pilot.pause()
        from presto_tui.views.palette import theme_variables

        assert app.theme_variables["mh-accept"] == theme_variables(False)["mh-accept"]
        tree = app.screen.query_one("#tree", RoundTreeView)
        _, style = symbol_cell(tree, tree.lay.row_of(0) - tree.scroll_offset.y)
        assert rgb(style.color) == rgb(theme_variables(False)["mh-accept"])


# -- orientation ------------------------------------------------------------------------------------

async def test_round_counter_counts_per_session_and_names_the_session():
    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(140, 30)) as pilot:
        sessions = app.screen.state.sessions
        assert text_of(app, "#tree-title").startswith(f"round 1/{len(sessions[0].rounds)} · session 1 of 2")
        await pilot.press("end")
        title = text_of(app, "#tree-title")
        n = len(sessions[1].rounds)
        assert title.startswith(f"epoch {n}/{n} · session 2 of 2"), title  # the streaming session has epochs


async def test_small_terminal_leaves_the_tree_most_rows():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#tree-title").region.height <= 2  # folded, at most 2 lines here
        assert not app.screen.query_one("#legend").display  # the legend is in the help
        assert app.screen.query_one("#tree").region.height >= 9
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert app.screen.query_one("#legend").display and app.screen.query_one("#legend").region.height >= 1


async def test_plus_says_the_threshold_in_the_title_without_toasts():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(140, 30), notifications=True) as pilot:
        await pilot.press("end")  # a decision-input round (lazy tree) would say the reach; any round works
        for _ in range(14):
            await pilot.press("plus")
        await pilot.pause()
        assert not toasts(app)
        tree = app.screen.query_one("#tree", RoundTreeView)
        assert tree.min_reach == 1e-12
        await pilot.press("home")
        assert "reach >= 1e-12 (floor; reach-0 nodes show when navigated to)" in text_of(app, "#tree-title")


async def test_help_rows_wrap_inside_their_column_at_120_columns():
    from rich.console import Console

    from presto_tui.api.params import MethodKind, methods
    from presto_tui.views.dialogs.help import KEYS, SAMPLERS, help_text

    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        width = app.screen.query_one("#help-text").content_size.width
        assert width >= 80
    lines = ["".join(seg.text for seg in line).rstrip()
             for line in Console(width=width).render_lines(help_text({}), pad=False)]
    keys = [k for _, rows in KEYS for k, _ in rows] + [m.name for m in methods()]
    sections = {s for s, _ in KEYS} | {"Symbols", SAMPLERS} | {k.plural for k in MethodKind}
    indent = lines[1].index(KEYS[0][1][0][1].split()[0])  # where the first row's description starts
    assert indent >= 12
    for line in lines:
        if not line or line in sections or line.startswith("Colours") or "blindness" in line:
            continue
        # a row starts with its key (or symbol); a long description continues in its own column
        assert any(line.startswith(k) for k in keys) or line[:1] in "✓✗?⏸○·◌⊘▶❯" or \
            line.startswith(" " * indent), line


async def test_chat_title_and_settings_name_the_synthetic_backend_right():
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_until(pilot, lambda: "model synthetic-" in app.sub_title)
        assert "synthetic on synthetic" not in app.sub_title
        await pilot.press("ctrl+s")
        await pilot.pause()
        model = app.screen.query_one("#f-model")
        assert model.disabled and "smollm2" not in model.placeholder


async def test_question_mark_types_in_the_prompt_and_f1_opens_help():
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.screen.query_one("#prompt")
        assert "F1" in prompt.placeholder and "?" not in prompt.placeholder
        prompt.focus()
        await pilot.press("w", "h", "y", "question_mark")
        assert prompt.value == "why?" and type(app.screen).__name__ == "ChatScreen"
        await pilot.press("f1")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"


async def test_pasted_lines_are_kept_and_said():
    from textual import events

    backend = SlowBackend()
    app, _ = make_chat(backend)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        scr = app.screen
        prompt = scr.query_one("#prompt")
        prompt.focus()
        prompt.post_message(events.Paste("the cat\nsat on\nthe mat"))
        await wait_until(pilot, lambda: prompt.value == "the cat⏎sat on⏎the mat")
        await wait_until(pilot, lambda: any("3 lines" in t for t in toasts(app)))
        await pilot.press("enter")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.status == "done")
        assert scr.state.current.start.prompt == "the cat\nsat on\nthe mat"


async def test_pause_stops_the_chain_and_is_shown_for_as_long_as_it_lasts():
    """The loop parks before its next engine step (a condition, not a wait: on a slow machine a
    wait could pass with a chain that never stopped), and the mark stays while it is parked."""
    backend = SlowBackend(delay=0.1)
    app, session = make_chat(backend, prefetch="none", steps=60)  # 6 s of calls: still running on a busy machine
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        scr = app.screen
        await submit(pilot, app, "a dog")
        await wait_until(pilot, lambda: scr.state.current and len(scr.state.current.rounds) >= 1)
        await pilot.press("tab", "p")  # p pauses from the tree (in the prompt it is typed)
        await wait_until(pilot, session.parked.is_set)  # the loop waits: no engine step runs now
        n, calls = len(scr.state.current.rounds), backend.calls
        await wait_until(pilot, lambda: "paused (p resumes)" in text_of(app, "#stats"))
        for _ in range(5):  # frames go by; the mark is the panel's (a toast's would go), the chain stays put
            await pilot.pause()
            assert "paused (p resumes)" in text_of(app, "#stats") and "running" not in text_of(app, "#stats")
        assert text_of(app, "#tree-title").startswith("⏸ paused")
        assert session.parked.is_set() and backend.calls == calls and len(scr.state.current.rounds) == n
        await pilot.press("p")
        await wait_until(pilot, lambda: "paused" not in text_of(app, "#stats"))
        await wait_until(pilot, lambda: scr.state.current.status == "done")


async def test_browsing_back_during_a_run_shows_the_round_and_the_live_chain():
    backend = SlowBackend(delay=0.1)
    app, _ = make_chat(backend, prefetch="none", steps=60)  # 6 s of calls: still running on a busy machine
    async with app.run_test(size=(120, 30)) as pilot:
        scr = app.screen
        await submit(pilot, app, "a dog")
        await wait_until(pilot, lambda: scr.state.current and len(scr.state.current.rounds) >= 3)
        await pilot.press("tab", "home")
        await wait_until(pilot, lambda: "as of round 1 of session 1" in text_of(app, "#stats"))
        stats = text_of(app, "#stats")
        assert "as of round 1 of session 1" in stats and "transitions 1/" in stats
        assert "live: session 1, round" in stats
        first_live = stats.split("live: ")[1]
        await wait_until(pilot, lambda: text_of(app, "#stats").split("live: ")[1] != first_live)  # it moves on
        assert scr.cursor == (0, 0)  # while the screen stays on round 1
        await pilot.press("end")
        await wait_until(pilot, lambda: scr.state.current.status == "done" and not scr.running)
        await wait_until(pilot, lambda: "live:" not in text_of(app, "#stats"))


async def test_speedup_is_shown_only_against_a_comparable_sequential_sampler():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.press("end")
        session = app.screen.state.sessions[0]
        sp = session.summary.speedup_estimate
        await pilot.press("home")
        assert "vs sequential PowerMH" in text_of(app, "#stats")
        for _ in range(len(session.rounds) - 1):
            await pilot.press("right_square_bracket")
        assert f"speedup ~{sp:.2f}x vs sequential PowerMH" in text_of(app, "#stats")  # SessionSummary's number
    for params, expected in ((dict(prefetch="none"), "n/a (this is the sequential sampler"),
                             (dict(sampler="multitry", budget=4, tries=2), "n/a (sequential MultiTryMH")):
        app, _ = make_chat(SlowBackend(), **params)
        async with app.run_test(size=(140, 30)) as pilot:
            state = app.screen.state
            await submit(pilot, app, "the cat")
            await wait_until(pilot, lambda s=state: s.current and s.current.status == "done")
            await wait_until(pilot, lambda e=expected, a=app: e in text_of(a, "#stats"))


async def test_streaming_sessions_show_transitions_per_second():
    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.press("end")
        stats = text_of(app, "#stats")
        assert "tr/s " in stats and "tr/call" not in stats


async def test_the_settings_dialog_has_a_field_for_every_sampler_parameter_of_the_spec():
    """The spec walked into the settings dialog: every sampler parameter a person sets is a field with
    the spec's label, shown exactly for the samplers and rules that read it, read on the one path
    (a bad value gives the command line's message)."""
    from presto_tui.api.params import SAMPLER_PARAMS, PrefetchRule, applies, find_method, method_names

    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("ctrl+s")
        await pilot.pause()
        settings = app.screen
        for p in SAMPLER_PARAMS:
            if p.settings:
                assert str(settings.query_one(f"#row-{p.name} Label").render()) == p.label
        for sampler in method_names():
            rule = "spine" if find_method(sampler).chain else "none"
            settings.query_one("#f-sampler").value = sampler
            settings.query_one("#f-prefetch").value = rule
            await pilot.pause()
            shown = {p.name for p in SAMPLER_PARAMS if p.settings and settings.query_one(f"#row-{p.name}").display}
            params = {"sampler": sampler, "prefetch": rule if rule in PrefetchRule.names() else "none"}
            assert shown == {p.name for p in SAMPLER_PARAMS if p.settings and applies(p, params)}, sampler
        settings.query_one("#f-sampler").value = "powermh"
        settings.query_one("#f-prefetch").value = "stream"
        await pilot.pause()
        settings.query_one("#f-alpha").value = "1e309"
        await pilot.click("#save")
        assert str(settings.query_one("#settings-error").content) == \
            "alpha must be a finite number in (0, 1000], got '1e309'"


async def test_settings_show_every_parameter_and_save_stays_in_view():
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(100, 40)) as pilot:
        scr = app.screen
        await pilot.press("ctrl+s")
        await pilot.pause()
        settings = app.screen
        save = settings.query_one("#save")
        assert save.region.height >= 1 and save.region.bottom <= 40
        assert settings.query_one("#dialog").region.contains_region(save.region)
        for name in ("epsilon", "tau", "beta", "tries", "block_size", "cut_mix"):
            settings.query_one(f"#f-{name}")
        # a sampler's own fields show for it alone (the spec's `samplers`): EntropyCut's cut_mix
        assert not settings.query_one("#row-cut_mix").display
        settings.query_one("#f-sampler").value = "entropycut"
        await pilot.pause()
        assert settings.query_one("#row-cut_mix").display and not settings.query_one("#row-tries").display
        settings.query_one("#f-epsilon").value = "0.05"
        settings.query_one("#f-tau").value = "0.5"
        settings.query_one("#f-block_size").value = "12"
        settings.query_one("#f-cut_mix").value = "0.2"
        await pilot.click("#save")
        await pilot.pause()
        p = scr.params
        assert (p.epsilon, p.tau, p.block_size, p.cut_mix) == (0.05, 0.5, 12, 0.2)
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(80, 24)) as pilot:  # smaller still: the fields scroll, the buttons stay
        await pilot.press("ctrl+s")
        await pilot.pause()
        save = app.screen.query_one("#save")
        assert save.region.height >= 1 and save.region.bottom <= 24


# -- replay: quitting, the timeline, go to, speed -------------------------------------------------------

async def test_replay_q_quits():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_timeline_click_and_drag_seek():
    from presto_tui.views.widgets.timeline import Timeline

    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        scr = app.screen
        total = scr.state.total_rounds
        bar = scr.query_one("#timeline", Timeline)
        start = 1 + Timeline.HEAD  # padding, then the play symbol
        await pilot.click("#timeline", offset=(start + bar.bar_width // 2, 0))
        assert scr.state.timeline_index(scr.cursor) == bar.bar_width // 2 * total // bar.bar_width
        await pilot.mouse_down("#timeline", offset=(start + 1, 0))
        await pilot.hover("#timeline", offset=(start + bar.bar_width - 1, 0))
        await pilot.mouse_up("#timeline", offset=(start + bar.bar_width - 1, 0))
        await pilot.pause()
        assert scr.state.timeline_index(scr.cursor) == total - 1
        assert f"{total}/{total}" in text_of(app, "#timeline")


async def test_go_to_round_n_and_s_colon_n():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        scr = app.screen
        await pilot.press("g", "3", "enter")
        await pilot.pause()
        assert scr.cursor == (0, 2)
        await pilot.press("g", "2", "colon", "2", "enter")
        await pilot.pause()
        assert scr.cursor == (1, 1)
        await pilot.press("g", "9", "colon", "1", "enter")
        await pilot.pause()
        assert "no session 9" in text_of(app, "#goto-error")
        await pilot.press("escape")
        assert scr.cursor == (1, 1)


async def test_replay_speeds_up_to_256_rounds_a_second_at_ten_frames():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(100, 30)) as pilot:
        scr = app.screen
        for _ in range(12):
            await pilot.press("greater_than_sign")
        assert "256 rounds/s" in text_of(app, "#timeline")
        t0 = time.monotonic()
        await pilot.press("space")
        await wait_until(pilot, lambda: not scr.playing, timeout=5)
        assert scr.state.timeline_index(scr.cursor) == scr.state.total_rounds - 1
        assert time.monotonic() - t0 < 2.0  # ~26 rounds per frame: one or two frames


# -- the session overview ----------------------------------------------------------------------------

async def test_overview_has_a_column_per_round_and_opens_the_selected_one():
    from presto_tui.views.screens.overview import OverviewScreen
    from presto_tui.views.widgets.strips import ChainStrip

    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        await pilot.press("o")
        await pilot.pause()
        ov = app.screen
        assert isinstance(ov, OverviewScreen)
        strip = ov.query_one("#ov-strip", ChainStrip)
        rounds = scr.state.sessions[0].rounds
        assert len(strip.columns) == len(rounds)
        assert [c.transitions for c in strip.columns] == [r.tree.transitions for r in rounds]
        # the first round's column lists its walked decisions' classes, then the deferred stop
        lines = [strip.render_line(y).text for y in range(strip.size.height)]
        column = "".join(line[ChainStrip.LABEL] for line in lines[1:-1]).strip()
        assert column == "✓✗?⏸"
        assert "session 1 of 2" in text_of(app, "#ov-info")
        assert "after round 1" in text_of(app, "#ov-text-body")
        await pilot.press("right")
        assert "after round 2" in text_of(app, "#ov-text-body")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is scr and scr.cursor == (0, 1)
        # a click selects a column, a second click on it opens its round
        await pilot.press("o")
        await pilot.pause()
        await pilot.click("#ov-strip", offset=(ChainStrip.LABEL + 2, 1))
        assert app.screen.selected == 2
        await not_a_double_click(pilot)
        await pilot.click("#ov-strip", offset=(ChainStrip.LABEL + 2, 1))
        await pilot.pause()
        assert app.screen is scr and scr.cursor == (0, 2)


async def test_overview_switches_sessions_and_rates_streams_per_second():
    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("o")
        await pilot.pause()
        ov = app.screen
        assert ov.series.rate_name == "transitions/call"
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert "session 2 of 2" in text_of(app, "#ov-info") and "epochs" in text_of(app, "#ov-info")
        assert ov.series.rate_name == "transitions/s"
        assert [c.cum_rate for c in ov.series.columns][-1] == pytest.approx(
            app.screen.state.sessions[1].summary.transitions_per_s)
        await pilot.press("escape")
        assert type(app.screen).__name__ == "ReplayScreen"


async def test_overview_follows_a_live_chat():
    backend = SlowBackend(delay=0.05)
    app, _ = make_chat(backend, prefetch="none")
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        await submit(pilot, app, "a dog")
        await wait_until(pilot, lambda: scr.state.current and len(scr.state.current.rounds) >= 1)
        await pilot.press("tab", "o")
        await pilot.pause()
        ov = app.screen
        await wait_until(pilot, lambda: scr.state.current.status == "done")
        await wait_until(pilot, lambda: len(ov.series.columns) == len(scr.state.current.rounds))
        assert ov.selected == len(ov.series.columns) - 1


async def test_overview_of_hostile_text_is_literal():
    app = replay_app(read_trace(DATA / "hostile.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("o")
        await pilot.pause()
        for sel in ("#ov-info", "#ov-text-body"):
            out = text_of(app, sel)
            assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
        assert "[bold red]boom[/]" in text_of(app, "#ov-info")


# -- how the answer evolved ----------------------------------------------------------------------------

def test_changed_span():
    from presto_tui.views.state.evolution import changed_span

    assert changed_span((1, 2, 3), (1, 2, 3)) is None
    assert changed_span((1, 2, 3, 4), (1, 9, 9, 4)) == (1, 3, 3)
    assert changed_span((1, 2, 3), (1, 2, 4)) == (2, 3, 3)
    assert changed_span((5, 2), (1, 2)) == (0, 1, 1)


async def test_output_marks_what_the_round_changed():
    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(120, 40)):
        scr = app.screen
        rd = scr.current_round()
        from presto_tui.views.state.evolution import changed_span

        i, jb, ja = changed_span(rd.tree.root.tokens, rd.tree.final_state.tokens)
        assert f"tokens {i}..{ja - 1} changed" in str(scr.query_one("#output").border_title)
        text = scr.query_one("#output-text").content
        struck = "".join(text.plain[s.start:s.end] for s in text.spans if getattr(s.style, "strike", False))
        underlined = "".join(text.plain[s.start:s.end] for s in text.spans if getattr(s.style, "underline", False))
        before = rd.tree.root.tokens
        shown_before = before[i:min(jb, before.index(0) if 0 in before else jb)]  # 0: the synthetic EOS
        assert struck == "".join(scr.state.pieces(shown_before))
        assert underlined.startswith("".join(scr.state.pieces(rd.tree.final_state.tokens[i:i + 1])))


def test_output_text_is_bounded_by_what_it_shows():
    from presto_tui.views.state.evolution import TEXT_BUDGET, evolution_text

    huge = {1: "x" * 100_000}
    text = evolution_text(None, [1] * 10_000, lambda ids: [huge.get(i, "?") for i in ids])
    assert len(text.plain) < TEXT_BUDGET + 100


# -- search ---------------------------------------------------------------------------------------------

def test_search_queries_parse_and_refuse_clearly():
    import pytest as _pytest

    from presto_tui.views.state.search import QueryError, parse

    q = parse("k=3-5 cut=10 class=rej the cat")
    assert (q.k, q.cut, q.kind, q.text) == ((3, 5), (10, 10), "reject", "the cat")
    for bad in ("class=foo", "k=x", "", "  "):
        with _pytest.raises(QueryError):
            parse(bad)


async def search(pilot, query):
    await pilot.press("slash", *query, "enter")
    await pilot.pause()


async def test_search_by_class_k_cut_and_text_and_step_with_n():
    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        scr = app.screen
        tree = scr.query_one("#tree", RoundTreeView)
        await search(pilot, "class=uncertain")
        node = tree.round_tree.node(tree.selected)
        assert node.score.eps_class == "uncertain" and "class uncertain" in text_of(app, "#inspector")
        first = (scr.cursor, tree.selected)
        assert "/class=uncertain: session" in text_of(app, "#search-status")
        await pilot.press("n")
        second = (scr.cursor, tree.selected)
        assert second != first and tree.round_tree.node(tree.selected).score.eps_class == "uncertain"
        await pilot.press("N")
        assert (scr.cursor, tree.selected) == first
        await search(pilot, "k=3")  # the transition it decides, from 1: the trace's decision index 2
        assert tree.round_tree.node(tree.selected).decision.index == 2
        await search(pilot, "cut=11")
        assert tree.round_tree.node(tree.selected).decision.cut == 11
        # text in a proposal: a word of the first request's proposal
        rd = scr.state.sessions[0].rounds[0]
        word = scr.state.pieces(rd.tree.requests[0].proposal.tokens)[0].strip()
        await search(pilot, word)
        v = tree.round_tree.node(tree.selected)
        assert word in "".join(scr.state.pieces(tree.round_tree.requests[v.decision.request].proposal.tokens))
        await search(pilot, "class=foo")
        assert sum("class= wants one of" in t for t in toasts(app)) == 1
        assert scr.query_one("#search-row").display  # still open, to mend the query
        await pilot.press("escape")
        await search(pilot, "k=999")
        assert "no match" in text_of(app, "#search-status")
        await search(pilot, "")  # an empty search ends it
        assert not app.screen.query_one("#search-status").display


async def test_the_search_line_names_its_match_only_where_the_match_is():
    """"/because: session 2 epoch 1304 ..." stayed on sessions 3 and 5: elsewhere the line keeps the
    search and its keys, not the other session's match."""
    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        await search(pilot, "class=uncertain")
        here = scr.cursor
        assert f"session {here[0] + 1} round {here[1] + 1} node #" in text_of(app, "#search-status")
        await pilot.press("end")
        await wait_until(pilot, lambda: scr.cursor != here)
        line = text_of(app, "#search-status")
        assert line.startswith("/class=uncertain") and "n/N" in line and "node #" not in line
        assert f"session {here[0] + 1} round {here[1] + 1}" not in line
        await pilot.press("N")  # back on a match: it is named again
        await wait_until(pilot, lambda: "node #" in text_of(app, "#search-status"))


async def test_exported_trees_and_titles_number_from_1_as_the_screen_does(tmp_path):
    """An exported tree said "round": 1303 for the screen's "epoch 1304"; the title said "session 1
    of 4 (chain 0 of 4 ...)"."""
    import json

    app = replay_app(read_trace(DATA / "chains.jsonl"))
    async with app.run_test(size=(140, 40)) as pilot:
        scr = app.screen
        assert "session 1 of 4 (chain 1 of 4: m shows them all)" in text_of(app, "#tree-title")
        await pilot.press("end")
        s, r = scr.cursor
        chain = scr.state.sessions[s].start.chain
        assert f"session {s + 1} of 4 (chain {chain + 1} of 4" in text_of(app, "#tree-title")
        await export_to(pilot, app, tmp_path, "j")
        (js,) = tmp_path.glob("*-tree.json")
        doc = json.loads(js.read_text())
        rd = scr.current_round()
        assert (doc["session"]["index"], doc["round"], doc["block"]) == (s + 1, r + 1, rd.block + 1)
        assert f"round {r + 1}/" in text_of(app, "#tree-title") and doc["record"]["round"] == rd.round
        assert js.name.endswith(f"-s{s + 1}r{r + 1}-tree.json")


async def test_escape_in_the_search_bar_closes_it_and_does_not_cancel_a_run():
    backend = SlowBackend(delay=0.1)
    app, _ = make_chat(backend, prefetch="none")
    async with app.run_test(size=(120, 30)) as pilot:
        scr = app.screen
        await submit(pilot, app, "a dog")
        await wait_until(pilot, lambda: scr.state.current and len(scr.state.current.rounds) >= 1)
        await pilot.press("tab", "slash", "k", "escape")
        assert not scr.query_one("#search-row").display
        await wait_until(pilot, lambda: scr.state.current.status == "done")


# -- export ---------------------------------------------------------------------------------------------

async def export_to(pilot, app, folder, key):
    await pilot.press("e")
    await pilot.pause()
    app.screen.query_one("#export-folder").value = str(folder)
    await pilot.press(key)
    await wait_until(pilot, lambda: type(app.screen).__name__ != "ExportScreen")  # written: the dialog closes


async def test_export_screen_tree_and_answer(tmp_path):
    import json
    import xml.etree.ElementTree as ET

    from presto_tui.logs.schema import decode

    app = replay_app(read_trace(DATA / "classes.jsonl"))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        scr = app.screen
        await export_to(pilot, app, tmp_path, "s")
        (svg,) = tmp_path.glob("*-screen.svg")
        assert ET.parse(svg).getroot().tag.endswith("svg") and "presto-tui" in svg.read_text()
        await export_to(pilot, app, tmp_path, "t")
        (txt,) = tmp_path.glob("*-tree.txt")
        body = txt.read_text()
        assert "session 1, round 1" in body and "✓ #0 k1" in body and "▶" in body
        await export_to(pilot, app, tmp_path, "j")
        (js,) = tmp_path.glob("*-tree.json")
        doc = json.loads(js.read_text())
        rd = decode(doc["record"])  # the trace's own record, read back as the trace's
        assert rd.tree.path_nodes == scr.current_round().tree.path_nodes
        assert (doc["session"]["index"], doc["round"], doc["block"]) == (1, 1, 1)  # as the screen says them
        assert doc["session"]["prompt"] == "the cat" and doc["vocab"]
        await export_to(pilot, app, tmp_path, "c")
        answer = "".join(scr.state.pieces(scr.current_round().tree.final_state.tokens))
        assert app.clipboard and answer.startswith(app.clipboard)
        await export_to(pilot, app, tmp_path, "a")
        (ans,) = tmp_path.glob("*-answer.txt")
        assert ans.read_text() == app.clipboard
        assert sum("wrote" in t for t in toasts(app)) >= 1


async def test_export_to_an_unwritable_place_is_one_clear_toast(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await export_to(pilot, app, blocker / "sub", "t")
        errors = [t for t in toasts(app) if "cannot write" in t]
        assert len(errors) == 1 and "a-file" in errors[0]


async def test_exported_hostile_text_is_literal(tmp_path):
    app = replay_app(read_trace(DATA / "hostile.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        await export_to(pilot, app, tmp_path, "t")
        await export_to(pilot, app, tmp_path, "a")
        for f in tmp_path.iterdir():
            data = f.read_text()
            assert "\x1b" not in data and "\x9b" not in data and "\x07" not in data


# -- cosmetics, at 80x24, 140x40 and 200x50 ---------------------------------------------------------------

SIZES = ((80, 24), (140, 40), (200, 50))


def lines_of(widget) -> list[str]:
    """The lines a widget puts on screen."""
    from textual.geometry import Region

    w, h = widget.size
    return [strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, w, h))]


@pytest.mark.parametrize("size", SIZES)
async def test_the_inspector_never_splits_a_name_from_its_value(size):
    """"log q x -5.167 y" on one line, "-15.543" on the next: a line may end only after a value."""
    import re

    app = replay_app(read_trace(DATA / "research.jsonl"))
    cut = re.compile(r"(\b[xy]|log p0|log q|target|proposal)$")
    async with app.run_test(size=size) as pilot:
        scr = app.screen
        seen = 0
        for _ in range(12):  # nodes of several rounds and sessions
            for _ in range(3):
                await pilot.press("down")
                inspector = scr.query_one("#inspector")
                lines = lines_of(inspector)
                seen += any("log q x" in ln for ln in lines)
                assert not [ln for ln in lines if cut.search(ln.strip())], lines
            await pilot.press("right_square_bracket")
        assert seen


@pytest.mark.parametrize("size", SIZES)
async def test_the_footer_shows_whole_keys_only(size):
    """The footer was cut mid-key at 140 columns ("esc cancel  p pau") with a search active: keys that
    do not fit are left out whole, the least needed first; help and cancel always show."""
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    # Shut while the keys are typed and again once a round is drawn: the session is running while the
    # test looks, and the app has a few rounds to draw, not the thousands a free-running chain sends
    # meanwhile (21 s a size, most of it the app keeping up and the search going through them).
    engine = GatedEngine(shut=True)
    app, session = make_chat(engine, steps=4000)
    async with app.run_test(size=size) as pilot:
        scr = app.screen
        await submit(pilot, app, "the cat")
        engine.open()
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.rounds)
        engine.shut()
        await pilot.press("tab", "slash", *"k=1", "enter")
        await wait_until(pilot, lambda: scr.search is not None)
        footer = scr.query_one(Footer)
        width = size[0]

        def visible_keys() -> list:
            return [k for k in footer.query(FooterKey) if k.display and k.parent.display]

        # the footer lays out again with the search's keys: every key shown whole, inside the screen
        await wait_until(pilot, lambda: visible_keys() and all(k.region.right <= width and k.region.width > 0
                                                               for k in visible_keys()))
        shown = visible_keys()
        words = {k.description for k in shown}
        assert {"cancel", "pause", "help", "settings"} <= words
        if width >= 140:  # room for every key
            assert not [k for k in footer.query(FooterKey) if not k.display]
        assert scr.running
        session.cancel()
        engine.open()
        await wait_until(pilot, lambda: not scr.running)
    session.close()


async def test_export_options_are_one_left_aligned_column():
    from presto_tui.views.dialogs.export import ChoiceExportScreen

    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceExportScreen))
        await pilot.pause()
        starts = {btn.region.x + next(i for i, c in enumerate(lines_of(btn)[0]) if not c.isspace())
                  for btn in app.screen.query(".export-option")}
        assert len(starts) == 1  # every option's key in one column, as a list reads


@pytest.mark.parametrize("size", SIZES)
async def test_the_settings_model_field_shows_its_whole_hint(size):
    from presto_tui.views.dialogs.settings import SettingsScreen

    for backend in ("synthetic", "vllm"):
        app = chat_app(ChatSession(engine_factory=lambda model: None), SamplerParams(), backend=backend, model=None)
        async with app.run_test(size=size) as pilot:
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda a=app: isinstance(a.screen, SettingsScreen))
            await pilot.pause()
            field = app.screen.query_one("#f-model")
            hint = field.placeholder
            assert hint and hint in " ".join(lines_of(field)), (hint, lines_of(field))
