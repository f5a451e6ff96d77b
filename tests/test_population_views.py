"""Parallel tempering and resample-move in the app: the replicas' grid (which replica holds which
state at each barrier, the swaps), resample-move's particles on PowerSMC's grid with their moved
states, in a replay and live in chat."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import GatedEngine, text_of, wait_until
from textual.widgets._toast import Toast

from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.methods.ppt import PtStep
from presto_tui.runtime.methods.resample_move import RmStep
from presto_tui.runtime.session.chat import ChatSession
from presto_tui.runtime.session.events import Choice, SessionEnd, Transition
from presto_tui.runtime.session.runner import run_session
from presto_tui.views.app import chat_app, replay_app
from presto_tui.views.state.reducer import AppState
from presto_tui.views.widgets.baseline import ParticleGrid
from presto_tui.views.widgets.ppt import ReplicaGrid
from presto_tui.views.widgets.tree import RoundTreeView

PPT = SamplerParams(sampler="ppt", max_new_tokens=16, steps=8, seed=1, pt_swap_every=2)
RM = SamplerParams(sampler="resample-move", particles=4, max_new_tokens=16, block_size=4, steps=3, seed=2, rm_ess=0.9)


def toasts(app) -> list[str]:
    return [str(t.render()) for t in app.screen.query(Toast)]


def population_trace(tmp_path):
    path = tmp_path / "pop.jsonl"
    b = SyntheticEngine()
    with TraceWriter(path, command="test", backend=b.name, model=b.model, params=SamplerParams().to_dict(),
                     pieces=b.token_pieces) as w:
        for params in (PPT, RM):
            for ev in run_session(b, params, b.encode_prompt("the cat"), prompt="the cat"):
                w.write(ev)
    return read_trace(path)


def test_the_replicas_fold_reads_who_holds_which_state_from_the_records(tmp_path):
    trace = population_trace(tmp_path)
    state = AppState()
    for ev in trace.sessions[0].events:
        state.apply(ev)
    run = state.sessions[0].method_run
    steps = [e for e in trace.sessions[0].events if isinstance(e, PtStep)]
    assert run.steps == steps and run.replicas == 4 and state.sessions[0].positions == 1
    assert run.level(0) == 3  # the first row is the alpha replica
    swapped = 0
    for s, st in enumerate(steps):
        for i, ok in zip(st.pairs, st.swapped):
            assert run.swap_at(s, i)[0] == i + 1 and run.swap_at(s, i + 1)[0] == i
            swapped += ok
            if ok and s:  # a swap exchanges the states the two replicas held
                assert run.holder(s, i) == run.holder(s - 1, i + 1)
    assert swapped > 0 and run.barriers() == sum(not st.final for st in steps)


async def test_replay_shows_the_replicas_over_the_barriers_and_resample_move_on_the_particle_grid(tmp_path):
    trace = population_trace(tmp_path)
    app = replay_app(trace)
    async with app.run_test(size=(120, 34)) as pilot:
        scr = app.screen
        await pilot.press("home")
        grid = scr.query_one(ReplicaGrid)
        await wait_until(pilot, lambda: grid.display and not scr.query_one("#tree", RoundTreeView).display)
        run = scr.state.sessions[0].method_run
        steps = run.steps
        assert (grid.rows, grid.columns) == (4, len(steps)) and (grid.row, grid.col) == (0, len(steps) - 1)
        lines = [grid.render_line(y).text for y in range(grid.rows + 2)]
        assert "b1" in lines[0] and lines[1].startswith("❯★r4 a=4")
        assert lines[-1].startswith("swaps")
        assert lines[1 + 3].lstrip().startswith("r1 a=1")  # the hottest replica last
        assert any("⇅" in line for line in lines[1:5])
        title = text_of(app, "#tree-title")
        assert "PPT R=4 alpha 1..4 S=2 deo PowerMH" in title and "4 replicas" in title
        inspector = text_of(app, "#inspector")
        end = next(e for e in trace.sessions[0].events if isinstance(e, SessionEnd))
        assert "replica 4 of 4, alpha 4" in inspector and "★ the alpha replica: the answer" in inspector
        assert end.text.strip()[:20] in inspector.replace("\n", " ")
        stats = text_of(app, "#stats")
        info = scr.state.sessions[0].summary.info
        pair = info.ladder.mean_accept()[-1]  # (the alpha replica's pair, first as the grid's rows go)
        assert f"round trips: {info.round_trips}" in stats and "barrier Lambda (Syed et al.): " in stats
        assert f"swap 4-3 (alpha 4/{run.exponents[2]:.3g}): mean A {pair:.2f} over {info.proposed[-1]}" in stats
        # a swap's cell: its pair, its A and whether it was taken
        s, level = next((s, i) for s, st in enumerate(steps) for i, ok in zip(st.pairs, st.swapped) if ok)
        await pilot.press(*["left"] * (grid.col - s), *["down"] * (run.replicas - 1 - level))
        assert (grid.col, grid.row) == (s, run.replicas - 1 - level)
        inspector = text_of(app, "#inspector")
        A = steps[s].accept_probs[steps[s].pairs.index(level)]
        assert f"replica {level + 1} of 4" in inspector and f"swap with replica {level + 2} proposed: A = {A:.3f}, " \
            "accepted" in inspector
        assert f"holds the state replica {steps[s].holders[level] + 1} began with" in inspector
        # resample-move: PowerSMC's grid, each particle's text its moved state and then its block
        await pilot.press("end")
        pgrid = scr.query_one(ParticleGrid)
        await wait_until(pilot, lambda: pgrid.display and not grid.display)
        rm = scr.state.sessions[1].method_run
        rsteps = [e for e in trace.sessions[1].events if isinstance(e, RmStep)]
        assert rm.steps == rsteps and pgrid.columns == 4
        for s in range(1, 4):
            for i in range(4):
                assert rm.tokens_at(s, i) == rsteps[s - 1].states[i] + rsteps[s].tokens[i]
        assert "PowerMH moves accepted" in text_of(app, "#stats") and "block 4 of 4" in text_of(app, "#tree-title")
        choice = next(e for e in trace.sessions[1].events if isinstance(e, Choice))
        assert "drawn by the final weights of 4 particles" in choice.rule


LIVE_PPT = SamplerParams(sampler="ppt", prefetch="none", max_new_tokens=8, steps=6, pt_swap_every=2, pt_replicas=3)


def gated_chat(params):
    """A chat on the synthetic engine whose calls the test lets through (`GatedEngine(counted=True)`)."""
    engine = GatedEngine(counted=True)
    return engine, chat_app(ChatSession(engine_factory=lambda model: engine), params, backend="synthetic", model=None)


async def ask(pilot, app):
    """Type a prompt into the chat and wait for its population's grid: the chat screen."""
    scr = app.screen
    scr.query_one("#prompt").focus()
    await pilot.press(*"the cat", "enter")
    await wait_until(pilot, lambda: bool(scr.query(ReplicaGrid)))
    return scr


