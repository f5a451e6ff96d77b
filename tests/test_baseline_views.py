"""The baselines (low temperature, best-of-N, PowerSMC) in the app and in `stats`.

The fixed trace tests/data/baselines.jsonl (tests/make_fixtures.py, recorded on the
synthetic backend) holds an MH session, then best-of-N, then PowerSMC.  The app draws
a baseline session where a round's tree would be; `stats` gives it columns of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import GatedEngine, ScriptedEngine, text_of, wait_until
from textual.widgets._toast import Toast
from typer.testing import CliRunner

from presto_tui.cli import app as cli_app
from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.methods.powersmc import SmcStep
from presto_tui.runtime.session.chat import ChatSession
from presto_tui.runtime.session.events import Choice, Sample, SessionEnd
from presto_tui.runtime.session.runner import run_session
from presto_tui.views.app import chat_app, replay_app
from presto_tui.views.state.reducer import AppState
from presto_tui.views.widgets.baseline import ParticleGrid, SampleTable
from presto_tui.views.widgets.tree import RoundTreeView

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def baselines_trace():
    return read_trace(DATA / "baselines.jsonl")


def state_of(events) -> AppState:
    state = AppState()
    for ev in events:
        state.apply(ev)
    return state


def smc_events(seed: int, **kw):
    b = SyntheticEngine()
    params = SamplerParams(sampler="powersmc", prefetch="none", particles=6, smc_block=6, smc_ramp=24,
                           max_new_tokens=30, seed=seed).with_(**kw)
    return list(run_session(b, params, b.encode_prompt("the cat"), prompt="the cat"))


def rendered(app, selector) -> str:
    """What a widget shows as text, whatever Rich object it holds (a Group, a table)."""
    import io

    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(app.screen.query_one(selector).content)
    return console.export_text()


def toasts(app) -> list[str]:
    """The notifications on screen, each on one line (a toast wraps its text)."""
    return [" ".join(str(t.render()).split()) for t in app.screen.query(Toast)]


# -- the reducer ------------------------------------------------------------------------------------------

def test_a_baseline_session_takes_one_place_on_the_timeline_and_has_no_round():
    trace = baselines_trace()
    state = state_of(e for s in trace.sessions for e in s.events)
    mh, bon, smc = state.sessions
    assert mh.method_run is None and bon.method_run is not None and smc.method_run is not None
    assert [s.positions for s in state.sessions] == [len(mh.rounds), 1, 1]
    assert state.total_rounds == len(mh.rounds) + 2
    assert state.timeline_cursor(len(mh.rounds)) == (1, 0) and state.timeline_cursor(state.total_rounds - 1) == (2, 0)
    assert state.timeline_index((2, 0)) == len(mh.rounds) + 1
    assert state.round_at((1, 0)) is None and state.round_at((0, 0)) is mh.rounds[0]


def test_best_of_n_ranks_by_the_score_its_answer_was_chosen_by():
    trace = baselines_trace()
    events = trace.sessions[1].events
    run = state_of(events).sessions[0].method_run
    choice = next(e for e in events if isinstance(e, Choice))
    samples = [e for e in events if isinstance(e, Sample)]
    ranked = run.ranked()
    assert [s.index for s in ranked][0] == choice.index
    assert sorted(s.index for s in ranked) == sorted(s.index for s in samples)
    scores = [choice.scores[s.index] for s in ranked]
    assert scores == sorted(scores, reverse=True)
    # ranked by log p0 when that is the rule: the same samples in another order
    b = SyntheticEngine()
    evs = list(run_session(b, SamplerParams(sampler="bestofn", prefetch="none", samples=6, bon_rank="logp",
                                            max_new_tokens=48), b.encode_prompt("the cat"), prompt="the cat"))
    by_p = state_of(evs).sessions[0].method_run
    assert [s.logp for s in by_p.ranked()] == sorted((s.logp for s in by_p.samples.values()), reverse=True)
    assert by_p.ranked()[0].index == next(e for e in evs if isinstance(e, Choice)).index


@pytest.mark.parametrize("seed", [3, 4])
def test_particle_text_follows_the_recorded_lineage_to_the_answer(seed):
    """Seed 3 resamples twice in the middle; seed 4 resamples after its last block (every copy had
    stopped at EOS), so the answer's index is one of the copies: its line goes through the parents."""
    events = smc_events(seed)
    run = state_of(events).sessions[0].method_run
    steps = [e for e in events if isinstance(e, SmcStep)]
    assert any(st.resampled for st in steps)
    end = next(e for e in events if isinstance(e, SessionEnd))
    last, particle = run.chosen_text_step()
    assert last == len(steps) - 1
    assert run.tokens_at(last, particle) == end.tokens  # the answer is the particle the line ends in
    line = run.answer_line()
    assert sorted(line) == list(range(len(steps)))
    for s, st in enumerate(steps):
        shares = run.shares(s)
        assert sum(shares) == pytest.approx(1.0)
        for i in range(len(st.tokens)):
            text = run.tokens_at(s, i)
            assert text[len(text) - len(st.tokens[i]):] == st.tokens[i]  # its own block last
            if s:
                parent = steps[s - 1].parents[i]
                assert text[:len(text) - len(st.tokens[i])] == run.tokens_at(s - 1, parent)
        if st.resampled:
            assert sum(run.copies(s)) == len(st.tokens) and 0 in run.copies(s)
        if s in line and s + 1 in line:  # the line steps through the parent of its next cell
            assert steps[s].parents[line[s + 1]] == line[s]


