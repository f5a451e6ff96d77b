"""What the panels say of a session with a view of its own (pure): the title, the stats panel and the
answer pane's words for a session without rounds, from its fold (`state/baseline.py`: `MethodRun`), and
the inspector's for a sample (`SamplesRun`) and a particle after a block (`SmcRun`)."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from presto_tui.api.events import Pieces, Sample, cut_at_eos
from presto_tui.views.state.baseline import MethodRun, SamplesRun, SmcRun
from presto_tui.views.state.evolution import DiffStyles, clip, evolution_text
from presto_tui.views.state.reducer import SessionView
from presto_tui.words import count


def _run(session: SessionView) -> MethodRun:
    run = session.method_run
    assert run is not None
    return run


def describe(session: SessionView) -> list[str]:
    """What ran, in parts, as the title and the stats panel name it (its method's own words)."""
    return _run(session).describe()


def progress(session: SessionView) -> str:
    """How far the session got: samples finished, blocks grown, steps taken."""
    return _run(session).progress()


def where(session: SessionView, index: int, sessions: int) -> str:
    """The title: what the view shows and where it sits."""
    run = _run(session)
    start = session.start
    chain = [f"chain {start.chain + 1} of {start.chains}"] if start.chains > 1 else []
    parts = [*run.describe(), f"session {index + 1} of {sessions}", *chain, run.progress(), *run.title_extra()]
    return " · ".join(p for p in parts if p)


def legend(session: SessionView) -> list[str]:
    """What the view's marks mean (the title's last line)."""
    return _run(session).legend()


def stats_text(session: SessionView, *, paused: bool = False, paused_style: Style | str = "",
               heading: str = "", heading_style: Style | str = "", live: str = "") -> Text:
    """The stats panel: status, what ran, its method's numbers, the answer's log-likelihood and
    confidence (eqs. 21-22)."""
    run = _run(session)
    m = session.summary
    t = Text()
    if heading:
        t.append(heading + "\n", style=heading_style)
    if paused:
        t.append(" ⏸ paused (p resumes) ", style=paused_style)
    else:
        t.append(m.status, style="bold")
    t.append(f"  {', '.join(run.describe())}")
    t.append_text(run.stats_body(m))
    c = run.choice
    if c is not None:
        t.append(f"\nanswer: {run.what} #{c.index + 1}, {clip(c.rule, 120)}")
    stopped = unanswered(session)
    if stopped is not None:
        t.append(f"\n{stopped}", style="dim")
    if m.answer_loglik is not None and m.answer_confidence is not None:
        what = "its text's" if stopped is not None else "answer"
        t.append(f"\n{what} log-lik {m.answer_loglik:.3f}/token  confidence {m.answer_confidence:.3f}")
    elif c is None and stopped is None:
        t.append("\nno answer yet: it is chosen at the end", style="dim")
    for note in m.info.notes():
        t.append(f"\nnote: {clip(note, 300)}", style="dim")
    if m.error:
        t.append("\nerror: " + clip(m.error.replace("\n", " "), 300), style="bold red")
    if live:
        t.append("\n" + live, style="italic")
    return t


def sample_text(run: SamplesRun, rank: int, sm: Sample, pieces: Pieces, eos_id: int | None,
                styles: DiffStyles) -> Text:
    """The inspector for a sample: its numbers and its whole text."""
    t = Text()
    t.append(f"sample #{sm.index + 1}  rank {rank + 1} of {len(run.samples)}", style="bold")
    if run.choice is not None and run.choice.index == sm.index:
        t.append(f"  ★ the answer ({clip(run.choice.rule, 120)})")
    t.append(f"\n{run.score_name} {run.score(sm):.3f} (the rank's score)")
    t.append(f"\nsum log q_tau {sm.logq:.3f}  sum log p0 {sm.logp:.3f}")
    t.append(f"\nlog-likelihood {sm.loglik:.3f} per token (eq. 21)  confidence {sm.confidence:.3f} (eq. 22)")
    eos = eos_id is not None and eos_id in sm.tokens
    t.append(f"\n{len(sm.tokens)} tokens, {'stopped at EOS' if eos else 'no EOS (stopped at n)'}; "
             f"finished at {sm.clock:.2f} s of engine time\n")
    t.append_text(evolution_text(None, cut_at_eos(list(sm.tokens), eos_id), pieces, styles=styles))
    return t


def cell_text(run: SmcRun, step: int, i: int, pieces: Pieces, eos_id: int | None, styles: DiffStyles) -> Text:
    """The inspector for a particle after a block: its weight, the block's ESS, its lineage, and its
    text up to that block (the block's own tokens marked)."""
    t = Text()
    if not 0 <= step < len(run.steps) or not 0 <= i < len(run.steps[step].tokens):
        return Text("no particle here", style="dim")
    st = run.steps[step]
    P = len(st.tokens)
    t.append(f"particle {i + 1} after block {step + 1} of {len(run.steps)}", style="bold")
    line = run.answer_line()
    if line.get(step) == i:
        t.append("  ★ on the answer's line" if step < len(run.steps) - 1 else "  ★ the answer")
    share = run.shares(step)[i]
    t.append(f"\nweight share {share:.4f}  log w {st.log_weights[i]:.3f}  (uniform: {1 / P:.4f})")
    t.append(f"\nESS {st.ess:.2f} of {P}  exponent a(t) {st.exponent:.3g}  t {st.t} tokens")
    if st.resampled:
        n = run.copies(step)[i]
        t.append(f"\nresampled after this block: {'dropped' if n == 0 else f'{n} cop' + ('y' if n == 1 else 'ies')}")
    else:
        t.append("\nno resampling after this block")
    parent = run.parent(step, i)
    if parent is not None and run.resampled_into(step):
        t.append(f"\ndescends from particle {parent + 1} of block {step} (resampled)")
    grown = st.tokens[i]
    eos = eos_id is not None and eos_id in grown
    t.append(f"\nthis block: {count(len(grown), 'token')}" + (", stopped at EOS" if eos else "")
             + (" (it had stopped at EOS before)" if not grown else "") + "\n")
    # the text up to this block, its own tokens marked (a reader's text: up to the first EOS)
    before = cut_at_eos(list(run.tokens_at(step - 1, parent if parent is not None else i)), eos_id) if step else []
    after = cut_at_eos(list(run.tokens_at(step, i)), eos_id)
    t.append_text(evolution_text(before if before != after else None, after, pieces, styles=styles))
    return t


def unanswered(session: SessionView) -> str | None:
    """How a session that ended without choosing its answer (cancelled, failed) reads: its text is the
    one it held when it stopped, which the stats panel scores; None while it runs or once it chose."""
    status = session.summary.status
    if _run(session).choice is not None or status in ("running", "done"):
        return None
    return f"{status} before it chose an answer: the text it held when it stopped"


def answer_title(session: SessionView) -> str:
    """The answer pane's title ("no answer yet" only while the session may still give one)."""
    return unanswered(session) or _run(session).answer_title()