async def let_through_until(pilot, engine, done, calls: int = 100) -> None:
    """Let the engine's calls through one at a time until `done()` (the other members' calls may come first)."""
    for _ in range(calls):
        if done():
            return
        engine.let_through(1)
        await pilot.pause(0.05)
    assert done()


async def test_chat_shows_the_replica_grid_growing_barrier_by_barrier():
    engine, app = gated_chat(LIVE_PPT)
    async with app.run_test(size=(120, 34), notifications=True) as pilot:
        scr = await ask(pilot, app)
        grid = scr.query_one(ReplicaGrid)
        try:
            scr.action_history()  # before the first barrier: no member to open yet (the prompt holds the keys)
            await wait_until(pilot, lambda: any("H: no member recorded yet" in t for t in toasts(app)))
            assert app.screen is scr
            engine.let_through(3)  # the extensions and the first two transitions of each replica
            # drawn: the title says so (the state takes the barrier a frame before the screen)
            await wait_until(pilot, lambda: grid.display and "barrier 1, 3 replicas" in text_of(app, "#tree-title"))
            assert grid.columns == 1 and (grid.row, grid.col) == (0, 0)
            assert "no answer yet" in str(scr.query_one("#output").border_title)
            assert "barriers 1" in text_of(app, "#stats")
        finally:
            engine.let_through(1000)
        await wait_until(pilot, lambda: scr.state.current.status == "done" and not scr.running)
        await wait_until(pilot, lambda: grid.columns == len(scr.state.current.method_run.steps))
        assert grid.columns == 4 and text_of(app, "#stats").startswith("done")  # three barriers and the end


