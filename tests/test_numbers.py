"""Numbers on screen that add up: the inspector's log-ratio equation, one word for a session's
unit (round or epoch), and the overview's rates (Pilot, from recorded traces)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import small_backend, text_of, wait_until

from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.mh import Score
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.runner import run_session
from presto_tui.views.app import replay_app
from presto_tui.views.widgets.tree import RoundTreeView

DATA = Path(__file__).parent / "data"


def record(path: Path, sessions: list[SamplerParams]) -> Path:
    backend = small_backend()
    with TraceWriter(path, command="test", backend=backend.name, model=backend.model,
                     params=sessions[0].to_dict(), pieces=backend.token_pieces) as w:
        for params in sessions:
            for ev in run_session(backend, params, [1, 2], prompt=params.sampler):
                w.write(ev)
    return path


def equation(inspector: str) -> tuple[float, list[tuple[int, str, float]]]:
    """(log r, [(sign, name, value)]) read off the inspector's `log r = X = name v + name v ...` line."""
    (line,) = [ln for ln in inspector.splitlines() if ln.startswith("log r = ")]
    _, shown, rhs = line.split(" = ", 2)
    terms, sign, name = [], 1, []
    for tok in rhs.split(" "):
        if tok in ("+", "-"):
            sign = 1 if tok == "+" else -1
            continue
        try:
            value = float(tok)
        except ValueError:
            name.append(tok)
            continue
        terms.append((sign, " ".join(name), value))
        name = []
    assert not name, line  # every name has its number
    return float(shown), terms


SAMPLERS = {  # sampler -> the terms its equation must name
    "powermh": ["target", "proposal"],
    "entropycut": ["target", "proposal", "reverse move"],
    "multitry": ["log W", "log(1+W-w_J)"],
}


async def test_inspector_log_ratio_adds_up_for_every_sampler(tmp_path):
    base = dict(prefetch="spine", max_new_tokens=12, steps=6, budget=8, seed=4)
    path = record(tmp_path / "samplers.jsonl", [SamplerParams(sampler=s, **base) for s in SAMPLERS])
    app = replay_app(read_trace(path))
    async with app.run_test(size=(140, 40)) as pilot:
        scr = app.screen
        tree = scr.query_one("#tree", RoundTreeView)
        seen = {s: 0 for s in SAMPLERS}
        apart = {"entropycut": 0, "multitry": 0}  # nodes where target + proposal alone is not log r
        for i in range(scr.state.total_rounds):
            scr.go_to(i)
            s, _ = scr.cursor
            sampler = scr.state.sessions[s].params["sampler"]
            for v in list(tree.round_tree.iter_nodes()):
                if v.score is None:
                    continue
                tree.select(v.id)
                await wait_until(pilot, lambda v=v: f"node #{v.id} " in text_of(app, "#inspector"))
                shown, terms = equation(text_of(app, "#inspector"))
                assert [n for _, n, _ in terms] == SAMPLERS[sampler]
                assert shown == pytest.approx(v.score.log_ratio, abs=5e-4)  # the decision's own log r
                # the terms add up to the shown log r, to the shown precision (each rounded by 5e-4)
                assert math.fsum(sign * x for sign, _, x in terms) == pytest.approx(
                    shown, abs=5e-4 * (len(terms) + 1) + 1e-9)
                seen[sampler] += 1
                if sampler in apart and abs(v.score.log_target + v.score.log_proposal - v.score.log_ratio) > 0.01:
                    apart[sampler] += 1
        assert all(seen.values()), seen
        assert all(apart.values()), apart  # the test says something only where the old line was wrong


def test_terms_that_do_not_add_up_are_called_inconsistent():
    """A crafted trace may record terms that do not sum to its log r: say so, do not hide it."""
    from presto_tui.views.state.ratio import ratio_text

    sc = Score(log_q_x=-1.0, log_q_y=-2.0, log_p_x=-3.0, log_p_y=-3.5, log_target=-2.0, log_proposal=1.0,
               log_ratio=0.25, accept_prob=1.0, eps_class="accept")
    text = str(ratio_text(sc))
    assert "sum to -1.000, not log r" in text
    ok = Score(-1.0, -2.0, -3.0, -3.5, -2.0, 1.0, -1.0, math.exp(-1.0), "uncertain")
    assert "inconsistent" not in str(ratio_text(ok))


