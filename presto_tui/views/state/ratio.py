"""A decision's log MH ratio in named terms that add up (pure): the inspector's equation and the
per-token view's totals read the same terms."""

from __future__ import annotations

import math

from rich.text import Text

from presto_tui.api.events import Score, log_ratio_terms
from presto_tui.views.state.folding import Paragraphs, Units


def ratio_terms(sc: Score) -> tuple[tuple[str, str, float], ...]:
    """The named terms of a decision's log MH ratio as (sign, name, value): with these signs they
    sum to `sc.log_ratio` (the samplers' own definitions, core.mh.score and multitry.mtm_score)."""
    if sc.candidates:  # MultiTryMH: log W - log(1 + W - w_J), W the sum of the table's w_j
        log_w, log_rest = log_ratio_terms([c[1] for c in sc.candidates], sc.selected)
        return ("+", "log W", log_w), ("-", "log(1+W-w_J)", log_rest)
    terms = [("+", "target", sc.log_target), ("+", "proposal", sc.log_proposal)]
    if sc.log_cut_x or sc.log_cut_y:  # EntropyCut: the cut law depends on the state
        terms.append(("+", "reverse move", sc.log_cut_y - sc.log_cut_x))
    return tuple(terms)


def ratio_text(sc: Score) -> Paragraphs:
    """`log r = ... = term + term ...` with every term named, and a line with what the terms are
    made of, each folded between a name and the next (never between a name and its value); a
    trace whose recorded terms do not add up to its log r is said to be inconsistent."""
    terms = ratio_terms(sc)
    parts: list[Text | Units] = [Units([f"log r = {sc.log_ratio:.3f} =",
                                        *(f"{sign + ' ' if i else ''}{name} {value:.3f}"
                                          for i, (sign, name, value) in enumerate(terms))])]
    if sc.candidates:
        parts.append(Units(["W = sum of w_j (table);", f"J = {sc.selected}:", "log w_J =",
                            f"target {sc.log_target:.3f}", f"+ proposal {sc.log_proposal:.3f}"],
                           indent="  ", style="dim"))
    else:
        # target = alpha (log p0(y) - log p0(x)), proposal = log q(x) - log q(y): what they are made of
        parts.append(Units([f"log p0 y {sc.log_p_y:.3f}", f"x {sc.log_p_x:.3f} ·", f"log q x {sc.log_q_x:.3f}",
                            f"y {sc.log_q_y:.3f}"], indent="  ", style="dim"))
        if len(terms) == 3:  # reverse move = log lambda(cut; y) - log lambda(cut; x)
            parts.append(Units(["cut law at the cut:", f"lambda x {math.exp(sc.log_cut_x):.3f}",
                                f"y {math.exp(sc.log_cut_y):.3f}"], indent="  ", style="dim"))
    total = math.fsum(v if sign == "+" else -v for sign, _, v in terms)
    if math.isfinite(total) and math.isfinite(sc.log_ratio) and abs(total - sc.log_ratio) > 1e-6 * max(
            1.0, abs(sc.log_ratio)):
        parts.append(Text(f"  the recorded terms sum to {total:.3f}, not log r: the trace is inconsistent",
                          style="bold"))
    return Paragraphs(parts)