async def test_the_members_and_a_replicas_chain_opened_in_chat_take_the_new_records_as_the_run_goes_on():
    """Opened mid-run, `m` (every member's trace) and a member's chain grew only when opened again."""
    from presto_tui.views.screens.members import MemberScreen, MembersScreen

    engine, app = gated_chat(LIVE_PPT)

    def cells(table) -> list[str]:
        return [" ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]

    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        scr = await ask(pilot, app)
        try:
            engine.let_through(3)  # to the first barrier
            await wait_until(pilot, lambda: "barrier 1, 3 replicas" in text_of(app, "#tree-title"))
            scr.action_chains()  # m
            await wait_until(pilot, lambda: isinstance(app.screen, MembersScreen)
                             and bool(app.screen.query("#members-table")))
            members = app.screen
            table = members.query_one("#members-table")
            await wait_until(pilot, lambda: table.row_count == 3)
            at_barrier_1 = cells(table)
            run = scr.state.current.method_run
            while len(run.steps) < 2:  # a call at a time, to the second barrier
                await wait_until(pilot, lambda: engine.waiting or len(run.steps) >= 2)
                if len(run.steps) < 2:
                    engine.let_through(1)
                    await wait_until(pilot, lambda: not engine.waiting or len(run.steps) >= 2)
            await wait_until(pilot, lambda: cells(table) != at_barrier_1)
            await pilot.press("enter")  # the first row's chain
            await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen)
                             and bool(app.screen.query("#member-records")))
            member = app.screen
            records = member.query_one("#member-records")
            await wait_until(pilot, lambda: records.row_count == 2)
            assert "2 records" in text_of(app, "#member-info")
        finally:
            engine.let_through(1000)
        await wait_until(pilot, lambda: scr.state.current.status == "done")
        await wait_until(pilot, lambda: records.row_count == 4)  # three barriers and the end
        assert records.cursor_row == 3 and "at the end" in text_of(app, "#member-inspector")  # (it followed)
        member.grown()  # a poll redraws the chain: the inspector shows the followed record at once, not "no record
        assert "at the end" in text_of(app, "#member-inspector")  # yet" until the cursor's message comes (it did)
        assert "4 records" in text_of(app, "#member-info") and app.screen is member