def test_the_trace_carries_the_text_of_every_sample_and_particle(tmp_path):
    path = tmp_path / "b.jsonl"
    b = SyntheticEngine()
    with TraceWriter(path, command="test", backend=b.name, model=b.model, params=SamplerParams().to_dict(),
                     pieces=b.token_pieces) as w:
        for params in (SamplerParams(sampler="bestofn", prefetch="none", samples=4, max_new_tokens=20),
                       SamplerParams(sampler="powersmc", prefetch="none", particles=4, smc_block=5,
                                     max_new_tokens=20, seed=2)):
            for ev in run_session(b, params, b.encode_prompt("a dog"), prompt="a dog"):
                w.write(ev)
    trace = read_trace(path)
    drawn = {t for s in trace.sessions for e in s.events if isinstance(e, Sample) for t in e.tokens}
    drawn |= {t for s in trace.sessions for e in s.events if isinstance(e, SmcStep) for grown in e.tokens
              for t in grown}
    assert drawn and drawn <= set(trace.vocab)


# -- the app: replay ------------------------------------------------------------------------------------

async def test_replay_shows_best_of_n_as_its_samples_ranked():
    trace = baselines_trace()
    app = replay_app(trace)
    async with app.run_test(size=(120, 34)) as pilot:
        scr = app.screen
        await pilot.press("end", "left_square_bracket")  # the last place is PowerSMC's; one back, best-of-N's
        assert scr.cursor == (1, 0)
        table = scr.query_one(SampleTable)
        await wait_until(pilot, lambda: table.display and not scr.query_one("#tree", RoundTreeView).display)
        run = scr.state.sessions[1].method_run
        choice = run.choice
        assert table.rows == 6 and table.row == 0  # the answer, ranked first
        assert "best-of-6" in text_of(app, "#tree-title") and "session 2 of 3" in text_of(app, "#tree-title")
        inspector = text_of(app, "#inspector")
        # samples from 1 (the trace's index + 1)
        assert f"sample #{choice.index + 1}  rank 1 of 6" in inspector and "★ the answer" in inspector
        lines = [table.render_line(y).text for y in range(table.rows + 1)]
        assert "rank" in lines[0] and "ll/tok" in lines[0]
        assert lines[1].startswith("❯★") and f"#{choice.index + 1}" in lines[1]
        await pilot.press("down", "down")
        second = run.ranked()[2]
        assert table.row == 2 and f"sample #{second.index + 1}  rank 3 of 6" in text_of(app, "#inspector")
        assert "★" not in text_of(app, "#inspector").splitlines()[0]
        words = "".join(app.screen.state.pieces(second.tokens[:3])).strip()
        assert words in text_of(app, "#inspector")  # its whole text, from its first words
        stats = text_of(app, "#stats")
        assert "6/6 samples" in stats and "answer log-lik" in stats and "time " in stats
        assert "transitions" not in stats
        assert f"the answer: sample #{choice.index + 1}" in scr.query_one("#output").border_title