# -- the overview's rates ---------------------------------------------------------------------------

def stream_trace(span: float | None = None):
    """The streaming fixture; `span`: give its zero-length epochs this span instead (a real engine's
    clock moves a few microseconds between decisions walked in one step)."""
    import dataclasses

    from presto_tui.runtime.session.events import RoundDone

    trace = read_trace(DATA / "stream.jsonl")
    if span is not None:
        for sess in trace.sessions:
            sess.events[:] = [dataclasses.replace(e, call_wall_s=span) if isinstance(e, RoundDone)
                              and e.call_wall_s == 0 else e for e in sess.events]
    return trace


@pytest.mark.parametrize("span", [None, 2e-6])
async def test_stream_rates_come_from_windows_of_engine_time_not_from_an_epochs_span(span):
    from presto_tui.views.screens.overview import OverviewScreen

    trace = stream_trace(span)
    epochs = trace.sessions[0].rounds
    short = [i for i, e in enumerate(epochs) if e.call_wall_s <= 2e-6 and e.tree.transitions]
    assert len(short) >= 3  # several decisions walked in one engine step close epochs of no duration
    app = replay_app(trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen))
        ov = app.screen
        series, summary = ov.series, ov.state.sessions[0].summary
        dots, cols = series.rates(), series.columns
        w = series.window_s
        assert w > 0 and f"tr/s over {w:g} s of engine time (dots)" in ov.rate_title()
        # every epoch walked a decision inside its own window, and no window holds more than every
        # transition (dividing by an epoch's span gives 0 for a span of 0, and about a million a second
        # for 2 microseconds)
        assert all(0 < rate <= summary.transitions / w for rate in dots), dots
        assert len(dots) == len(cols) == len(epochs)
        assert cols[-1].cum_rate == pytest.approx(summary.transitions_per_s)  # the line: the running rate


# -- one word for one thing: a streaming session has epochs, a round rule rounds ------------------------

async def test_a_streaming_session_says_epoch_everywhere_and_a_round_rule_round(tmp_path):
    from presto_tui.views.screens.overview import OverviewScreen
    from presto_tui.views.widgets.strips import CutStrip

    app = replay_app(read_trace(DATA / "classes.jsonl"))  # session 1: bfs rounds; session 2: streaming epochs
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        scr = app.screen
        rounds, epochs = (len(s.rounds) for s in scr.state.sessions)
        assert text_of(app, "#tree-title").startswith(f"round 1/{rounds} ")
        assert "rounds/s" in text_of(app, "#timeline")
        # go to: the dialog counts the session on screen in its own word, S:N in the target's
        await pilot.press("g")
        await wait_until(pilot, lambda: app.screen is not scr)
        assert f"Go to round (session 1 has {rounds} rounds" in str(app.screen.query_one("Static").content)
        await pilot.press("2", "colon", "1", "enter")
        await wait_until(pilot, lambda: app.screen is scr and scr.cursor == (1, 0))
        assert text_of(app, "#tree-title").startswith(f"epoch 1/{epochs} · session 2 of 2")
        assert "epochs/s" in text_of(app, "#timeline")
        assert scr.query_one("#output").border_title.startswith("epoch 1: ")
        await pilot.press("g")
        await wait_until(pilot, lambda: app.screen is not scr)
        assert f"Go to epoch (session 2 has {epochs} epochs" in str(app.screen.query_one("Static").content)
        await pilot.press("9", "9", "enter")
        await wait_until(pilot, lambda: "epochs 1 to" in text_of(app, "#goto-error"))
        assert text_of(app, "#goto-error") == f"session 2 has epochs 1 to {epochs}"
        await pilot.press("escape")
        # search: where a match is, in the session's word
        await pilot.press("slash", *"k=0-99", "enter")
        await wait_until(pilot, lambda: "node #" in text_of(app, "#search-status"))
        assert "session 2 epoch 1 node #" in text_of(app, "#search-status")
        # the overview: its counts, the selected column, the cut strip and the plots
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen))
        ov = app.screen
        info = text_of(app, "#ov-info")
        assert f"{epochs} epochs" in info and "epoch 1 selected" in info and "round" not in info
        assert text_of(app, "#ov-text-body").startswith("after epoch 1 ")
        strip = ov.query_one("#ov-cuts", CutStrip)
        assert strip.render_line(1).text.startswith("epoch")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is scr)
        # export: the file's name and its header
        await pilot.press("e")
        await wait_until(pilot, lambda: app.screen is not scr)
        app.screen.query_one("#export-folder").value = str(tmp_path)
        await pilot.press("t")
        await wait_until(pilot, lambda: any(tmp_path.glob("*-tree.txt")))
        (txt,) = tmp_path.glob("*-tree.txt")
        assert txt.name.endswith("-s2e1-tree.txt") and txt.read_text().startswith("session 2, epoch 1 ")
        # and back on a round rule's session, rounds
        await pilot.press("home")
        assert text_of(app, "#tree-title").startswith("round 1/") and "rounds/s" in text_of(app, "#timeline")
        await pilot.press("f1")  # the help says both
        await wait_until(pilot, lambda: app.screen is not scr)
        assert "Rounds (epochs in a streaming session)" in str(app.screen.query_one("#help-text").content.renderables)