async def test_a_members_rounds_opened_in_chat_follow_its_new_rounds_as_they_come():
    """Under a round rule: a replica below alpha's chain, opened mid-run (H, then ]), plots its new transitions
    as they come (its own events, not the session's), and its own rounds (r) grow as its chain runs, the cursor
    on the last round following them."""
    from presto_tui.views.screens.member_rounds import MemberRoundsScreen
    from presto_tui.views.screens.members import MemberScreen

    params = LIVE_PPT.with_(prefetch="bfs", budget=2, steps=16, pt_swap_every=4)
    engine, app = gated_chat(params)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        scr = await ask(pilot, app)
        try:
            run = scr.state.current.method_run
            await let_through_until(pilot, engine, lambda: len(run.steps) >= 1)  # (the state: no overshoot)
            await wait_until(pilot, lambda: "3 replicas" in text_of(app, "#tree-title"))
            scr.main_view.focus()
            await pilot.press("H", "right_square_bracket")  # the answer's replica, then the one below it
            await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen) and app.screen.chain.member == 1)
            member, own = app.screen, scr.state.current.members[1]
            drawn = len(member.chain.draws)
            moves = lambda: sum(isinstance(e, Transition) for e in own.events)
            before = moves()
            await let_through_until(pilot, engine, lambda: moves() > before)  # (the state first: no overshoot)
            await wait_until(pilot, lambda: len(member.chain.draws) > drawn)  # then the screen took them
            await pilot.press("r")  # its own rounds
            await wait_until(pilot, lambda: isinstance(app.screen, MemberRoundsScreen))
            rounds = app.screen
            await wait_until(pilot, lambda: rounds.state.total_rounds >= 1)
            await pilot.press("end")
            seen = rounds.state.total_rounds
            await let_through_until(pilot, engine, lambda: rounds.state.total_rounds > seen)
            await wait_until(pilot, lambda: rounds.current_round() is own.rounds[-1])  # (it followed)
            assert "replica 2 of 3 (alpha 2) of session 1" in text_of(app, "#tree-title")
        finally:
            engine.let_through(1000)
        await wait_until(pilot, lambda: scr.state.current.status == "done")
        await wait_until(pilot, lambda: rounds.current_round() is own.rounds[-1] and own.status == "done")
        assert app.screen is rounds
        assert sum(r.k_after - r.k_before for r in own.rounds) == params.n_blocks * params.steps
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen))


async def test_replay_of_an_adaptive_ladder_shows_how_it_moved_and_where_it_froze(tmp_path):
    """--pt-ladder auto: the grid keeps one column per barrier (its ladder's moves are not barriers), each
    cell's inspector names the exponent the replica had then, and the stats panel lists every move, the
    frozen one last, with the rejection rates and Lambda it came from."""
    from presto_tui.runtime.methods.ppt import PtLadder

    params = SamplerParams(sampler="ppt", pt_ladder="auto", max_new_tokens=16, steps=8, seed=1, pt_swap_every=1)
    path = tmp_path / "auto.jsonl"
    b = SyntheticEngine()
    with TraceWriter(path, command="test", backend=b.name, model=b.model, params=params.to_dict(),
                     pieces=b.token_pieces) as w:
        for ev in run_session(b, params, b.encode_prompt("the cat"), prompt="the cat"):
            w.write(ev)
    trace = read_trace(path)
    moves = [e for e in trace.sessions[0].events if isinstance(e, PtLadder)]
    assert [u.step for u in moves] == [2, 4] and moves[-1].frozen
    app = replay_app(trace)
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        grid = scr.query_one(ReplicaGrid)
        await wait_until(pilot, lambda: grid.display)
        run = scr.state.sessions[0].method_run
        assert run.ladders == moves and all(isinstance(st, PtStep) for st in run.steps)
        assert grid.columns == len(run.steps) == 9  # 8 barriers and the end
        stats = text_of(app, "#stats").replace("\n", " ")
        first, frozen = moves
        assert "after the warm-up (the frozen ladder's barriers): swap 4-3" in stats and "earlier ladders" in stats
        assert f"ladder after barrier 2: {', '.join(f'{a:.3g}' for a in reversed(first.exponents))}" in stats
        assert f"ladder after barrier 4 (frozen): {', '.join(f'{a:.3g}' for a in reversed(frozen.exponents))}" \
            in stats and f"Lambda {frozen.barrier:.2f}" in stats
        await pilot.press("down")  # replica 3 at the end: the frozen exponent; at the first barrier: the start's
        assert f"replica 3 of 4, alpha {frozen.exponents[2]:.4g}, at the end" in text_of(app, "#inspector")
        await pilot.press(*["left"] * grid.col)
        assert f"replica 3 of 4, alpha {first.before[2]:.4g}, after barrier 1" in text_of(app, "#inspector")