async def test_replay_shows_powersmc_as_particles_over_blocks():
    trace = baselines_trace()
    app = replay_app(trace)
    async with app.run_test(size=(120, 34)) as pilot:
        scr = app.screen
        await pilot.press("end")
        grid = scr.query_one(ParticleGrid)
        await wait_until(pilot, lambda: grid.display)
        run = scr.state.sessions[2].method_run
        steps = run.steps
        last, answer = run.chosen_text_step()
        assert (grid.col, grid.row) == (last, answer)  # the answer's cell is selected
        inspector = text_of(app, "#inspector")
        assert f"particle {answer + 1} after block {last + 1} of {len(steps)}" in inspector  # particles from 1
        assert "★ the answer" in inspector and f"ESS {steps[last].ess:.2f}" in inspector
        end = trace.sessions[2].events[-1]
        assert isinstance(end, SessionEnd)
        assert end.text.strip()[:20] in inspector.replace("\n", " ")  # the answer's text
        header = grid.render_line(0).text
        assert header.count("⟳") == sum(st.resampled for st in steps) == 2
        footer = [grid.render_line(y).text for y in range(grid.rows + 1, grid.rows + 3)]
        assert footer[0].startswith("ESS") and f"{steps[0].ess:.1f}" in footer[0]
        assert footer[1].startswith("tok") and str(steps[-1].t) in footer[1]
        body = [grid.render_line(1 + i).text for i in range(grid.rows)]
        assert body[answer].startswith("❯★")
        assert [row[2:].split()[0] for row in body] == [f"p{i}" for i in range(1, grid.rows + 1)]  # p1..pP, from 1
        after_resampling = next(s for s in range(1, len(steps)) if steps[s - 1].resampled)
        # every cell after a resampling names its parent
        col = after_resampling - grid.left
        assert all(f"←{steps[after_resampling - 1].parents[i] + 1}" in row[grid.label_width + col * grid.cell_width:]
                   for i, row in enumerate(body))
        assert "✗" in "".join(body)  # a particle the resampling dropped
        # a cell of the block after the resampling: its parent, its text up to there
        await pilot.press(*["left"] * (last - after_resampling), "up")
        assert (grid.col, grid.row) == (after_resampling, answer - 1)
        inspector = text_of(app, "#inspector")
        parent = steps[after_resampling - 1].parents[answer - 1]
        assert f"particle {answer} after block {after_resampling + 1}" in inspector
        assert f"descends from particle {parent + 1} of block {after_resampling} (resampled)" in inspector
        share = run.shares(after_resampling)[answer - 1]
        assert f"weight share {share:.4f}" in inspector
        assert f"{share:.2f}" in grid.render_line(1 + answer - 1).text  # the number in the selected cell
        stats = text_of(app, "#stats")
        assert "resamplings 2" in stats and f"last ESS {steps[-1].ess:.2f}" in stats and "answer log-lik" in stats
        # back to the MH session's last round: the tree again
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert scr.cursor == (0, len(scr.state.sessions[0].rounds) - 1)
        await wait_until(pilot, lambda: scr.query_one("#tree", RoundTreeView).display and not grid.display)
        assert "node #" in text_of(app, "#inspector")


