"""The round view's method mode: what the tree pane shows for a session with a view of its own.

A one-shot session (low temperature, best-of-N, PowerSMC, Scalable Power Sampling, a plugin's) has
no rounds and no tree; it takes one place on the timeline, and there this part, which the round
screen holds (`RoundScreen.baseline_mode`) beside the tree mode, puts its method's view (the widget
`Method.view` names: `SampleTable`, `ParticleGrid`, `SpsGrid`, ...) in the tree's place and words
the title, the stats panel and the inspector for it (`state/baseline_text.py`).  A widget is made
the first time a session of its method is shown, and kept.
"""

from __future__ import annotations

import importlib

from textual.app import ComposeResult
from textual.containers import Container

from presto_tui.api.events import Pieces
from presto_tui.api.params import find_method
from presto_tui.views.state import baseline_text as bt
from presto_tui.views.state.evolution import DiffStyles
from presto_tui.views.state.reducer import SessionView
from presto_tui.views.widgets.baseline import BaselineTable, SampleTable
from presto_tui.views.widgets.inspector import Inspector
from presto_tui.views.widgets.stats import StatsPanel
from presto_tui.views.widgets.titles import PaneTitle


def view_class(params: dict) -> type[BaselineTable]:
    """The widget a session's method draws it with (`Method.view`; the samples table where a method
    names none or its view cannot be loaded)."""
    m = find_method(params.get("sampler"))
    path = getattr(m, "view", None) if m is not None else None
    if path:
        module, _, name = path.partition(":")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            cls = None
        if isinstance(cls, type) and issubclass(cls, BaselineTable):
            return cls
    return SampleTable


class BaselineMode:
    def __init__(self) -> None:
        self.box = Container(id="method-views")
        self.box.display = False
        self.tables: dict[type[BaselineTable], BaselineTable] = {}

    def compose(self) -> ComposeResult:
        yield self.box

    @property
    def main(self) -> BaselineTable | None:
        """The table on screen (None: the mode is not)."""
        return next((t for t in self.tables.values() if t.display), None)

    def table_of(self, session: SessionView) -> BaselineTable:
        cls = view_class(session.params)
        table = self.tables.get(cls)
        if table is None:
            table = self.tables[cls] = cls(id=f"view-{cls.__name__.lower()}")
            table.display = False
            self.box.mount(table)
        return table

    def set_shown(self, session: SessionView | None) -> None:
        """Show the table `session`'s method needs (None: none)."""
        wanted = self.table_of(session) if session is not None else None
        self.box.display = wanted is not None
        for table in self.tables.values():
            on = table is wanted
            if table.display != on:  # (setting it at all lays the screen out again, at every frame)
                table.display = on

    def draw(self, session: SessionView, pieces: Pieces) -> None:
        run = session.method_run
        assert run is not None
        self.table_of(session).show(run, pieces, session.start.backend_info.get("eos_id"))

    def draw_title(self, title: PaneTitle, where: str, session: SessionView, steady: bool) -> None:
        """The pane's title: where it sits (the screen's words, `bt.where` and what a chat adds), then
        what the table's marks mean."""
        title.show_parts(where, bt.legend(session), steady=steady)

    def draw_stats(self, panel: StatsPanel, session: SessionView, **kwargs) -> None:
        panel.update(bt.stats_text(session, paused_style=panel.get_component_rich_style("stats--paused"),
                                   heading_style=panel.get_component_rich_style("stats--heading"), **kwargs))

    def inspect(self, inspector: Inspector, session: SessionView, pieces: Pieces) -> None:
        """The selection of the session's view in the inspector (a sample, a particle after a block, ...)."""
        styles = DiffStyles(inspector.get_component_rich_style("inspector--removed"),
                            inspector.get_component_rich_style("inspector--added"))
        inspector.update(self.table_of(session).inspect(styles))