async def test_f1_lists_the_population_grids_keys_and_marks(tmp_path):
    """F1 on a tempering session's grid teaches its keys and each mark the grid draws (the marks' words are
    the grids' own legends: one owner)."""
    from presto_tui.views.state.baseline import SmcRun
    from presto_tui.views.state.ppt import PptRun

    app = replay_app(population_trace(tmp_path))
    async with app.run_test(size=(120, 60)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one(ReplicaGrid).display)
        await pilot.press("f1")
        await wait_until(pilot, lambda: app.screen.query("#help-text"))
        from rich.console import Console

        console = Console(width=110, record=True)
        console.print(app.screen.query_one("#help-text").content)  # (the help's rich Group)
        shown = " ".join(console.export_text().split())
    assert "Populations (tempering's replica grid" in shown
    assert "tempering: the replica above or below" in shown and "tempering: the barrier before or after" in shown
    assert "the replica's or resample-move particle's chain" in shown and "m: every member's trace" in shown
    for mark in (*PptRun().legend(), *SmcRun().legend()):
        assert " ".join(mark.split()) in shown, mark


# -- a member's chain (Enter on a replica or a particle), every member's trace (m), H, o, the exports ------------

POPULATIONS = Path(__file__).parent / "data" / "populations.jsonl"  # tempering, then resample-move (make_fixtures)


def test_a_members_chain_is_its_own_records_and_counts_what_the_session_counts():
    """A replica's or a particle's chain is read off its method's records, one row per barrier or block, and
    its MH transitions add up to what the session's numbers say of that member (one count, two readers)."""
    from presto_tui.views.state import members as ms

    trace = read_trace(POPULATIONS)
    state = AppState()
    for session in trace.sessions:
        for ev in session.events:
            state.apply(ev)
    ppt, rm = state.sessions
    run = ppt.method_run
    steps = [e for e in ppt.events if isinstance(e, PtStep)]
    moves = ppt.summary.info.member_moves()
    assert len(moves) == run.replicas == 4
    for level in range(run.replicas):
        chain = ms.member_chain(run, level, ppt.events)
        assert [r.column for r in chain.rows] == list(range(len(steps)))
        assert [r.value for r in chain.rows] == [st.log_p0[level] for st in steps]
        assert [r.cells[4] for r in chain.rows] == [f"s{st.holders[level] + 1}" for st in steps]
        assert (chain.transitions, chain.accepted) == moves[level] and chain.transitions > 0
        assert chain.row == run.replicas - 1 - level and f"replica {level + 1} of 4" in chain.title
    alpha = ms.member_chain(run, ms.answer_member(run), ppt.events)
    draws = [e for e in ppt.events if isinstance(e, Transition)]
    assert alpha.draws == tuple(draws) and len(draws) == alpha.transitions  # the session's draws are its own
    assert not ms.member_chain(run, 0, ppt.events).draws
    # a swap the record says was taken reads on both replicas of its pair
    s, i = next((s, i) for s, st in enumerate(steps) for i, ok in zip(st.pairs, st.swapped) if ok)
    assert ms.member_chain(run, i).rows[s].cells[-1].startswith(f"⇅ r{i + 2} A ")
    assert ms.member_chain(run, i + 1).rows[s].cells[-1].startswith(f"⇅ r{i + 1} A ")
    # resample-move: each particle slot, block by block, its moves' own counts
    run = rm.method_run
    blocks = [e for e in rm.events if isinstance(e, RmStep)]
    assert ms.members(run) == 4 and rm.summary.info.member_moves() == [
        (ms.member_chain(run, i).transitions, ms.member_chain(run, i).accepted) for i in range(4)]
    for i in range(4):
        chain = ms.member_chain(run, i)
        assert [r.cells[-2:] for r in chain.rows] == [(str(b.transitions[i]), str(b.accepted[i])) for b in blocks]
        assert [r.value for r in chain.rows] == [b.log_weights[i] for b in blocks]
    # every member's trace for m: the alpha replica (or the answer's particle) first
    series = ms.member_series(ppt.method_run)
    assert [label for label, _ in series] == ["r4 a=4", "r3 a=2.52", "r2 a=1.59", "r1 a=1"]
    assert series[0][1] == [(s + 1, st.log_p0[3]) for s, st in enumerate(steps)]