async def test_m_on_a_baseline_session_says_in_one_line_it_has_no_chains():
    """`m` opened the chains view on a baseline ("chain 0 of 1 ... 0 transitions"); it says why not,
    as `t`, `H` and `o` do, and opens the chains of an MH session as before."""
    from presto_tui.views.screens.chains import ChainsScreen

    app = replay_app(baselines_trace())
    async with app.run_test(size=(120, 34), notifications=True) as pilot:
        scr = app.screen
        await pilot.press("end")  # PowerSMC's place
        await pilot.press("m")
        await wait_until(pilot, lambda: any("m: one session" in t for t in toasts(app)))
        (said,) = [t for t in toasts(app) if t.startswith("m:")]
        assert "no rounds: a one-shot session" in said and app.screen is scr
        await pilot.press("enter")  # a particle of PowerSMC has no chain to open (resample-move's have)
        await wait_until(pilot, lambda: any("PowerSMC's particles make no MH moves" in t for t in toasts(app)))
        assert app.screen is scr
        await pilot.press("home", "m")  # the MH session
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))


async def test_compare_of_baseline_sessions_shows_what_stats_shows_for_them():
    """Two baselines compared showed transitions 0, acceptance 0.00 and an empty acceptance plot;
    beside an MH chain, a baseline showed the chain's settings (epsilon, K) as its own."""
    from rich.console import Console

    from presto_tui.views.screens.compare import CompareScreen

    def shown(app) -> str:
        console = Console(width=200, record=True, file=__import__("io").StringIO())
        console.print(app.screen.query_one("#cmp-params-body").content)
        return console.export_text()

    trace = baselines_trace()
    app = replay_app(trace, compare=(1, 2))  # best-of-N and PowerSMC
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.pause()
        body = shown(app)
        names = [ln.split()[1] if ln.startswith("≠") else (ln.split() or [""])[0] for ln in body.splitlines()]
        assert "transitions" not in names and "acceptance" not in names
        sa, sb = (app.screen.state.sessions[i].summary for i in (1, 2))
        for label, a, b in (("log-lik/token", f"{sa.answer_loglik:.3f}", f"{sb.answer_loglik:.3f}"),
                            ("confidence", f"{sa.answer_confidence:.3f}", f"{sb.answer_confidence:.3f}"),
                            ("tokens generated", str(sa.tokens_generated), str(sb.tokens_generated)),
                            ("time s", f"{sa.wall_s:.2f}", f"{sb.wall_s:.2f}")):
            (line,) = [ln for ln in body.splitlines() if ln.lstrip("≠ ").startswith(label)]
            assert line.split()[-2:] == [a, b], line
        assert "steps" not in body and "budget" not in body and "prefetch" not in body
        assert not app.screen.query_one("#cmp-plot").display  # no transitions: no acceptance to plot
    app = replay_app(trace, compare=(0, 1))  # an MH chain and best-of-N
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.pause()
        body = shown(app)
        shared = next(ln for ln in body.splitlines() if ln.startswith("same in both"))
        assert "epsilon" not in shared and "inputs" not in shared  # the chain's, not best-of-N's
        (eps,) = [ln for ln in body.splitlines() if ln.startswith("≠ epsilon")]
        assert eps.split()[-1] == "-"
        (tr,) = [ln for ln in body.splitlines() if ln.lstrip("≠ ").startswith("transitions")]
        assert tr.split()[-2:] == [str(app.screen.state.sessions[0].summary.transitions), "-"]
        assert app.screen.query_one("#cmp-plot").display


def baseline_only_trace(tmp_path: Path) -> Path:
    path = tmp_path / "only.jsonl"
    b = SyntheticEngine()
    params = SamplerParams(sampler="lowtemp", prefetch="none", max_new_tokens=12)
    with TraceWriter(path, command="test", backend=b.name, model=b.model, params=params.to_dict(),
                     pieces=b.token_pieces) as w:
        for ev in run_session(b, params, b.encode_prompt("a dog"), prompt="a dog"):
            w.write(ev)
    return path


