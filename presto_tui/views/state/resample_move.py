"""Resample-move's session as the app shows it (pure): PowerSMC's particle grid (`ParticleGrid` draws it).

A block's record is PowerSMC's (each particle's extension, its weight after it, the ESS, the resampling and
the parents), then the PowerMH moves of the particles it left (`rm_step`'s `states`: each one's state after
them).  So particle i of a block holds the state the moves of the block before left it, and then its
extension: its text is that state and its block, not its ancestors' blocks put together (a move may change
any token).  The last block's moves show in the answer (the drawn particle's final state)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from presto_tui.api.events import SessionSummary
from presto_tui.views.state.baseline import SmcRun


@dataclass
class RmRun(SmcRun):
    """PowerSMC's fold, read as resample-move's blocks."""

    def tokens_at(self, step: int, i: int) -> tuple[int, ...]:
        """Particle i's generated tokens after block `step`'s extension: the state the moves before left it,
        then the block (a step or index the trace does not hold: none)."""
        if not 0 <= step < len(self.steps) or not 0 <= i < len(self.steps[step].tokens):
            return ()
        moved = self.steps[step - 1].states if step else ()
        return (moved[i] if 0 <= i < len(moved) else ()) + self.steps[step].tokens[i]

    def total_blocks(self) -> int | None:
        n, b = self.params.get("max_new_tokens"), self.params.get("block_size")
        return n // b if isinstance(n, int) and isinstance(b, int) and b > 0 else None

    def progress(self) -> str:
        most = self.total_blocks()  # (a particle runs to n: every block is grown)
        return f"block {len(self.steps)}{f' of {most}' if most else ''}, {self.particles or '?'} particles"

    def stats_body(self, m: SessionSummary) -> Text:
        t = super().stats_body(m)
        moved = sum(sum(st.accepted) for st in self.steps)
        t.append(f"\nPowerMH moves accepted {moved} (K={self.params.get('steps')} per particle and block)")
        return t