async def test_enter_on_a_replica_opens_its_chain_and_escape_goes_back_to_the_grid_where_it_left():
    from presto_tui.views.screens.members import PER_TOKEN, MemberScreen
    from presto_tui.views.screens.round import RoundScreen

    app = replay_app(read_trace(POPULATIONS))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        grid = app.screen.query_one(ReplicaGrid)
        await wait_until(pilot, lambda: grid.display)
        view = app.screen.state.sessions[0]
        run = view.method_run
        await pilot.press("down", "enter")  # replica 3 of 4, at the end
        await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen))
        member = app.screen
        assert member.chain.member == 2 and member.column == len(run.steps) - 1
        records = member.query_one("#member-records")
        assert records.row_count == len(run.steps) and records.cursor_row == len(run.steps) - 1
        assert "replica 3 of 4 (alpha 2.52)" in text_of(app, "#member-info")
        assert "r: its own rounds" in text_of(app, "#member-info")
        assert "replica 3 of 4, alpha 2.52, at the end" in text_of(app, "#member-inspector")
        # its every transition, from its own recorded chain (not the session's: those are the alpha replica's)
        own = [e for e in view.members[2].events if isinstance(e, Transition)]
        assert member.query_one("#member-draws").display and member.chain.draws == tuple(own)
        assert len(own) == member.chain.transitions and own != [e for e in view.events if isinstance(e, Transition)]
        await pilot.press(*["up"] * len(run.steps))  # its first record: after barrier 1
        assert member.column == 0 and "replica 3 of 4, alpha 2.52, after barrier 1" in text_of(app, "#member-inspector")
        await pilot.press("left_square_bracket")  # the replica above: the alpha one, at the same record
        assert member.chain.member == 3 and member.column == 0 and member.query_one("#member-draws").display
        assert "replica 4 of 4, alpha 4, after barrier 1" in text_of(app, "#member-inspector")
        await pilot.press("t")  # the per-token view is a round's: the member's rounds are one key away
        await wait_until(pilot, lambda: any(PER_TOKEN[:40] in t for t in toasts(app)))
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, RoundScreen))
        assert (grid.row, grid.col) == (0, 0)  # the grid is on the record the chain was left on


async def test_r_on_a_member_opens_its_own_rounds_in_the_round_view_with_its_keys(tmp_path):
    """A replica's and a particle's own PreSTO chain (their epochs: the fixture streams): the round view over
    the member's recorded session, with its tree, inspector, t and H; Escape goes back to the member."""
    app = replay_app(read_trace(POPULATIONS))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        grid = app.screen.query_one(ReplicaGrid)
        await wait_until(pilot, lambda: grid.display)
        sessions = app.screen.state.sessions
        for keys, session, said in ((("home", "down", "enter"), 0, "replica 3 of 4 (alpha 2.52)"),
                                    (("end", "up", "enter"), 1, "particle ")):
            await its_rounds(pilot, app, keys, sessions[session], session, said, tmp_path / f"x{session}")