async def test_overview_and_search_on_a_baseline_session_say_there_are_no_rounds(tmp_path):
    app = replay_app(baselines_trace())
    async with app.run_test(size=(120, 34), notifications=True) as pilot:
        scr = app.screen
        await pilot.press("end", "o")
        await wait_until(pilot, lambda: any("no rounds: a one-shot session" in t for t in toasts(app)))
        assert app.screen is scr
        # the trace has rounds in its first session: a search from here finds them
        await pilot.press("slash", *"k=1", "enter")
        await wait_until(pilot, lambda: scr.cursor[0] == 0)
        assert "session 1" in scr.search_status and scr.query_one("#tree", RoundTreeView).display
        await pilot.press("n", "n", "N")
        assert scr.cursor[0] == 0
        # the overview of the MH session; its next session is a baseline: no rounds to draw
        await pilot.press("o")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "OverviewScreen")
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: "no rounds: a one-shot session" in text_of(app, "#ov-text-body"))
        await pilot.press("enter")  # nothing to open
        await wait_until(pilot, lambda: app.screen is scr)
    # a trace of baseline sessions only: nothing to search
    only = replay_app(read_trace(baseline_only_trace(tmp_path)))
    async with only.run_test(size=(120, 34), notifications=True) as pilot:
        await pilot.press("slash")
        await wait_until(pilot, lambda: any("nothing to search" in t for t in toasts(only)))
        assert not only.screen.query_one("#search-row").display
        await pilot.press("o", "right_square_bracket", "e")  # nothing here may raise
        await pilot.press("escape")


def test_replay_takes_a_trace_of_baseline_sessions_only(tmp_path, monkeypatch):
    path = baseline_only_trace(tmp_path)
    ran = []
    monkeypatch.setattr("presto_tui.views.app.PrestoApp.run", lambda self: ran.append(self))
    res = runner.invoke(cli_app, ["replay", str(path)])
    assert res.exit_code == 0, res.output
    assert len(ran) == 1


# -- the app: chat --------------------------------------------------------------------------------------

def make_chat(backend, **params):
    session = ChatSession(engine_factory=lambda model: backend)
    return chat_app(session, SamplerParams(**params), backend="synthetic", model=None)


async def test_chat_grows_the_particle_grid_as_blocks_arrive():
    engine = GatedEngine(counted=True)  # each PowerSMC block waits until the test lets it through
    app = make_chat(engine, sampler="powersmc", prefetch="none", particles=5, smc_block=4, max_new_tokens=24)
    async with app.run_test(size=(120, 34)) as pilot:
        scr = app.screen
        scr.query_one("#prompt").focus()
        await pilot.press(*"the cat", "enter")
        await wait_until(pilot, lambda: bool(scr.query(ParticleGrid)))  # made when the first session needs it
        grid = scr.query_one(ParticleGrid)
        try:
            for block in (1, 2):  # drawn block by block, as each arrives; no answer until the end
                engine.let_through()
                # drawn: the title says so (the state takes the block a frame before the screen)
                drawn = f"block {block} of at most 6"
                await wait_until(pilot, lambda d=drawn: grid.display and d in text_of(app, "#tree-title"))
                assert grid.columns == block
                assert (grid.col, grid.row) == (block - 1, 0)  # following the newest block
                assert "no answer yet" in text_of(app, "#stats") and "★" not in text_of(app, "#inspector")
        finally:
            engine.let_through(100)
        await wait_until(pilot, lambda: scr.state.current.status == "done" and not scr.running)
        run = scr.state.current.method_run
        await wait_until(pilot, lambda: grid.columns == len(run.steps))
        assert run.choice is not None
        last, answer = run.chosen_text_step()
        assert (grid.col, grid.row) == (last, answer)  # it followed the newest block, then the answer
        assert "★ the answer" in text_of(app, "#inspector")
        assert text_of(app, "#stats").startswith("done")


