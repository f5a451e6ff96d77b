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
from presto_tui.views.widgets import RoundTreeView

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
    from presto_tui.views.widgets import ratio_text

    sc = Score(log_q_x=-1.0, log_q_y=-2.0, log_p_x=-3.0, log_p_y=-3.5, log_target=-2.0, log_proposal=1.0,
               log_ratio=0.25, accept_prob=1.0, eps_class="accept")
    text = str(ratio_text(sc))
    assert "sum to -1.000, not log r" in text
    ok = Score(-1.0, -2.0, -3.0, -3.5, -2.0, 1.0, -1.0, math.exp(-1.0), "uncertain")
    assert "inconsistent" not in str(ratio_text(ok))
