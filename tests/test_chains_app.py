"""The chains of a prompt in the app: the chains view (trace plot, diagnostics, switching chains)
from a fixed trace, chains set in the chat's settings, run at once and recorded one session each."""

from __future__ import annotations

from pathlib import Path

from helpers import ScriptedEngine, not_a_double_click, text_of, wait_until
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
        # chains are numbered from 1 on screen, as sessions, rounds and blocks are
        assert all(f"chain {m}" in legend for m in range(1, 5)) and "chain 1 (selected)" in legend
        diag = shown(app, "#ch-diagnostics")
        expected = chains_report([app.screen.state.sessions[i].summary for i in scr.members])
        rhat = next(d.rhat for d in expected.diagnostics if d.quantity == "log_target")
        assert f"{rhat:.3f}" in diag and "bulk ESS" in diag and "K=40 was too short" in diag and "so far" not in diag
        assert f"{expected.vote.majority.count}/4 chains" in diag
        await pilot.press("right", "right")
        assert "chain 3 (selected)" in text_of(app, "#ch-legend")
        assert text_of(app, "#ch-info").startswith("chain 3 of 4")
        assert "seed" in text_of(app, "#ch-text-body")
        await pilot.press("enter")  # the third chain's latest round in the tree view
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
        await not_a_double_click(pilot)
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
        assert "chain 3" in text_of(app, "#ch-legend")
        live = chains_report([v.summary for v in views])
    session.close()
    # every chain is one session of the trace, each with its own events (their lines interleaved)
    recorded = read_trace(path).sessions
    assert [s.start.chain for s in recorded] == [0, 1, 2]
    assert [s.summary().tokens for s in recorded] == [v.summary.tokens for v in views]
    assert chains_report([s.summary() for s in recorded]).to_dict() == live.to_dict()


# -- the trace plot draws every transition, from the first frame ------------------------------------------

def curve(plot, rgb: tuple[int, int, int]) -> dict[int, int]:
    """{column: the highest row} where the plot draws in colour `rgb` (row 0 at the top)."""
    from rich.style import Style

    top: dict[int, int] = {}
    for y, line in enumerate(plot.render().split("\n")):
        for span in line.spans:
            style = span.style if isinstance(span.style, Style) else Style.parse(span.style)
            if style.color is not None and style.color.triplet is not None and tuple(style.color.triplet) == rgb:
                for x in range(span.start, span.end):
                    if not line.plain[x].isspace():
                        top.setdefault(x, y)
    return top


async def test_the_chains_plot_draws_every_transition_of_every_chain_at_once():
    """The plot was thinned to the width of a plot not yet laid out (0): each chain came out as a
    straight line from its first log-target to its last until a key redrew it.  Without a key, the
    selected chain's curve falls where its draws fall (the dip of chain 1 in transitions 17-19)."""
    from presto_tui.views.screens.chains import colour_of

    app = chains_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        await pilot.pause(0.3)
        scr = app.screen
        ys = [d.log_target for d in scr.views[0].summary.draws]
        falls = lambda seq: any(b < a for a, b in zip(seq, seq[1:]))
        assert falls(ys) and ys[-1] > ys[0]  # chain 1 rises overall, and falls somewhere on the way
        rows = curve(scr.query_one("#ch-plot"), colour_of(0))
        assert len(rows) > 20  # a curve across the plot, not two ends
        heights = [-rows[x] for x in sorted(rows)]  # the curve's top, left to right (higher is larger)
        assert falls(heights), heights  # a straight line from the first log-target to the last never falls


def test_the_chains_plot_snapshot_from_the_first_frame(snap_compare):
    # no key after m: what the plot shows before anything redraws it (every point's shape)
    assert snap_compare(chains_app(), press=["m", "wait:300"], terminal_size=(140, 40))


# -- burn-in and thinning, mixing plots, every chain's draws ----------------------------------------------

async def test_b_sets_the_burn_in_and_thinning_the_diagnostics_read():
    from presto_tui.api.diagnostics import Selection

    app = chains_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        scr = app.screen
        assert "burn-in 0, thin 1" in text_of(app, "#ch-info")  # the default is said too
        await pilot.press("b")
        await pilot.pause()
        dialog = app.screen
        dialog.query_one("#sel-burn-in").value = "40"  # K=40: none would be left
        await pilot.press("enter")
        await pilot.pause()
        assert "burn-in B must lie in [0, 39]" in str(dialog.query_one("#sel-error").content)
        dialog.query_one("#sel-burn-in").value = "10"
        dialog.query_one("#sel-thin").value = "3"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is scr)
        await pilot.pause()
        assert scr.selection == Selection(10, 3) and "burn-in 10, thin 3" in text_of(app, "#ch-info")
        expected = chains_report([v.summary for v in scr.views], Selection(10, 3))
        diag = shown(app, "#ch-diagnostics")
        assert "burn-in 10 (the first 10 of each block dropped), thin 3" in " ".join(diag.split())
        rhat = next(d.rhat for d in expected.diagnostics if d.quantity == "log_target")
        assert f"{rhat:.3f}" in diag and expected.diagnostics[0].draws == 10  # 30 left, one in 3 kept