async def test_settings_offer_the_baselines_and_hide_what_does_not_apply():
    backend = ScriptedEngine()
    app = make_chat(backend, max_new_tokens=24, budget=6)
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        await pilot.press("ctrl+s")
        await pilot.pause()
        dialog = app.screen
        assert "one-shot samplers lowtemp bestofn powersmc sps" in text_of(app, "#settings-note")
        assert dialog.query_one("#row-budget").display and not dialog.query_one("#row-samples").display
        dialog.query_one("#f-sampler").value = "bestofn"
        await pilot.pause()
        for name in ("prefetch", "inputs", "budget", "steps", "epsilon", "block_size", "particles"):
            assert not dialog.query_one(f"#row-{name}").display, name
        for name in ("samples", "bon_rank", "alpha", "tau", "max_new_tokens", "seed"):
            assert dialog.query_one(f"#row-{name}").display, name
        assert "best-of-N is a one-shot sampler" in text_of(app, "#settings-note")
        dialog.query_one("#f-budget").value = "0"  # out of view: not read, so no error from it
        dialog.query_one("#f-samples").value = "3"
        dialog.query_one("#f-bon_rank").value = "logp"
        await pilot.click("#save")
        await pilot.pause()
        assert app.screen is scr
        p = scr.params
        assert (p.sampler, p.prefetch, p.samples, p.bon_rank, p.budget) == ("bestofn", "none", 3, "logp", 6)
        scr.query_one("#prompt").focus()
        await pilot.press(*"a dog", "enter")
        table = scr.query_one(SampleTable)
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.status == "done" and table.rows == 3)
        assert "ranked by log p0" in text_of(app, "#tree-title")
        # back to a chain: its rule starts anew (a baseline's "none" was forced, not chosen)
        await pilot.press("ctrl+s")
        await pilot.pause()
        dialog = app.screen
        assert dialog.query_one("#f-prefetch").value == SamplerParams().prefetch
        dialog.query_one("#f-sampler").value = "powersmc"
        await pilot.pause()
        assert dialog.query_one("#row-particles").display and not dialog.query_one("#row-samples").display
        dialog.query_one("#f-sampler").value = "powermh"
        await pilot.pause()
        assert dialog.query_one("#row-budget").display and not dialog.query_one("#row-particles").display


# -- snapshots --------------------------------------------------------------------------------------------

def test_snapshot_best_of_n_samples(snap_compare):
    assert snap_compare(replay_app(baselines_trace()), press=["end", "left_square_bracket", "down"],
                        terminal_size=(120, 32))


def test_snapshot_powersmc_particles(snap_compare):
    assert snap_compare(replay_app(baselines_trace()), press=["end", "left", "up"], terminal_size=(120, 32))


# -- stats ------------------------------------------------------------------------------------------------

def record(path: Path, params_list, prompts=("the cat", "a dog")) -> None:
    b = SyntheticEngine()
    with TraceWriter(path, command="test", backend=b.name, model=b.model, params=params_list[0].to_dict(),
                     pieces=b.token_pieces) as w:
        for params in params_list:
            for prompt in prompts:
                for ev in run_session(b, params, b.encode_prompt(prompt), prompt=prompt):
                    w.write(ev)


