"""The round view's baseline mode: what the tree pane shows for a baseline session.

A baseline session (low temperature, best-of-N, PowerSMC, Scalable Power Sampling) has no rounds and
no tree; it takes one place on the timeline, and there this part, which the round screen holds
(`RoundScreen.baseline_mode`) beside the tree mode, puts its samples (`SampleTable`), particles
(`ParticleGrid`) or steps (`SpsGrid`) in the tree's place and words the title, the stats panel and
the inspector for them (`state/baseline_text.py`, `state/sps.py`).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from presto_tui.api.events import Pieces
from presto_tui.views.state import baseline_text as bt
from presto_tui.views.state import sps as sps_state
from presto_tui.views.state.baseline import BaselineRun
from presto_tui.views.state.evolution import DiffStyles
from presto_tui.views.state.reducer import SessionView
from presto_tui.views.widgets.baseline import BaselineTable, ParticleGrid, SampleTable
from presto_tui.views.widgets.inspector import Inspector
from presto_tui.views.widgets.sps import SpsGrid
from presto_tui.views.widgets.stats import StatsPanel
from presto_tui.views.widgets.titles import PaneTitle


class BaselineMode:
    def __init__(self) -> None:
        self.samples = SampleTable(id="samples")
        self.particles = ParticleGrid(id="particles")
        self.steps = SpsGrid(id="sps")
        self.tables: tuple[BaselineTable, ...] = (self.samples, self.particles, self.steps)
        for table in self.tables:
            table.display = False

    def compose(self) -> ComposeResult:
        yield from self.tables

    @property
    def main(self) -> BaselineTable | None:
        """The table on screen (None: the mode is not)."""
        return next((t for t in self.tables if t.display), None)

    def table_of(self, run: BaselineRun) -> BaselineTable:
        return self.steps if run.sps is not None else self.particles if run.smc else self.samples

    def set_shown(self, run: BaselineRun | None) -> None:
        """Show the table `run` needs (None: none)."""
        wanted = self.table_of(run) if run is not None else None
        for table in self.tables:
            on = table is wanted
            if table.display != on:  # (setting it at all lays the screen out again, at every frame)
                table.display = on

    def draw(self, session: SessionView, pieces: Pieces) -> None:
        run = session.baseline
        assert run is not None
        self.table_of(run).show(run, pieces, session.start.backend_info.get("eos_id"))

    def draw_title(self, title: PaneTitle, where: str, session: SessionView, steady: bool) -> None:
        """The pane's title: where it sits (the screen's words, `bt.where` and what a chat adds), then
        what the table's marks mean."""
        title.show_parts(where, bt.legend(session), steady=steady)

    def draw_stats(self, panel: StatsPanel, session: SessionView, **kwargs) -> None:
        panel.update(bt.stats_text(session, paused_style=panel.get_component_rich_style("stats--paused"),
                                   heading_style=panel.get_component_rich_style("stats--heading"), **kwargs))

    def inspect(self, inspector: Inspector, session: SessionView, pieces: Pieces) -> None:
        """The selected sample, or particle after a block, in the inspector."""
        run = session.baseline
        assert run is not None
        styles = DiffStyles(inspector.get_component_rich_style("inspector--removed"),
                            inspector.get_component_rich_style("inspector--added"))
        eos = session.start.backend_info.get("eos_id")
        if run.sps is not None:
            at = self.steps
            text = (sps_state.cell_text(run.sps, at.row, at.col, pieces, eos, styles) if run.sps.steps
                    else Text("no step finished yet", style="dim"))
        elif run.smc:
            grid = self.particles
            text = (bt.cell_text(run, grid.col, grid.row, pieces, eos, styles) if run.steps
                    else Text("no block finished yet", style="dim"))
        else:
            picked = self.samples.selected_sample()
            text = (bt.sample_text(run, *picked, pieces, eos, styles) if picked is not None
                    else Text("no sample finished yet", style="dim"))
        inspector.update(text)
