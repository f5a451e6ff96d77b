"""A population's members as chains: Enter on a replica or a particle of the grid opens its chain
(`MemberScreen`: its records per barrier or block, their plot, the inspector of the record selected;
the alpha replica's every transition plotted beside), `m` opens every member's trace side by side
(`MembersScreen`).  The rows and numbers are `state/members.py`'s; the inspector's words are the
grid's own (`state/ppt.py`'s and `state/baseline_text.py`'s `cell_text`)."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static
from textual_plotext.plot import Plot

from presto_tui.views.screens.drawing import diff_styles, theme_colour, thinned
from presto_tui.views.state import baseline_text as bt
from presto_tui.views.state import members as ms
from presto_tui.views.state.evolution import clip
from presto_tui.views.state.ppt import PptRun, cell_text
from presto_tui.views.state.reducer import AppState
from presto_tui.views.widgets.footer import FittedFooter
from presto_tui.views.widgets.plots import SeriesPlot
from presto_tui.words import count

POLL_S = 0.25  # a live chat's population screens take its new records at most four times a second
PER_TOKEN = "t: the per-token view splits a round's node: r opens this member's rounds, and t there"


def _session_line(state: AppState, session: int) -> Text:
    view = state.sessions[session]
    run = view.method_run
    info = Text()
    info.append(f"session {session + 1} of {len(state.sessions)}", style="bold")
    if run is not None:
        info.append(" · " + " · ".join(run.describe()))
    info.append("\n> " + clip(view.start.prompt.replace("\n", " ⏎ "), 200), style="dim")
    return info


class _PopulationScreen(Screen[tuple[int, int] | None]):
    """A screen over one population session's members: the session's view and its method's run, which a
    live chat goes on folding into while the screen is open (`grown` redraws it)."""

    def __init__(self, state: AppState, session: int) -> None:
        super().__init__()
        self.state, self.session = state, session
        self.view = state.sessions[session]
        run = self.view.method_run
        assert run is not None and ms.is_population(run)
        self.run = run
        self._seen = self._event_count()

    def _event_count(self) -> int:
        """Its events and its members' own (a member's transitions come as its own events)."""
        return len(self.view.events) + sum(len(m.events) for m in self.view.members.values())

    def _watch_growth(self) -> None:
        self.set_interval(POLL_S, self._poll)

    def _poll(self) -> None:
        if self._event_count() != self._seen:
            self._seen = self._event_count()
            self.grown()

    def grown(self) -> None:
        """The session has new events (a live chat): draw what they added."""


class MemberScreen(_PopulationScreen):
    """One member's chain (see the module docstring); Escape goes back to the grid, on the record
    selected here.  In a live chat it takes the session's new records as they come (`grown`)."""

    BINDINGS = [
        Binding("escape,H", "close", "back to the grid"),
        Binding("left_square_bracket", "member(-1)", "member above"),
        Binding("right_square_bracket", "member(1)", "member below"),
        Binding("r", "rounds", "its rounds"),
        Binding("t", "tokens", "per token", show=False),
    ]

    def __init__(self, state: AppState, session: int, member: int, column: int | None = None) -> None:
        super().__init__(state, session)
        self.chain = self._chain(member)
        self.column = column

    def _chain(self, member: int) -> ms.MemberChain:
        own = self.view.members.get(member)
        return ms.member_chain(self.run, member, self.view.events, own.events if own is not None else None)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="member-info")
        with Horizontal(id="member-plots"):
            yield SeriesPlot(id="member-plot")
            yield SeriesPlot(id="member-draws")
        with Horizontal(id="member-body"):
            yield DataTable(id="member-records", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="member-inspector-box"):
                yield Static(id="member-inspector")
        yield FittedFooter()

    def on_mount(self) -> None:
        self._fill()
        self._watch_growth()

    def grown(self) -> None:
        """Its new records appear: the cursor follows the last record where it was on it, and stays on its
        record otherwise."""
        c = self.chain
        following = not c.rows or self.column == c.rows[-1].column
        self.chain = self._chain(c.member)
        if following:
            self.column = None
        self._fill()

    def _fill(self) -> None:
        c = self.chain
        info = _session_line(self.state, self.session)
        info.append(f"\n{c.title}", style="bold")
        rate = c.acceptance
        info.append(f" · {count(c.transitions, 'MH transition')}, {c.accepted} accepted"
                    + (f" ({rate:.2f})" if rate is not None else "") + f" · {count(len(c.rows), 'record')}")
        for note in c.notes:
            info.append(f"\n{note}", style="dim")
        self.query_one("#member-info", Static).update(info)
        table = self.query_one("#member-records", DataTable)
        table.clear(columns=True)
        for name in c.columns:
            table.add_column(name, key=name)
        for r in c.rows:
            table.add_row(*(Text(x, justify="right") for x in r.cells), key=str(r.column))
        at = next((i for i, r in enumerate(c.rows) if r.column == self.column), len(c.rows) - 1)
        if c.rows:
            table.move_cursor(row=max(0, at))
            self.column = c.rows[max(0, at)].column  # (now: the highlight's message comes later; till then the
            # inspector below said "no record yet" of a chain that grew while its cursor followed the last)
        table.focus()
        self.query_one("#member-plot", SeriesPlot).show(self._draw_records)
        draws = self.query_one("#member-draws", SeriesPlot)
        draws.display = bool(c.draws)
        draws.show(self._draw_transitions if c.draws else None)
        self._inspect()

    # -- plots ----------------------------------------------------------------------------
    def _draw_records(self, plt: Plot, width: int) -> None:
        c = self.chain
        rows = [r for r in c.rows if r.value is not None]
        plt.title(f"{c.value_name}, per {'barrier' if isinstance(self.run, PptRun) else 'block'}")
        if not rows:
            return
        xs = [r.column + 1 for r in rows]
        plt.plot(xs, [r.value for r in rows], marker="braille", color=theme_colour(self, "mh-cursor"))
        if self.column is not None and any(r.column == self.column for r in rows):  # the record selected below
            at = next(r for r in rows if r.column == self.column)
            plt.scatter([at.column + 1], [at.value], marker="dot", color=theme_colour(self, "mh-accept"))
        plt.xlim(0.5, max(xs) + 0.5)
        shown = thinned(len(rows), max(1, width // 12))  # (a label is at most "b123", with room around it)
        plt.xticks([float(xs[i]) for i in shown], [rows[i].cells[0] for i in shown])

    def _draw_transitions(self, plt: Plot, width: int) -> None:
        draws = self.chain.draws
        plt.title("log-target alpha log p0(x) per transition (dots: accepted)")
        keep = [i for i in thinned(len(draws), width) if math.isfinite(draws[i].log_target)]
        if not keep:
            return
        xs = [i + 1 for i in keep]
        plt.plot(xs, [draws[i].log_target for i in keep], marker="braille", color=theme_colour(self, "mh-cursor"))
        acc = [i for i in keep if draws[i].accepted]
        if acc:
            plt.scatter([i + 1 for i in acc], [draws[i].log_target for i in acc], marker="dot",
                        color=theme_colour(self, "mh-accept"))
        plt.xlim(0.5, len(draws) + 0.5)
        plt.xlabel("transition")

    # -- the inspector --------------------------------------------------------------------
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.column = int(event.row_key.value)
        self._inspect()
        self.query_one("#member-plot", SeriesPlot).refresh()

    def _inspect(self) -> None:
        c, run = self.chain, self.run
        box = self.query_one("#member-inspector", Static)
        if self.column is None or not c.rows:
            box.update(Text("no record yet", style="dim"))
            return
        eos = self.view.start.backend_info.get("eos_id")
        styles = diff_styles(self)
        if isinstance(run, PptRun):
            box.update(cell_text(run, self.column, c.row, self.state.pieces, eos, styles))
        else:
            box.update(bt.cell_text(run, self.column, c.member, self.state.pieces, eos, styles))  # type: ignore[arg-type]

    # -- keys -----------------------------------------------------------------------------
    def action_member(self, step: int) -> None:
        """The member on the grid's row above or below, at the same record."""
        n = ms.members(self.run)
        row = self.chain.row + step
        if not 0 <= row < n:
            return
        self.chain = self._chain(ms.member_of_row(self.run, row))
        self._fill()

    class OpenRounds(Message):
        """`r`: open member `member`'s own rounds (the app opens them: the round view they open in is a
        screen that opens this one, which never imports it)."""

        def __init__(self, state: AppState, session: int, member: int, label: str) -> None:
            super().__init__()
            self.state, self.session, self.member, self.label = state, session, member, label

    def action_rounds(self) -> None:
        """Its own chain's rounds (epochs) in the round view, where the trace records them (schema 1.4)."""
        if self.chain.member not in self.view.members:
            self.notify(ms.MEMBERS_NOT_RECORDED, timeout=5)
            return
        self.post_message(self.OpenRounds(self.state, self.session, self.chain.member,
                                          f"{self.chain.title} of session {self.session + 1}"))

    def action_tokens(self) -> None:
        self.notify(PER_TOKEN if self.chain.member in self.view.members else ms.MEMBERS_NOT_RECORDED, timeout=5)

    def action_close(self) -> None:
        self.dismiss((self.chain.row, self.column) if self.column is not None else None)


class MembersScreen(_PopulationScreen):
    """Every member's trace (`m` on a population): one line per member over the records, and the members
    side by side; Enter opens a member's chain."""

    BINDINGS = [Binding("escape,m", "close", "back")]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="members-info")
        yield SeriesPlot(id="members-plot")
        yield DataTable(id="members-table", cursor_type="row", zebra_stripes=True)
        yield FittedFooter()

    def on_mount(self) -> None:
        self._fill()
        self._watch_growth()

    def grown(self) -> None:
        self._fill()

    def _fill(self) -> None:
        run = self.run
        info = _session_line(self.state, self.session)
        what = "replica" if isinstance(run, PptRun) else "particle"
        info.append(f"\n{count(ms.members(run), what)}: Enter opens one's chain", style="bold")
        self.query_one("#members-info", Static).update(info)
        columns, rows = ms.member_table(run)
        table = self.query_one("#members-table", DataTable)
        at = table.cursor_row
        table.clear(columns=True)
        for name in columns:
            table.add_column(name, key=name)
        for row, cells in enumerate(rows):
            table.add_row(Text(cells[0]), *(Text(x, justify="right") for x in cells[1:]), key=str(row))
        if rows:
            table.move_cursor(row=min(at, len(rows) - 1))
        table.focus()
        self.query_one("#members-plot", SeriesPlot).show(self._draw)

    def _draw(self, plt: Plot, width: int) -> None:
        run = self.run
        series = ms.member_series(run)
        ppt = isinstance(run, PptRun)
        plt.title("log p0 of the state each replica holds, per barrier" if ppt
                  else "each particle's log weight, per block")
        most = 0
        for label, pts in series:
            if pts:
                plt.plot([x for x, _ in pts], [y for _, y in pts], marker="braille", label=label)
                most = max(most, max(x for x, _ in pts))
        if most:
            plt.xlim(0.5, most + 0.5)
            steps = run.steps if isinstance(run, PptRun) else []
            xs = [float(i + 1) for i in thinned(most, max(1, width // 12))]
            plt.xticks(xs, ["end" if 0 < x <= len(steps) and steps[int(x) - 1].final else f"b{int(x)}" for x in xs])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        row = int(event.row_key.value or 0)

        def done(result: tuple[int, int] | None) -> None:
            if result is not None:
                self.dismiss(result)

        self.app.push_screen(MemberScreen(self.state, self.session, ms.member_of_row(self.run, row)), done)

    def action_close(self) -> None:
        self.dismiss(None)