async def its_rounds(pilot, app, keys, view, session, said, folder):
    """Enter on the grid's member (after `keys`), r, its rounds with t and H, and back to the grid."""
    from presto_tui.views.screens.history import HistoryScreen
    from presto_tui.views.screens.member_rounds import MemberRoundsScreen
    from presto_tui.views.screens.members import MemberScreen
    from presto_tui.views.screens.tokens import TokenScreen

    await pilot.press(*keys)
    await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen))
    member, title = app.screen.chain.member, app.screen.chain.title
    assert title.startswith(said)
    await pilot.press("r")
    await wait_until(pilot, lambda: isinstance(app.screen, MemberRoundsScreen))
    scr = app.screen
    own = view.members[member]
    assert scr.state.sessions == [own] and scr.state.total_rounds == len(own.rounds) > 1
    assert own.start.params["sampler"] == "powermh"
    tree = scr.query_one("#tree", RoundTreeView)
    await wait_until(pilot, lambda: tree.display and scr.current_round() is own.rounds[0])
    assert f"epoch 1/{len(own.rounds)} · {title} of session {session + 1}" in text_of(app, "#tree-title")
    await pilot.press("end")
    assert scr.current_round() is own.rounds[-1]
    await pilot.press("t")  # the selected node's ratio per token (the round's first decision's)
    await wait_until(pilot, lambda: isinstance(app.screen, TokenScreen))
    assert f"{title} of session {session + 1} · epoch {len(own.rounds)}" in text_of(app, "#tok-info")
    await pilot.press("escape")
    await wait_until(pilot, lambda: app.screen is scr)
    await pilot.press("H")  # its whole chain: every transition it made
    await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
    assert title in text_of(app, "#hist-info")
    await pilot.press("escape")
    await wait_until(pilot, lambda: app.screen is scr)
    folder.mkdir()
    scr.export("json", folder)  # its round, named as its population's session and the member, not "session 1"
    path = next(folder.glob(f"*-s{session + 1}m{member + 1}e{len(own.rounds)}-tree.json"))
    doc = json.loads(path.read_text())
    assert doc["session"]["index"] == session + 1 and doc["session"]["member"] == member + 1
    assert doc["session"]["params"]["sampler"] == "powermh" and doc["epoch"] == len(own.rounds)
    await pilot.press("escape")
    await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen))
    await pilot.press("escape")
    await wait_until(pilot, lambda: app.screen.query(ReplicaGrid) and not isinstance(app.screen, MemberScreen))


def test_a_member_whose_end_the_trace_lacks_ends_with_its_population():
    """A trace cut by a kill records the population's end only: its members' chains end with it (a streaming
    member's last epoch shows nothing decoding for ever)."""
    from presto_tui.api.events import MemberEvent, NodeStatus

    state = AppState()
    for ev in read_trace(POPULATIONS).sessions[0].events:
        if not (isinstance(ev, MemberEvent) and isinstance(ev.event, SessionEnd)):
            state.apply(ev)
    view = state.sessions[0]
    assert view.status == "done" and len(view.members) == 4
    for member in view.members.values():
        assert member.status == "done" and member.rounds
        assert all(rec.status != NodeStatus.LIVE for rec in member.rounds[-1].tree.table.values())


async def test_a_trace_written_before_members_were_recorded_says_so_where_their_rounds_are_asked_for(tmp_path):
    from presto_tui.views.screens.members import MemberScreen
    from presto_tui.views.state.members import MEMBERS_NOT_RECORDED

    old = tmp_path / "old.jsonl"  # the fixture as schema 1.3 wrote it: no member lines
    lines = [x for x in POPULATIONS.read_text().splitlines() if not x.startswith('{"type":"member"')]
    old.write_text("\n".join(lines).replace('"schema":"1.4"', '"schema":"1.3"') + "\n")
    app = replay_app(read_trace(old))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        grid = app.screen.query_one(ReplicaGrid)
        await wait_until(pilot, lambda: grid.display)
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen))
        member = app.screen
        assert MEMBERS_NOT_RECORDED[:60] in text_of(app, "#member-info")
        assert not member.query_one("#member-draws").display  # (a replica below alpha: no transitions recorded)
        await pilot.press("r")
        await wait_until(pilot, lambda: any(MEMBERS_NOT_RECORDED[:40] in t for t in toasts(app)))
        assert app.screen is member


