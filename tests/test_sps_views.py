"""A Scalable Power Sampling session in the app: its steps as rows, their candidates as columns.

From a trace recorded here (the synthetic backend) and live in a chat: the grid's rows are the
steps, the chunk drawn carries the star and the path band, and the inspector shows the selected
candidate's recorded log p0, zeta, plug-in, jackknife and probability.
"""

from __future__ import annotations

from pathlib import Path

from helpers import text_of, wait_until
from test_baseline_views import make_chat

from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.methods.sps import SpsStep
from presto_tui.runtime.session.events import SessionEnd
from presto_tui.runtime.session.runner import run_session
from presto_tui.views.app import replay_app
from presto_tui.views.state.reducer import AppState
from presto_tui.views.state.sps import SpsRun
from presto_tui.views.widgets.sps import SpsGrid
from presto_tui.views.widgets.tree import RoundTreeView

PARAMS = SamplerParams(sampler="sps", prefetch="none", max_new_tokens=24, sps_chunk=4, sps_top_k=3, sps_draws=6,
                       sps_rollouts=3, seed=4)


def record(path: Path, params_list: list[SamplerParams], prompt: str = "the cat") -> Path:
    b = SyntheticEngine()
    with TraceWriter(path, command="test", backend=b.name, model=b.model, params=params_list[0].to_dict(),
                     pieces=b.token_pieces) as w:
        for params in params_list:
            for ev in run_session(b, params, b.encode_prompt(prompt), prompt=prompt):
                w.write(ev)
    return path


def test_the_run_folds_the_steps_and_reads_an_untrusted_index_as_nothing():
    b = SyntheticEngine()
    events = list(run_session(b, PARAMS, b.encode_prompt("the cat")))
    state = AppState()
    for ev in events:
        state.apply(ev)
    run = state.sessions[0].method_run
    assert isinstance(run, SpsRun)
    steps = [e for e in events if isinstance(e, SpsStep)]
    assert run.steps == steps and state.sessions[0].positions == 1
    end = events[-1]
    assert isinstance(end, SessionEnd) and run.path() == end.tokens
    for s, st in enumerate(steps):
        assert run.path(s) == end.tokens[:st.position]
        c = run.candidate(s, st.chosen)
        assert c is not None and c.chosen and c.tokens == run.chosen(s) and c.prob == st.probs[st.chosen]
    assert run.candidate(len(steps), 0) is None and run.candidate(0, 99) is None
    assert run.chosen(-1) == () and SpsRun().width == 0


async def test_replay_shows_the_steps_and_the_inspector_the_candidates_numbers(tmp_path):
    trace = read_trace(record(tmp_path / "t.jsonl", [SamplerParams(max_new_tokens=12, steps=4, budget=4), PARAMS]))
    app = replay_app(trace)
    async with app.run_test(size=(120, 34)) as pilot:
        scr = app.screen
        await pilot.press("end")
        grid = scr.query_one(SpsGrid)
        await wait_until(pilot, lambda: grid.display)
        assert not scr.query_one("#tree", RoundTreeView).display
        run = scr.state.sessions[1].method_run
        steps = run.steps
        last = len(steps) - 1
        assert (grid.row, grid.col) == (last, steps[last].chosen)  # the newest chunk drawn is selected
        assert grid.rows == len(steps) and grid.columns == max(len(st.candidates) for st in steps)
        inspector = text_of(app, "#inspector")
        assert f"step {last + 1} of {len(steps)} at token {steps[last].position}" in inspector
        assert "★ drawn" in inspector
        # the chosen cell of every row carries the star; each row ends with its chunk's words
        body = [grid.render_line(1 + s).text for s in range(grid.rows)]
        for s, line in enumerate(body):
            cells = line[grid.label_width:grid.label_width + grid.shown_columns() * grid.cell_width]
            assert cells.count("★") == 1 and cells.index("★") == steps[s].chosen * grid.cell_width
            text = line[grid.label_width + grid.shown_columns() * grid.cell_width:]
            words = "".join(scr.state.pieces([t for t in run.chosen(s)[:2] if t != 0])).split()  # (0: EOS)
            assert (words[0] in text) if words else text.strip() == "∎"
        assert body[last].startswith("❯")
        assert f"{steps[last].probs[steps[last].chosen]:.3f}"[:5] in body[last]  # the selected cell's number
        # a step with rollouts: move to a candidate that was not drawn and read its numbers
        s = next(i for i, st in enumerate(steps) if any(st.log_weights) and len(st.candidates) > 1)
        k = next(j for j in range(len(steps[s].candidates)) if j != steps[s].chosen)
        await pilot.press(*["up"] * (last - s))
        await pilot.press(*(["left"] * (grid.col - k) if grid.col > k else ["right"] * (k - grid.col)))
        assert (grid.row, grid.col) == (s, k)
        st = steps[s]
        inspector = text_of(app, "#inspector")
        assert f"candidate {k + 1} of {len(st.candidates)}" in inspector and "★" not in inspector.splitlines()[0]
        assert f"log p0 of the chunk {st.log_p0[k]:.3f}" in inspector
        if st.log_weights[k]:
            assert f"log zeta_hat {st.log_zeta[k]:.3f} from {len(st.log_weights[k])} rollouts" in inspector
        assert f"plug-in (eq. 4) {st.plain[k]:.4f}" in inspector
        assert f"jackknife (eq. 5) {st.jackknife[k]:.4f}" in inspector
        assert f"drawn with probability {st.probs[k]:.4f}" in inspector
        # the title, the stats and the answer pane speak of SPS
        title = text_of(app, "#tree-title")
        assert "Scalable Power Sampling K=3 of L=6 draws" in title and "session 2 of 2" in title
        stats = text_of(app, "#stats")
        assert f"step {len(steps)} of at most 6" in stats and f"rollouts {run.rollouts}" in stats
        assert "answer log-lik" in stats
        assert "the answer: the path of" in scr.query_one("#output").border_title
        # back to the MH session: the tree again
        await pilot.press("left_square_bracket")
        await wait_until(pilot, lambda: scr.query_one("#tree", RoundTreeView).display and not grid.display)


async def test_chat_grows_the_grid_a_step_at_a_time():
    app = make_chat(SyntheticEngine(), **{k: v for k, v in PARAMS.to_dict().items() if k != "sps_draws"},
                    sps_draws=6)
    async with app.run_test(size=(120, 34)) as pilot:
        scr = app.screen
        scr.query_one("#prompt").focus()
        await pilot.press(*"the cat", "enter")
        grid = scr.query_one(SpsGrid)
        await wait_until(pilot, lambda: grid.display and scr.state.current.status == "done")
        run = scr.state.current.method_run
        await wait_until(pilot, lambda: grid.rows == len(run.steps) and grid.row == len(run.steps) - 1)
        assert "★ drawn" in text_of(app, "#inspector")