async def test_the_mixing_plots_are_the_diagnostics_autocorrelation_and_running_r_hat():
    import numpy as np

    from presto_tui.api.diagnostics import Selection, autocorrelation, draws_of, running_rhat

    app = chains_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        scr = app.screen
        summaries = [v.summary for v in scr.views]
        for selection in (Selection(), Selection(5, 2)):
            scr.selection = selection
            scr.draw()
            mix = scr.mixing()
            draws = draws_of(summaries, 0, "log_target", selection)
            assert mix.block == 0 and mix.draws == draws.shape[1]
            want = autocorrelation(draws, max_lag=draws.shape[1] - 1)
            np.testing.assert_allclose(np.array(mix.acf), want, equal_nan=True)
            assert list(mix.rhat) == running_rhat(draws)
        await wait_until(pilot, lambda: "autocorrelation, block 1" in str(scr.query_one("#ch-acf").render()))
        assert "running R-hat, block 1" in str(scr.query_one("#ch-rhat").render())


def y_axis(plot_text: str) -> list[tuple[str, bool]]:
    """A rendered plotext plot's y tick labels, top to bottom, each with whether its row holds a
    horizontal line (the axis character there is ├ rather than ┤)."""
    out = []
    for line in plot_text.splitlines():
        at = min((i for i in (line.find("┤"), line.find("├")) if i >= 0), default=-1)
        if at > 0 and line[:at].strip():
            out.append((line[:at].strip(), line[at] == "├"))
    return out


async def test_the_mixing_plots_label_every_tick_evenly_and_the_zero_line_zero():
    """At every height: the autocorrelation's zero line sits on the row labelled 0, and both plots'
    ticks are evenly spaced (plotext's own dropped a tick where two fell on one row)."""
    for height in (40, 44, 50, 56):
        app = chains_app()
        async with app.run_test(size=(140, height)) as pilot:
            await pilot.press("m")
            await wait_until(pilot, lambda a=app: isinstance(a.screen, ChainsScreen))
            scr = app.screen
            await wait_until(pilot, lambda s=scr: "autocorrelation, block 1" in str(s.query_one("#ch-acf").render()))
            acf, rhat = (y_axis(str(scr.query_one(w).render())) for w in ("#ch-acf", "#ch-rhat"))
            for axis in (acf, rhat):
                values = [float(label) for label, _ in axis]
                assert len(values) >= 2 and values == sorted(values, reverse=True), (height, axis)
                steps = {round(a - b, 9) for a, b in zip(values, values[1:])}
                assert len(steps) == 1, (height, axis)  # evenly spaced: no tick skipped
            assert [float(label) for label, line in acf if line] == [0.0], (height, acf)
            assert 0.0 in [float(label) for label, _ in acf] and 1.0 in [float(label) for label, _ in acf]


async def test_chains_stuck_apart_read_inf_in_the_view_and_its_running_r_hat():
    """After a burn-in of 30 of K=40 every chain of the fixed trace stays at one state: R-hat is
    inf in the table and the warning, and the running R-hat says so rather than plotting 9e15."""
    from presto_tui.api.diagnostics import Selection

    app = chains_app()
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        scr = app.screen
        scr.selection = Selection(30, 1)
        scr.draw()
        await wait_until(pilot, lambda: "inf" in str(scr.query_one("#ch-rhat").render()))
        assert "running R-hat, block 1: inf" in str(scr.query_one("#ch-rhat").render())
        diag = shown(app, "#ch-diagnostics")
        row = next(ln.split() for ln in diag.splitlines() if ln.split()[:1] == ["log-target"])
        assert "inf" in row and "R-hat inf > 1.01" in diag


async def test_e_exports_every_chains_draws_as_stats_draws_writes_them(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from presto_tui.cli import app as cli

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["stats", str(DATA / "chains.jsonl"), "--burn-in", "5", "--thin", "2",
                                   "--draws", "stats.csv"])
    assert res.exit_code == 0, res.output
    app = chains_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        scr = app.screen
        await pilot.press("b")
        await pilot.pause()
        app.screen.query_one("#sel-burn-in").value = "5"
        app.screen.query_one("#sel-thin").value = "2"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is scr)
        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one("#export-folder").value = str(tmp_path / "out")
        await pilot.press("b")  # both files
        await wait_until(pilot, lambda: len(list((tmp_path / "out").glob("*-draws.*"))) == 2)
    (csv_path,) = (tmp_path / "out").glob("*-s1-draws.csv")
    assert csv_path.read_text() == (tmp_path / "stats.csv").read_text()  # the same file, from the same function
    rows = csv_path.read_text().splitlines()
    assert rows[1].split(",")[2:5] == ["1", "1", "1"]  # chain, block, transition: from 1, as on screen
    assert (tmp_path / "out" / csv_path.name.replace(".csv", ".nc")).stat().st_size > 0


async def test_the_mixing_warning_says_so_far_while_the_chains_run(tmp_path):
    """Mid-run (a trace that ends inside its chains: as a live chat stands) the draws are the first
    ones only; the warning blamed K at transition 16 of 40."""
    lines = [ln for ln in (DATA / "chains.jsonl").read_text().splitlines(keepends=True)
             if '"type":"session_end"' not in ln]
    kept, seen = [], {}
    for ln in lines:  # every chain's first 16 transitions
        if '"type":"transition"' in ln:
            sid = ln.split('"sid":')[1].split(",")[0]
            seen[sid] = seen.get(sid, 0) + 1
            if seen[sid] > 16:
                continue
        kept.append(ln)
    (tmp_path / "mid.jsonl").write_text("".join(kept))
    app = replay_app(read_trace(tmp_path / "mid.jsonl"))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        diag = " ".join(shown(app, "#ch-diagnostics").split())
        assert "so far" in diag and "16 transitions" in diag and "too short" not in diag