def test_stats_gives_baselines_their_own_numbers_and_pools_them_on_their_own_parameters(tmp_path):
    path = tmp_path / "mixed.jsonl"
    bon = SamplerParams(sampler="bestofn", prefetch="none", samples=4, max_new_tokens=24)
    kinds = [SamplerParams(max_new_tokens=12, steps=4, budget=4),
             bon,
             bon.with_(steps=7, budget=3, epsilon=0.2),  # an MH chain's settings: not the baseline's, pooled
             bon.with_(samples=5),  # its own N: apart
             SamplerParams(sampler="powersmc", prefetch="none", particles=4, smc_block=6, max_new_tokens=24, seed=3)]
    record(path, kinds)
    res = runner.invoke(cli_app, ["stats", str(path), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    rows, groups = d["sessions"], d["pooled"]
    assert [r["one_shot"] for r in rows] == [False] * 2 + [True] * 8
    assert {r["rule"] for r in rows[2:]} == {"one-shot"}
    for r in rows[2:]:
        assert r["answer_loglik"] is not None and r["answer_confidence"] is not None and r["wall_s"] > 0
        assert "steps" not in r["comparable"] and "budget" not in r["comparable"]
    assert rows[2]["comparable"]["samples"] == 4 and rows[-1]["comparable"]["particles"] == 4
    assert [g["sessions"] for g in groups] == [2, 4, 2, 2]  # bestofn N=4 pooled over K and budget
    g = groups[1]
    assert g["one_shot"] and g["comparable"]["sampler"] == "bestofn"
    members = [r for r in rows if r["group"] == g["group"]]
    assert g["answer_loglik_mean"] == pytest.approx(sum(r["answer_loglik"] for r in members) / 4)
    assert g["wall_s_mean"] == pytest.approx(sum(r["wall_s"] for r in members) / 4)
    smc = groups[-1]
    assert smc["resamplings"] == sum(r["resamplings"] for r in rows if r["group"] == smc["group"])
    # the tables: the chain's rows among the sessions, the baselines' in their own table
    out = runner.invoke(cli_app, ["stats", str(path)], env={"COLUMNS": "200"}).stdout
    chain_part, baseline_part = out.split("one-shot sessions and populations (tr, acc: a population's transitions")
    assert "best-of" not in chain_part and "PowerMH" in chain_part
    header = next(ln for ln in baseline_part.splitlines() if "prompt" in ln)
    for col in ("time s", "tokens", "drawn", "resampl.", "ESS", "ll/tok", "conf"):
        assert col in header
    assert "tr/call" not in header
    smc_line = next(ln for ln in baseline_part.splitlines() if f"[1]#{rows[-1]['session']} " in ln)
    assert "PowerSMC P=4 B=6 R=9 " in smc_line  # the ramp unset: 400/1024 of n = 24, rounded
    assert f"{rows[-1]['last_ess']:.2f}" in smc_line and f"{rows[-1]['answer_loglik']:.3f}" in smc_line
    assert "pooled one-shot sessions" in baseline_part and "best-of-5" in baseline_part


# -- one-shot methods under --chains M: the M answers and their vote --------------------------------

@pytest.mark.parametrize("sampler", ["bestofn", "sps"])
async def test_one_shot_chains_show_chain_i_of_m_and_m_shows_their_answers_and_vote(tmp_path, sampler):
    """`m` answered "needs MH chains" for the chains of a one-shot method, and their title said nothing
    of which chain: now the title says "chain i of M", and the chains view shows every chain's answer
    and the vote in the place of the (transition-less) plots; stats names no K for them."""
    from presto_tui.views.screens.chains import ChainsScreen

    path = tmp_path / "t.jsonl"
    res = runner.invoke(cli_app, ["run", "the cat", "--sampler", sampler, "--chains", "3", "-n", "8",
                                  "--trace", str(path)])
    assert res.exit_code == 0, res.output
    app = replay_app(read_trace(path))
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        await pilot.press("end")
        await wait_until(pilot, lambda: "chain 3 of 3" in text_of(app, "#tree-title"))
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ChainsScreen))
        await pilot.pause()
        side = rendered(app, "#ch-diagnostics")
        assert "answer" in side and "chain 1" in side and "chain 3" in side
        assert not app.screen.query_one("#ch-plots").display
        await pilot.press("b")  # nothing to thin: said, nothing opens
        await pilot.pause()
        assert isinstance(app.screen, ChainsScreen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is scr)
    out = runner.invoke(cli_app, ["stats", str(path)], env={"COLUMNS": "200"}).stdout
    assert "(3 chains: " in out and "x K=" not in out


async def test_the_help_lists_every_sampler_with_its_kind():
    from presto_tui.runtime.core import registry

    app = replay_app(baselines_trace())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        text = " ".join(rendered(app, "#help-text").split())
    assert "MH chains" in text and "one-shot samplers" in text
    for m in registry.methods():
        assert f"{m.name} {m.display}: {m.help}" in text
