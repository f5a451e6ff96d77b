"""A researcher's views: per-token values in the trace, a node's ratio per token (`t`), two sessions
side by side (`c`, `replay --compare`) and a session's whole chain (`H`, exportable).

Snapshots are taken from tests/data/research.jsonl (recorded by tests/make_fixtures.py on the
synthetic backend: PowerMH spine, EntropyCut bfs/node and MultiTryMH spine on one prompt, with
per-token values and transition events); replay.jsonl is a schema 1.0 trace without them.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import orjson
import pytest
from helpers import small_backend, text_of, wait_until
from test_app_keys import shown_lines
from typer.testing import CliRunner

from presto_tui.cli import app as cli_app
from presto_tui.logs.reader import read_trace
from presto_tui.logs.schema import SchemaError, decode, decode_tree, encode, encode_tree
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.events import RoundDone, SessionEnd, Transition
from presto_tui.runtime.session.runner import run_session
from presto_tui.views.app import replay_app
from presto_tui.views.screens.compare import CompareScreen
from presto_tui.views.screens.history import HistoryScreen
from presto_tui.views.screens.tokens import TokenScreen, token_label
from presto_tui.views.state import export
from presto_tui.views.state.compare import acceptance_curve, answer_diff, param_rows
from presto_tui.views.state.history import chain_history
from presto_tui.views.state.reducer import AppState
from presto_tui.views.state.tokens import NOT_RECORDED, RatioKind, token_split

DATA = Path(__file__).parent / "data"
RESEARCH = DATA / "research.jsonl"
OLD = DATA / "replay.jsonl"  # schema 1.0: no per-token values, no transition events
runner = CliRunner()

CONFIGS = [("powermh", "spine", "decision"), ("powermh", "bfs", "node"), ("powermh", "predictive", "node"),
           ("powermh", "none", "decision"), ("powermh", "stream", "decision"), ("entropycut", "bfs", "node"),
           ("entropycut", "spine", "decision"), ("entropycut", "stream", "decision"), ("multitry", "spine", "decision"),
           ("multitry", "bfs", "node")]


def live_rounds(sampler, rule, inputs, seed=3):
    params = SamplerParams(sampler=sampler, prefetch=rule, inputs=inputs, budget=8, max_new_tokens=12, block_size=6,
                           steps=8, seed=seed)
    return params, [ev for ev in run_session(small_backend(), params, [1, 2]) if isinstance(ev, RoundDone)]


def round_trip(ev: RoundDone) -> RoundDone:
    back = decode(orjson.loads(orjson.dumps(encode(ev))))
    assert isinstance(back, RoundDone)
    return back


def scored(tree):
    return [v for v in tree.iter_nodes() if v.score is not None]


def state_of(path: Path) -> AppState:
    trace = read_trace(path)
    state = AppState(vocab=dict(trace.vocab))
    for s in trace.sessions:
        for e in s.events:
            state.apply(e)
    return state


# -- per-token values in the trace ------------------------------------------------------------------

@pytest.mark.parametrize("sampler,rule,inputs", CONFIGS)
def test_per_token_values_round_trip_rounded_to_four_decimals(sampler, rule, inputs):
    _, rounds = live_rounds(sampler, rule, inputs)
    assert rounds
    for ev in rounds:
        back = round_trip(ev)
        t, b = ev.tree, back.tree
        for got, want in ((b.root.logq, t.root.logq), (b.root.logp, t.root.logp),
                          *((rb.proposal.logq, r.proposal.logq) for r, rb in zip(t.requests, b.requests)),
                          *((rb.proposal.logp, r.proposal.logp) for r, rb in zip(t.requests, b.requests))):
            assert len(got) == len(want)
            assert all(g == round(w, 4) for g, w in zip(got, want))
        # what a decoded tree holds encodes to the same line (the export's round JSON)
        assert encode_tree(b) == encode_tree(t)


def test_old_traces_read_without_per_token_values_and_stay_without_them():
    trace = read_trace(OLD)
    assert trace.header["schema"] == "1.0" and not trace.warnings
    rd = trace.sessions[0].rounds[0]
    assert all(math.isnan(x) for x in rd.tree.root.logp)
    assert "per_token" not in encode_tree(rd.tree)  # nothing invented on the way out


def test_a_round_line_without_per_token_values_still_reads():
    _, rounds = live_rounds("powermh", "spine", "decision")
    d = encode(rounds[0])
    del d["tree"]["per_token"]
    back = decode(d)
    assert back.tree.root.tokens == rounds[0].tree.root.tokens and math.isnan(back.tree.root.logq[0])


@pytest.mark.parametrize("damage,field", [
    (lambda pt: pt["root"][0].pop(), "tree.per_token.root.logq"),
    (lambda pt: pt["requests"][0][1].__setitem__(0, "x"), "tree.per_token.requests[0].logp"),
    (lambda pt: pt["requests"].pop(), "tree.per_token.requests"),
    (lambda pt: pt.pop("root"), "tree.per_token.root"),
    (lambda pt: pt["root"].pop(), "tree.per_token.root"),
])
def test_damaged_per_token_values_are_refused_naming_the_field(damage, field):
    _, rounds = live_rounds("powermh", "spine", "decision")
    d = encode(rounds[0])["tree"]
    damage(d["per_token"])
    with pytest.raises(SchemaError) as e:
        decode_tree(d)
    assert field in str(e.value)


# -- a node's ratio per token -------------------------------------------------------------------------

@pytest.mark.parametrize("sampler,rule,inputs", CONFIGS)
def test_per_token_totals_equal_the_recorded_terms(sampler, rule, inputs):
    """Live trees: the sums are the recorded terms exactly; replayed ones agree within the rounding."""
    params, rounds = live_rounds(sampler, rule, inputs)
    checked = 0
    for ev in rounds:
        for tree, exact in ((ev.tree, True), (round_trip(ev).tree, False)):
            for v in scored(tree):
                split = token_split(tree, v, params.alpha)
                assert split is not None and split.recorded
                names = [c.name for c in split.checks]
                assert names == (["target"] if sampler == "multitry" else ["target", "proposal"])
                for c in split.checks:
                    assert (c.total == c.recorded) if exact else c.agrees, (c, exact)
                # the running sums end at the totals; the shares add up to them
                last = split.rows[-1]
                assert math.isclose(last.target, split.checks[0].total, abs_tol=1e-9)
                share = math.fsum(r.delta for r in split.rows)
                want = v.score.log_target + (0.0 if sampler == "multitry" else v.score.log_proposal)
                assert math.isclose(share, want, abs_tol=1e-6 if exact else 0.02)
                checked += 1
    assert checked > 10


def test_a_tampered_value_is_caught_by_the_totals():
    params, rounds = live_rounds("powermh", "bfs", "node")
    d = encode(rounds[0])
    d["tree"]["per_token"]["requests"][0][1][0] -= 0.5  # one proposal token's log p0
    tree = decode(d).tree
    v = next(v for v in scored(tree) if v.decision.request == 0)
    split = token_split(tree, v, params.alpha)
    target = split.checks[0]
    assert not target.agrees and math.isclose(target.total - target.recorded, -0.5 * params.alpha, abs_tol=0.01)


def test_the_split_explains_extra_terms_and_refuses_nodes_without_a_score():
    state = state_of(RESEARCH)
    ec = state.sessions[1].rounds[0].tree  # EntropyCut
    v = scored(ec)[0]
    split = token_split(ec, v, 4.0)
    assert split.ratio is RatioKind.REVERSE_MOVE and any("reverse-move" in n for n in split.notes)
    mt = state.sessions[2].rounds[0].tree  # MultiTryMH
    split = token_split(mt, scored(mt)[0], 4.0)
    assert split.ratio is RatioKind.MULTIPLE_TRY and all(r.proposal is None for r in split.rows)
    assert any("does not split by token" in n for n in split.notes)
    unscored = next(v for v in ec.iter_nodes() if v.score is None)
    assert token_split(ec, unscored, 4.0) is None


def test_token_cells_show_whitespace_and_escapes():
    assert [token_label(p) for p in ("\n", "  ", "\t", " the", "\x1b[2J")] == ["⏎", "␣␣", "⇥", " the", "\\x1b[2J"]
    assert token_label("x" * 40).endswith("…") and len(token_label("x" * 40)) == 15


def test_old_traces_say_the_values_are_not_recorded():
    state = state_of(OLD)
    tree = state.sessions[0].rounds[0].tree
    split = token_split(tree, tree.node(0), 4.0)
    assert not split.recorded and not split.checks and split.drivers() == []
    assert split.notes[0].startswith(NOT_RECORDED)
    assert [r.y for r in split.rows] == list(tree.requests[tree.node(0).decision.request].proposal.tokens)


# -- the chain's history -----------------------------------------------------------------------------

def test_history_follows_the_transitions_and_counts_each_state():
    trace = read_trace(RESEARCH)
    state = state_of(RESEARCH)
    for s, view in zip(trace.sessions, state.sessions):
        h = chain_history(view)
        transitions = [e for e in s.events if isinstance(e, Transition)]
        assert h.diagnostics and len(h.steps) == len(transitions) == view.summary.transitions
        assert [st.accepted for st in h.steps] == [t.accepted for t in transitions]
        assert [st.log_target for st in h.steps] == [t.log_target for t in transitions]
        assert sum(v.visits for v in h.states) == len(h.steps)
        assert len({v.tokens for v in h.states}) == len(h.states)
        for j, v in enumerate(h.states):
            visits = [st.n for st in h.steps if st.state == j]
            assert (v.visits, v.first, v.last) == (len(visits), visits[0], visits[-1])
        # the last state visited is the session's answer
        end = next(e for e in s.events if isinstance(e, SessionEnd))
        assert h.states[h.steps[-1].state].tokens == end.tokens
        # the recorded log-target is alpha times the sum of the state's recorded per-token log p0
        alpha = view.params["alpha"]
        for rd in view.rounds:
            for after in rd.tree.states_after_steps():
                v = next(v for v in h.states if v.tokens == after.tokens)
                assert math.isclose(alpha * math.fsum(after.logp), v.log_target, abs_tol=alpha * after.T * 5e-5)


def test_history_of_an_old_trace_has_states_but_no_diagnostics():
    h = chain_history(state_of(OLD).sessions[0])
    assert not h.diagnostics and h.steps and all(st.log_target is None for st in h.steps)
    assert sum(v.visits for v in h.states) == len(h.steps)


def test_history_exports_as_json_and_csv():
    state = state_of(RESEARCH)
    view = state.sessions[0]
    h = chain_history(view)
    doc = json.loads(export.history_as_json(state, view, 0, h))
    assert doc["format"] == "presto-tui-history" and doc["diagnostics_recorded"] is True
    assert len(doc["transitions"]) == len(h.steps) and len(doc["states"]) == len(h.states)
    assert doc["states"][h.steps[-1].state]["text"] == export.answer_text(state, view, view.summary.tokens)
    steps, states = export.history_as_csv(state, view, h)
    rows = list(csv.DictReader(io.StringIO(steps)))
    assert [int(r["transition"]) for r in rows] == list(range(1, len(h.steps) + 1))
    # `k` (within its block) counts from 1 beside `transition` (over the session) and `block`: it counted from 0
    assert [(int(r["block"]), int(r["k"])) for r in rows] == [(st.block + 1, st.k + 1) for st in h.steps]
    assert rows[0]["k"] == "1" and [t["k"] for t in doc["transitions"]] == [int(r["k"]) for r in rows]
    # every cell says what the JSON says (true/false, not Python's True/False)
    assert [r["accepted"] for r in rows] == [json.dumps(t["accepted"]) for t in doc["transitions"]]
    assert {r["accepted"] for r in rows} <= {"true", "false"}
    assert [int(r["visits"]) for r in csv.DictReader(io.StringIO(states))] == [v.visits for v in h.states]


def test_csv_text_never_starts_a_formula():
    from presto_tui.logs.tidy import spreadsheet_safe

    assert spreadsheet_safe("=HYPERLINK(1)") == "'=HYPERLINK(1)"
    assert spreadsheet_safe("-2 apples") == "'-2 apples"
    assert spreadsheet_safe(" the cat") == " the cat"


# -- two sessions side by side -------------------------------------------------------------------------

def test_the_diff_title_counts_in_the_singular_and_the_plural():
    pieces = lambda ids: [f"<{i}>" for i in ids]
    assert answer_diff([5, 6], [5, 7], pieces).title.startswith("diff: 1 token shared · ")
    assert answer_diff([5, 6], [5, 6], pieces).title.startswith("diff: 2 tokens shared · ")
    assert answer_diff([5], [6], pieces).title == "diff: 0 tokens shared · struck: only in A (1) · " \
                                                  "underlined: only in B (1)"


def test_comparison_rows_curves_and_answer_diff():
    state = state_of(RESEARCH)
    a, b = state.sessions[0], state.sessions[1]
    rows = {r.name: r for r in param_rows(a, b)}
    assert rows["sampler"].differs and rows["prefetch"].differs and rows["seed"].differs
    assert not rows["alpha"].differs and not rows["prompt"].differs
    for s in (a, b):
        curve = acceptance_curve(s)
        assert len(curve) == s.summary.transitions
        assert math.isclose(curve[-1], s.summary.acceptance_rate)
    ta, tb = a.summary.tokens, b.summary.tokens
    d = answer_diff(ta, tb, state.pieces)
    assert d.common + d.only_a == len(ta) and d.common + d.only_b == len(tb)
    same = answer_diff(ta, ta, state.pieces)
    assert (same.common, same.only_a, same.only_b) == (len(ta), 0, 0)
    assert str(same.text) == "".join(state.pieces(ta))


# -- in the app ----------------------------------------------------------------------------------------

async def test_c_marks_a_session_and_c_on_another_compares_them():
    app = replay_app(read_trace(RESEARCH))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        scr = app.screen
        await pilot.press("c")
        assert scr.compare_mark == 0 and not isinstance(app.screen, CompareScreen)
        await pilot.press("c")  # the same session again: unmarked
        assert scr.compare_mark is None
        await pilot.press("c")
        scr.go_to(scr.state.timeline_index((2, 0)))  # the third session's first round
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen))
        cmp = app.screen
        assert (cmp.a, cmp.b) == (0, 2) and scr.compare_mark is None
        assert "A: session 1  B: session 3" in text_of(app, "#cmp-info")
        params = "\n".join(shown_lines(cmp.query_one("#cmp-params-body")))
        assert "≠ sampler" in params and "multitry" in params
        await pilot.press("x")
        assert (cmp.a, cmp.b) == (2, 0)
        await pilot.press("escape")
        assert app.screen is scr


async def test_t_opens_the_per_token_view_of_a_scored_node_only():
    app = replay_app(read_trace(RESEARCH))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        scr = app.screen
        tree = scr.tree_view.round_tree
        assert "t: this ratio per token" in text_of(app, "#inspector")
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TokenScreen))
        view = app.screen
        root = tree.node(0)
        assert view.split.node.id == 0 and view.query_one("#tok-table").row_count == tree.T - root.decision.cut
        assert "✓ equal" in text_of(app, "#tok-totals-body")
        await pilot.press("s")
        order = [int(k.value) for k in view.query_one("#tok-table").rows]
        shares = [abs(view.split.rows[i].delta) for i in order]
        assert shares == sorted(shares, reverse=True)
        await pilot.press("escape")
        assert app.screen is scr
        deferred = next(v for v in tree.iter_nodes() if v.status == "deferred")
        scr.tree_view.select(deferred.id)
        await pilot.press("t")
        await pilot.pause()
        assert app.screen is scr


async def test_h_shows_the_history_and_exports_it(tmp_path):
    app = replay_app(read_trace(RESEARCH))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("H")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        hist = app.screen
        assert hist.query_one("#hist-states").row_count == len(hist.history.states)
        for key in ("j", "v"):
            await pilot.press("e")
            await wait_until(pilot, lambda: app.screen.query("#export-folder"))
            app.screen.query_one("#export-folder").value = str(tmp_path)
            before = len(list(tmp_path.iterdir()))
            await pilot.press(key)
            await wait_until(pilot, lambda b=before: len(list(tmp_path.iterdir())) > b)  # the export written
        (js,) = tmp_path.glob("*-s1-history.json")
        assert len(json.loads(js.read_text())["transitions"]) == len(hist.history.steps)
        assert len(list(tmp_path.glob("*-s1-history.csv"))) == len(list(tmp_path.glob("*-s1-states.csv"))) == 1
        # a folder whose path runs through a file: one line that says so
        (tmp_path / "file").write_text("x")
        await pilot.press("e")
        await wait_until(pilot, lambda: app.screen.query("#export-folder"))
        app.screen.query_one("#export-folder").value = str(tmp_path / "file" / "sub")
        await pilot.press("j")
        await wait_until(pilot, lambda: any("file is a file, not a folder" in str(t.render())
                                            for t in app.screen.query("Toast")))


async def test_letters_typed_into_the_search_stay_there():
    app = replay_app(read_trace(RESEARCH))
    async with app.run_test(size=(120, 40)) as pilot:
        scr = app.screen
        await pilot.press("slash", "c", "t", "H")
        assert scr.query_one("#search").value == "ctH" and app.screen is scr and scr.compare_mark is None


# -- replay several traces, --compare ----------------------------------------------------------------

@pytest.fixture
def ran(monkeypatch):
    """What `replay` would run, without running the app."""
    from presto_tui.views.app import PrestoApp

    seen: list[PrestoApp] = []
    monkeypatch.setattr(PrestoApp, "run", lambda self, *a, **k: seen.append(self))
    return seen


def test_replay_takes_several_traces_and_opens_a_comparison(ran):
    res = runner.invoke(cli_app, ["replay", str(OLD), str(RESEARCH), "--compare", "1,5"])
    assert res.exit_code == 0, res.output
    (app,) = ran
    screen = app._first
    want = [s.start.session_id for path in (OLD, RESEARCH) for s in read_trace(path).sessions]
    assert [s.start.session_id for s in screen.state.sessions] == want and len(want) == 5
    assert screen.compare_at_start == (0, 4) and "replay.jsonl + research.jsonl" in app.sub_title


@pytest.mark.parametrize("value", ["1", "1,1", "0,2", "1,6", "a,b", "1,2,3"])
def test_a_bad_compare_pair_is_one_line(ran, value):
    res = runner.invoke(cli_app, ["replay", str(OLD), str(RESEARCH), "--compare", value])
    assert res.exit_code == 2 and not ran
    assert res.stderr.splitlines() == [f"presto-tui: error: --compare must be two different session numbers S,T "
                                       f"from 1 to 5 (the traces hold 5 sessions), got {value!r}"]


def test_traces_of_different_tokenizers_are_not_replayed_together(ran, tmp_path):
    other = tmp_path / "other.jsonl"
    lines = RESEARCH.read_text().splitlines()
    lines = [ln if '"type":"vocab"' not in ln else ln.replace('" the"', '" THE"') for ln in lines]
    other.write_text("\n".join(lines) + "\n")
    res = runner.invoke(cli_app, ["replay", str(RESEARCH), str(other)])
    assert res.exit_code == 2 and not ran and "Traceback" not in res.output
    (line,) = res.stderr.splitlines()
    assert line.startswith("presto-tui: error: ") and "different tokenizers" in line and "other.jsonl" in line


# -- snapshots -----------------------------------------------------------------------------------------

def test_snapshot_compare(snap_compare):
    assert snap_compare(replay_app(read_trace(RESEARCH), compare=(0, 1)), terminal_size=(120, 40))


def test_snapshot_tokens(snap_compare):
    # node #2 of the first round: an uncertain decision at cut 13 of 24, on the realized path
    assert snap_compare(replay_app(read_trace(RESEARCH)), press=["right", "right", "t"], terminal_size=(120, 36))


def test_snapshot_tokens_of_an_entropycut_node(snap_compare):
    async def second_session(pilot):
        pilot.app.screen.go_to(pilot.app.screen.state.timeline_index((1, 0)))
        await pilot.pause()

    assert snap_compare(replay_app(read_trace(RESEARCH)), run_before=second_session, press=["t"],
                        terminal_size=(120, 40))


def test_snapshot_tokens_not_recorded(snap_compare):
    assert snap_compare(replay_app(read_trace(OLD)), press=["t"], terminal_size=(100, 24))


async def test_states_that_read_alike_up_to_eos_show_where_they_differ_after_it(tmp_path):
    """"3 distinct states" that all read `small [EOS]`: they differ only after the EOS; each row says
    from which token and shows the tokens there, which tell them apart."""
    from typer.testing import CliRunner

    from presto_tui.api.events import cut_at_eos
    from presto_tui.cli import app as cli

    path = tmp_path / "h.jsonl"
    res = CliRunner().invoke(cli, ["run", "the cat", "-n", "96", "-K", "40", "--prefetch", "spine",
                                   "--trace", str(path)])
    assert res.exit_code == 0, res.output
    app = replay_app(read_trace(path))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("H")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        hist = app.screen
        eos = hist.view.start.backend_info.get("eos_id")
        states = hist.history.states
        answers = [cut_at_eos(v.tokens, eos) for v in states]
        alike = [j for j, a in enumerate(answers) if answers.count(a) > 1]
        assert len(alike) >= 2  # (the synthetic chain visits states that differ only after EOS)
        table = hist.query_one("#hist-states")
        texts = [str(table.get_row_at(r)[-1]) for r in range(table.row_count)]
        for j in alike:
            v = states[j]
            others = [w for k, w in enumerate(states) if k != j and answers[k] == answers[j]]
            where = min(next(i for i, (x, y) in enumerate(zip(v.tokens, w.tokens)) if x != y) for w in others)
            assert where >= len(answers[j]) and v.twin_from == where
            assert f"[EOS] · after EOS, from token {where}: " in texts[j]
            twin = states.index(others[0])
            assert texts[j].split("from token", 1)[1] != texts[twin].split("from token", 1)[1]  # told apart
        assert f"{len(alike)} read alike up to EOS" in text_of(app, "#hist-info")