async def test_browsing_back_in_a_streaming_chat_names_the_epoch():
    from presto_tui.runtime.session.chat import ChatSession
    from presto_tui.views.app import chat_app

    backend = small_backend()
    session = ChatSession(engine_factory=lambda model: backend)
    app = chat_app(session, SamplerParams(prefetch="stream", max_new_tokens=12, steps=6, budget=4),
                   backend="synthetic", model=None)
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        scr.query_one("#prompt").focus()
        await pilot.press(*"a dog", "enter")
        await wait_until(pilot, lambda: scr.state.current is not None and scr.state.current.status == "done")
        scr.query_one("#tree").focus()
        await pilot.press("home")
        await wait_until(pilot, lambda: "as of " in text_of(app, "#stats"))
        assert "as of epoch 1 of session 1" in text_of(app, "#stats")
        assert text_of(app, "#tree-title").startswith("epoch 1/")


# -- every decoded token counted once -------------------------------------------------------------

class CountingEngine:
    """The synthetic engine, counting every token it decodes (kept, aborted, or finished and dropped)."""

    def __new__(cls, seed: int):
        engine = small_backend(vocab=6, seed=seed)
        sample = engine._sample_one
        engine.decoded = 0

        def counted(r):
            engine.decoded += 1
            sample(r)
        engine._sample_one = counted
        return engine


@pytest.mark.parametrize("speculate", ["none", "block", "proposal,block", "proposal,block,extension"])
@pytest.mark.parametrize("seed", range(4))
def test_tokens_generated_counts_every_decoded_token(speculate, seed):
    """Speculated extensions for a state the block did not end in are waste, whether they were aborted
    or had already finished: `tokens_generated` (and so `waste`) must count them."""
    from presto_tui.runtime.session.summary import summarize

    engine = CountingEngine(seed)
    params = SamplerParams(prefetch="stream", max_new_tokens=24, block_size=6, steps=5, budget=12,
                           budget_policy="fill", speculate=speculate, seed=seed)
    summary = summarize(run_session(engine, params, [1, 2]))
    assert summary.status == "done"
    assert summary.tokens_generated == engine.decoded


