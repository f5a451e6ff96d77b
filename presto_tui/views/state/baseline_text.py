"""What the panels say of a baseline session (pure): the title, the stats panel, the inspector and
the answer pane's words for a session without rounds (`state/baseline.py`)."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from presto_tui.api.events import Pieces, Sample, cut_at_eos
from presto_tui.views.state import sps as sps_state
from presto_tui.views.state.baseline import BaselineRun
from presto_tui.views.state.evolution import DiffStyles, clip, evolution_text
from presto_tui.views.state.reducer import SessionView
from presto_tui.words import count


def _p(session: SessionView, key: str, default: object = "?") -> object:
    return session.params.get(key, default)


def describe(session: SessionView) -> list[str]:
    """The baseline with its own parameters, in parts, as the title and the stats panel name it."""
    run = session.baseline
    assert run is not None
    if run.sps is not None:
        return sps_state.describe(session.params)
    tau = _p(session, "tau")
    tau_s = f"tau {tau:g}" if isinstance(tau, (int, float)) else "tau ?"
    if run.smc:
        return [f"{run.display} P={_p(session, 'particles')}", f"blocks of {_p(session, 'smc_block')}",
                f"ramp {_p(session, 'smc_ramp')}", tau_s]
    if run.sampler == "bestofn":
        return [f"{run.display} N={_p(session, 'samples')}", f"by {run.score_name}", tau_s]
    return [run.display, tau_s]


def total_blocks(session: SessionView) -> int | None:
    n, b = _p(session, "max_new_tokens", None), _p(session, "smc_block", None)
    return -(-n // b) if isinstance(n, int) and isinstance(b, int) and b > 0 else None


def progress(session: SessionView) -> str:
    """How far the session got: samples finished, or blocks grown."""
    run = session.baseline
    assert run is not None
    if run.sps is not None:
        return sps_state.progress(run.sps, session.params)
    if run.smc:
        most = total_blocks(session)
        particles = run.particles or _p(session, "particles")
        # at most: every particle may stop at EOS before n
        return f"block {len(run.steps)}{f' of at most {most}' if most else ''}, {particles} particles"
    wanted = _p(session, "samples") if run.sampler == "bestofn" else 1
    return f"{len(run.samples)}/{wanted} samples"


def where(session: SessionView, index: int, sessions: int) -> str:
    """The title: what the view shows and where it sits."""
    run = session.baseline
    assert run is not None
    parts = [*describe(session), f"session {index + 1} of {sessions}", progress(session)]
    if run.smc:
        resamplings = sum(st.resampled for st in run.steps)
        parts.append(f"{resamplings} resampling{'s' if resamplings != 1 else ''}")
    return " · ".join(parts)


def legend(session: SessionView) -> list[str]:
    """What the view's marks mean (the title's last line)."""
    run = session.baseline
    assert run is not None
    if run.sps is not None:
        return sps_state.legend()
    if run.smc:
        return ["bar: weight share", "⟳ resampled", "←j from particle j", "✗ dropped", "∎ EOS", "★ answer"]
    return ["★ answer", "best first", "end: EOS, or n reached"]


def stats_text(session: SessionView, *, paused: bool = False, paused_style: Style | str = "",
               heading: str = "", heading_style: Style | str = "", live: str = "") -> Text:
    """The stats panel of a baseline session: time, tokens, samples or particles, resamplings,
    the last ESS, and the answer's log-likelihood and confidence (eqs. 21-22)."""
    run = session.baseline
    assert run is not None
    m = session.summary
    t = Text()
    if heading:
        t.append(heading + "\n", style=heading_style)
    if paused:
        t.append(" ⏸ paused (p resumes) ", style=paused_style)
    else:
        t.append(m.status, style="bold")
    t.append(f"  {', '.join(describe(session))}")
    if run.sps is not None:
        t = sps_state.stats_text(run.sps, session.params, m, head=t)
        if m.error:
            t.append("\nerror: " + clip(m.error.replace("\n", " "), 300), style="bold red")
        if live:
            t.append("\n" + live, style="italic")
        return t
    t.append(f"\ntime {m.wall_s:.2f} s  tokens generated {m.tokens_generated}  calls {m.calls}")
    if run.smc:
        t.append(f"\nparticles {run.particles or _p(session, 'particles')}  {progress(session).split(',')[0]}"
                 f"  resamplings {m.resamplings}")
        if m.last_ess is not None:
            t.append(f"\nlast ESS {m.last_ess:.2f} of {run.particles}")
    else:
        t.append(f"\n{progress(session)}")
    c = run.choice
    if c is not None:
        what = "particle" if run.smc else "sample"
        t.append(f"\nanswer: {what} #{c.index + 1}, {clip(c.rule, 120)}")
    if m.answer_loglik is not None and m.answer_confidence is not None:
        t.append(f"\nanswer log-lik {m.answer_loglik:.3f}/token  confidence {m.answer_confidence:.3f}")
    elif c is None:
        t.append("\nno answer yet: it is chosen at the end", style="dim")
    if m.error:
        t.append("\nerror: " + clip(m.error.replace("\n", " "), 300), style="bold red")
    if live:
        t.append("\n" + live, style="italic")
    return t


def sample_text(run: BaselineRun, rank: int, sm: Sample, pieces: Pieces, eos_id: int | None,
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


def cell_text(run: BaselineRun, step: int, i: int, pieces: Pieces, eos_id: int | None, styles: DiffStyles) -> Text:
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


def answer_title(session: SessionView) -> str:
    """The answer pane's title."""
    run = session.baseline
    assert run is not None
    if run.sps is not None:
        return sps_state.answer_title(run.sps)
    c = run.choice
    if c is None:
        return "no answer yet: a baseline answers at its end"
    what = "particle" if run.smc else "sample"
    return clip(f"the answer: {what} #{c.index + 1} ({c.rule})", 200)