async def test_h_m_and_o_on_a_population_show_its_members_not_a_one_shot_session():
    from presto_tui.views.screens.members import MemberScreen, MembersScreen
    from presto_tui.views.screens.round import RoundScreen

    app = replay_app(read_trace(POPULATIONS))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        grid = app.screen.query_one(ReplicaGrid)
        await wait_until(pilot, lambda: grid.display)
        await pilot.press("o")
        await wait_until(pilot, lambda: toasts(app))
        assert not any("one-shot" in t for t in toasts(app)) and any("Enter opens" in t for t in toasts(app))
        await pilot.press("H")  # the alpha replica's chain: every transition of it plotted beside its records
        await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen))
        assert app.screen.chain.member == 3 and len(app.screen.chain.draws) == app.screen.chain.transitions > 0
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, RoundScreen))
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, MembersScreen))
        table = app.screen.query_one("#members-table")
        assert table.row_count == 4 and str(table.get_row_at(0)[0]).startswith("★ r4 a=4")
        await pilot.press("down", "down", "enter")  # replica 2
        await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen))
        assert app.screen.chain.member == 1
        await pilot.press("up", "escape")  # back to the grid, on replica 2's record
        await wait_until(pilot, lambda: isinstance(app.screen, RoundScreen))
        assert grid.row == 2 and not any("one-shot" in t for t in toasts(app))
        # resample-move's particles: the same keys
        await pilot.press("end")
        pgrid = app.screen.query_one(ParticleGrid)
        await wait_until(pilot, lambda: pgrid.display)
        await pilot.press("up")  # (from the answer's particle)
        row = pgrid.row
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, MemberScreen))
        assert app.screen.chain.member == row and f"particle {row + 1} of 4" in text_of(app, "#member-info")
        assert f"particle {row + 1} after block 3 of 3" in text_of(app, "#member-inspector")


async def test_exports_of_a_population_write_its_members_records(tmp_path):
    """`e` `t` and `e` `j` on a population's grid: every member's records (there is no round to export), the
    JSON with the trace's own records, which read back as the events they were."""

    from presto_tui.logs.schema import decode

    trace = read_trace(POPULATIONS)
    app = replay_app(trace)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        scr = app.screen
        await wait_until(pilot, lambda: scr.query_one(ReplicaGrid).display)
        for s, key in ((0, "home"), (1, "end")):
            await pilot.press(key)
            folder = tmp_path / f"s{s + 1}"
            folder.mkdir()
            scr.export_dir = folder
            for files, kind in enumerate(("t", "j"), 1):
                await pilot.press("e")
                await pilot.pause()
                await pilot.press(kind)
                await wait_until(pilot, lambda d=folder, n=files: len(list(d.iterdir())) == n)
            assert not any("no round" in t for t in toasts(app))
            text = next(folder.glob("*-members.txt")).read_text()
            doc = json.loads(next(folder.glob("*-members.json")).read_text())
            own = [e for e in trace.sessions[s].events if isinstance(e, (PtStep, RmStep))]
            assert doc["format"] == "presto-tui-population" and doc["session"]["index"] == s + 1
            assert [decode(r) for r in doc["records"]] == own
            assert len(doc["members"]) == 4 and all(len(m["records"]) == len(own) for m in doc["members"])
            first = doc["members"][0]
            assert f"{first['title']}: {first['transitions']} MH transitions" in text
            assert all(piece in doc["vocab"].values() for piece in app.screen.state.pieces(own[-1].tokens[0][:3]))


def test_snapshot_a_replicas_chain_opened_from_the_grid(snap_compare):
    assert snap_compare(replay_app(read_trace(POPULATIONS)), press=["home", "down", "enter", "up"],
                        terminal_size=(120, 40))


def test_snapshot_a_replicas_own_rounds_opened_from_its_chain(snap_compare):
    assert snap_compare(replay_app(read_trace(POPULATIONS)), press=["home", "down", "enter", "r", "end"],
                        terminal_size=(120, 40))


def test_snapshot_every_replicas_trace(snap_compare):
    assert snap_compare(replay_app(read_trace(POPULATIONS)), press=["home", "m"], terminal_size=(120, 40))


def test_snapshot_a_resample_move_particles_chain_opened_from_the_grid(snap_compare):
    assert snap_compare(replay_app(read_trace(POPULATIONS)), press=["end", "up", "enter"], terminal_size=(120, 40))
