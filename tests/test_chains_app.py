"""The chains of a prompt in the app: the chains view (trace plot, diagnostics, switching chains)
from a fixed trace, chains set in the chat's settings, run at once and recorded one session each."""

from __future__ import annotations

from pathlib import Path

from helpers import ScriptedEngine, text_of, wait_until
from test_app import make_chat, submit

from presto_tui.logs.reader import read_trace
from presto_tui.runtime.session.answers import vote
from presto_tui.runtime.session.diagnostics import chains_report
from presto_tui.views.app import replay_app
from presto_tui.views.screens.chains import ChainsScreen

DATA = Path(__file__).parent / "data"


def shown(app, selector: str) -> str:
    """What a widget shows, rendered (its content may be a group of tables)."""
    import io

    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(app.screen.query_one(selector).content)
    return console.export_text()


def chains_app():
    return replay_app(read_trace(DATA / "chains.jsonl"))


async def test_the_chains_view_plots_every_chain_and_switches_between_them():
    app = chains_app()
    async with app.run_test(size=(140, 40)) as pilot:
        rounds = app.screen
        start = rounds.cursor
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        scr = app.screen
        assert [app.screen.state.sessions[i].start.chain for i in scr.members] == [0, 1, 2, 3]
        legend = text_of(app, "#ch-legend")
        assert all(f"chain {m}" in legend for m in range(4)) and "chain 0 (selected)" in legend
        diag = shown(app, "#ch-diagnostics")
        expected = chains_report([app.screen.state.sessions[i].summary for i in scr.members])
        rhat = next(d.rhat for d in expected.diagnostics if d.quantity == "log_target")
        assert f"{rhat:.3f}" in diag and "bulk ESS" in diag and "K=40 was too short" in diag
        assert f"{expected.vote.majority.count}/4 chains" in diag
        await pilot.press("right", "right")
        assert "chain 2 (selected)" in text_of(app, "#ch-legend")
        assert text_of(app, "#ch-info").startswith("chain 2 of 4")
        assert "seed" in text_of(app, "#ch-text-body")
        await pilot.press("enter")  # chain 2's latest round in the tree view
        await wait_until(pilot, lambda: app.screen is rounds)
        s, r = rounds.cursor
        assert (s, r) != start and rounds.state.sessions[s].start.chain == 2
        assert r == len(rounds.state.sessions[s].rounds) - 1


async def test_the_chains_view_of_a_single_chain_says_r_hat_needs_more(tmp_path):
    from presto_tui.logs.writer import TraceWriter
    from presto_tui.runtime.core.params import SamplerParams
    from presto_tui.runtime.engines.synthetic import SyntheticEngine
    from presto_tui.runtime.session.runner import run_session

    b, params = SyntheticEngine(), SamplerParams(max_new_tokens=16, steps=10)
    with TraceWriter(tmp_path / "one.jsonl", command="run", backend=b.name, model=b.model, params=params.to_dict(),
                     pieces=b.token_pieces) as w:
        for ev in run_session(b, params, b.encode_prompt("the cat"), prompt="the cat"):
            w.write(ev)
    app = replay_app(read_trace(tmp_path / "one.jsonl"))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        diag = shown(app, "#ch-diagnostics")
        assert "one chain" in diag and "bulk ESS" in diag
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ChainsScreen))


async def test_a_trace_from_before_the_transition_events_says_there_is_nothing_to_diagnose():
    app = replay_app(read_trace(DATA / "replay.jsonl"))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        assert "predates" in shown(app, "#ch-diagnostics")


def test_chains_view_snapshot(snap_compare):
    assert snap_compare(chains_app(), press=["m", "wait:300", "right"], terminal_size=(140, 40))


async def test_chat_runs_the_chains_set_in_its_settings_at_once(tmp_path):
    from presto_tui.logs.writer import open_trace

    path = tmp_path / "chat.jsonl"
    app, session = make_chat(ScriptedEngine(), trace_opener=lambda engine, p: open_trace(path, "chat", engine, p))
    async with app.run_test(size=(140, 40)) as pilot:
        scr = app.screen
        await pilot.press("ctrl+s")
        await pilot.pause()
        settings = app.screen
        field = settings.query_one("#f-chains")
        field.value = "0"
        await pilot.click("#save")
        assert "chains must lie in [1, 256]" in str(settings.query_one("#settings-error").content)
        field.value = "3"
        await pilot.pause(0.3)  # a second click at once would count as a double click
        await pilot.click("#save")
        await wait_until(pilot, lambda: app.screen is scr)
        assert scr.chains == 3
        await submit(pilot, app, "the cat")
        await wait_until(pilot, lambda: len(scr.state.sessions) == 3 and not scr.running, timeout=20)
        views = scr.state.sessions
        assert [v.start.chain for v in views] == [0, 1, 2] and len({v.start.group for v in views}) == 1
        assert all(v.status == "done" and v.summary.transitions == 12 for v in views)
        assert scr.state.current is views[0] and scr.cursor == (0, len(views[0].rounds) - 1)  # follows chain 0
        texts = [v.summary.text for v in views]
        assert session.history == [("the cat", vote(texts).majority.answer)]
        await pilot.press("tab", "m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        assert "chain 2" in text_of(app, "#ch-legend")
        live = chains_report([v.summary for v in views])
    session.close()
    # every chain is one session of the trace, each with its own events (their lines interleaved)
    recorded = read_trace(path).sessions
    assert [s.start.chain for s in recorded] == [0, 1, 2]
    assert [s.summary().tokens for s in recorded] == [v.summary.tokens for v in views]
    assert chains_report([s.summary() for s in recorded]).to_dict() == live.to_dict()
