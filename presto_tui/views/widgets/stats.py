"""The stats panel: a session's numbers (SessionSummary's own), as of now or of the round on screen."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from presto_tui.api.events import ACCEPT, REJECT, SHORT, UNCERTAIN, SessionSummary
from presto_tui.api.params import find_method
from presto_tui.views.state.evolution import clip
from presto_tui.views.state.reducer import SessionView
from presto_tui.words import count


def sparkline(values: Sequence[float], width: int = 24) -> str:
    bars = "▁▂▃▄▅▆▇█"
    vals = list(values)[-width:]
    return "".join(bars[min(7, int(v * 7.999))] for v in vals)


def speedup_line(m: SessionSummary) -> Text:
    """The speedup estimate (SessionSummary.speedup_estimate, the one `run --json`, `stats` and
    `bench` report), shown only where it compares like with like, and saying against what.

    The summary decides where it compares like with like (`speedup_unavailable` says why not).
    """
    method = find_method(m.params.get("sampler"))
    sampler = method.display if method is not None else "sampler"
    sp = m.speedup_estimate
    if sp is None:
        return Text(f"speedup: n/a ({m.speedup_unavailable})", style="dim")
    t = Text(f"speedup ~{sp:.2f}x vs sequential {sampler}")
    alone = m.speedup_transitions
    t.append("\n  (est." + (f"; {alone:.2f}x without extensions)" if alone is not None else ")"), style="dim")
    return t


class StatsPanel(Static):
    COMPONENT_CLASSES = {"stats--paused", "stats--heading"}

    def show(self, s: SessionView | None, upto: int | None = None, *, paused: bool = False,
             heading: str = "", live: str = "") -> None:
        """The session's numbers as of round `upto` (None: now); `heading` says which round
        they belong to, `live` how the running chain stands meanwhile."""
        if s is None:
            self.update(Text("no session yet: type a prompt below", style="dim"))
            return
        m = s.summary if upto is None else s.summary_upto(upto)
        t = Text()
        if heading:
            t.append(heading + "\n", style=self.get_component_rich_style("stats--heading"))
        if paused:
            t.append(" ⏸ paused (p resumes) ", style=self.get_component_rich_style("stats--paused"))
        else:
            t.append(f"{m.status}", style="bold")
        t.append(f"  transitions {m.transitions}/{s.total_steps}")
        if m.calls:
            t.append(f"  calls {m.calls}")
            t.append(f"\ntr/call {m.transitions_per_call:.2f}  time/call {m.time_per_call_s * 1e3:.0f} ms")
        else:  # streaming: no calls to count; the rate is per second of engine time
            t.append(f"\ntr/s {m.transitions_per_s:.2f}  time/transition {m.wall_per_transition_s * 1e3:.0f} ms")
        t.append("\n")
        t.append_text(speedup_line(m))
        t.append(f"\nacceptance {m.acceptance_rate:.2f} {sparkline(m.acceptance_by_round)}")
        n = sum(m.eps_counts.values()) or 1
        t.append(f"\neps ✓ {m.eps_counts[ACCEPT] / n:.2f}  ✗ {m.eps_counts[REJECT] / n:.2f}"
                 f"  ? {m.eps_counts[UNCERTAIN] / n:.2f}")
        t.append_text(limit_line(m))
        t.append_text(critical_line(m))
        if m.error:
            t.append("\nerror: " + clip(m.error.replace("\n", " "), 300), style="bold red")
        if live:
            t.append("\n" + live, style="italic")
        self.update(t)


def limit_line(m) -> Text:
    """How close the chain came to what any exact chain could do on this engine (limit.py): the
    dependency limit always; in seconds, and the compute limit, once the engine's step cost is known
    (recorded at the session's end)."""
    lim = m.limits
    if lim is None:
        return Text()
    # seconds as "1.05s": Rich wraps a narrow panel at any space, and "1.05" and "s" parted ("compute 1.05⏎s")
    t = Text(f"\nlimit: dependency {count(lim.steps, 'step')}")
    if lim.seconds is not None:
        t.append(f" = {lim.seconds:.2f}s")
    if lim.compute_seconds is not None:
        t.append(f", compute {lim.compute_seconds:.2f}s")
    share = m.limit_share
    if share is not None:
        t.append(f"; this run took {1 / share:.1f}x the binding one" if share > 0 else "")
    return t


GLYPHS = {"irreducible": "█", "width": "▓", "block end": "▌", "extension": "▒", "not speculated": "░",
          "budget": "▚", "ranked": "▞", "reissued": "×", "round": "▁", "barrier": "‖",
          "scheduler": "·"}


def critical_line(m, width: int = 24) -> Text:
    """Where the chain's time went (runtime/session/critpath.py): a bar of its critical path, one glyph
    per cause and as long as its share, and the shares of the causes that took at least 1%."""
    cp = m.critical_path
    if cp is None or cp.time_s <= 0:
        return Text()
    shown = [(c, v) for c, v in cp.parts.items() if c in GLYPHS and v > 0]
    total = sum(v for _, v in shown) or 1.0
    bar, used = "", 0.0
    for c, v in shown:  # cells by cumulative share, so that the bar is always `width` long
        used += v
        bar += GLYPHS[c] * (round(width * used / total) - len(bar))
    shares = [f"{GLYPHS.get(c, '')}{SHORT[c]} {100 * v / cp.time_s:.0f}%" for c, v in cp.parts.items()
              if abs(v) >= 0.01 * cp.time_s]
    return Text(f"\npath {bar}\n  " + "  ".join(shares))