def test_the_budget_reads_as_n_was_written():
    from presto_tui.runtime.core.params import AUTO_BUDGET, budget_text

    stream = SamplerParams(prefetch="stream")
    assert budget_text(stream.with_(budget=AUTO_BUDGET).to_dict()) == "auto"
    assert budget_text(stream.with_(budget=20).to_dict()) == "20"  # a cap of the shared policy
    assert budget_text(stream.with_(budget=20, budget_policy="cost").to_dict()) == "cost:20"
    assert budget_text(stream.with_(budget=AUTO_BUDGET, budget_policy="cost").to_dict()) == "cost:auto"
    assert budget_text(stream.with_(budget=8, budget_policy="fill").to_dict()) == "fill:8"
    assert budget_text(SamplerParams(prefetch="spine", budget=AUTO_BUDGET).to_dict()) == "64"


def test_a_sessions_time_counts_from_its_start_extension_included_under_concurrency(tmp_path, monkeypatch):
    """Six streamed sessions at once (`-C 6`): each one's time, rates and speedup estimate count from
    its start, its overlapped extension included, the same in `run --json`, `stats` and the API.
    (They reported the epochs alone: 0.227 s beside a 0.778 s extension, 35 transitions a second and
    a speedup of 5.15x for sessions whose own clock ran 1.005 s.)"""
    import json

    from typer.testing import CliRunner

    import presto_tui
    from presto_tui.cli import app
    from presto_tui.logs.stats import session_rows

    monkeypatch.chdir(tmp_path)
    prompts = ["the cat", "What is 7 * 8?", "a dog ran", "hello there", "small tree", "one two three"]
    (tmp_path / "p.txt").write_text("\n".join(prompts) + "\n")
    res = CliRunner().invoke(app, ["run", "--prompts-file", "p.txt", "-C", "6", "-n", "32", "-K", "8",
                                   "--prefetch", "stream", "--json", "--trace", "t.jsonl"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
    trace = read_trace(tmp_path / "t.jsonl")
    for row, sess in zip(rows, trace.sessions):
        s = sess.summary()
        clock = max(e.clock for e in sess.rounds)  # the session's own clock at its last epoch
        assert row["wall_s"] == pytest.approx(clock) and row["wall_s"] >= row["extend_time_s"] > 0
        assert row["transition_time_s"] < row["extend_time_s"]  # the epochs alone: what wall_s was
        assert row["transitions_per_s"] == pytest.approx(row["transitions"] / clock)
        per_token = (s.single_request_s / s.single_request_tokens if s.single_request_tokens else
                     s.engine_cost.a + s.engine_cost.b)  # (an extension decoded beside proposals: the learned step)
        ext = sum(b.T - b.L for b in s.path)
        assert row["speedup_estimate"] == pytest.approx((s.sequential_tokens + ext) * per_token / clock)
        assert row["speedup_transitions"] == pytest.approx(s.sequential_tokens * per_token / row["transition_time_s"])
    printed = session_rows([trace])
    for key in ("wall_s", "transitions_per_s", "speedup_estimate"):
        assert [r[key] for r in printed] == pytest.approx([r[key] for r in rows]), key
    results = presto_tui.sample(presto_tui.Engine(backend="synthetic"), prompts,
                                {"max_new_tokens": 32, "steps": 8, "prefetch": "stream"}, concurrency=6)
    assert [r.chains[0].summary.wall_s for r in results] == pytest.approx([r["wall_s"] for r in rows])


@pytest.mark.parametrize("text", ["auto", "20", "cost:auto", "cost:20", "fill:8"])
def test_every_budget_reads_back_as_it_was_written(text):
    from presto_tui.runtime.core.params import budget_text
    from presto_tui.runtime.core.spec import read_budget

    assert budget_text({"prefetch": "stream", **read_budget("-N", text)}) == text


def test_a_budget_names_its_policy_or_the_shared_one():
    from presto_tui.errors import InputError
    from presto_tui.runtime.core.params import AUTO_BUDGET
    from presto_tui.runtime.core.spec import read_budget

    assert read_budget("-N", "12") == {"budget": 12, "budget_policy": "shared"}
    assert read_budget("-N", "cost:auto") == {"budget": AUTO_BUDGET, "budget_policy": "cost"}
    for bad in ("fill:auto", "cost:", "shared:x", "cost:fill:3"):
        with pytest.raises(InputError, match="auto, cost:N or fill:N"):
            read_budget("-N", bad)
