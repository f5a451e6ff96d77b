"""The app's widgets: the round tree, the node inspector, the stats panel, the timeline.

Widgets only draw state handed to them (a RoundTree, a SessionView); every
string that came from a model or a trace goes through `visible()` into a
`rich.text.Text`, never through markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from presto_tui.runtime.core.mh import ACCEPT, REJECT, UNCERTAIN, Score
from presto_tui.runtime.core.names import SamplerName
from presto_tui.runtime.prefetch.tree import (
    ABORTED,
    DEFERRED,
    EXPANDED,
    LEAF,
    LIVE,
    UNREACHABLE,
    NodeView,
    RoundTree,
)
from presto_tui.runtime.samplers.multitry import log_ratio_terms
from presto_tui.runtime.session.critpath import SHORT
from presto_tui.runtime.session.summary import SessionSummary
from presto_tui.runtime.session.vocab import Pieces
from presto_tui.views.evolution import PLAIN_DIFF, DiffStyles, Writer, clip
from presto_tui.views.layout import LEGEND, REACH_FLOOR, Layout, label, layout, symbol
from presto_tui.views.state import SessionView


class RoundTreeView(ScrollView, can_focus=True):
    """A prefetch round drawn sideways with the line API (scales to large trees).

    Three independent channels (see palette.py): the class colours a node's symbol and
    label; the realized path puts a neutral band behind it, a ▶ after it and draws its
    edge bold; selection puts a cursor in the gutter and makes the label bold and
    underlined.  A style is assembled per cell from the three, so none overwrites another.
    The gutter's second column marks search matches.
    """

    COMPONENT_CLASSES = {
        "tree--accept", "tree--reject", "tree--uncertain", "tree--deferred", "tree--leaf",
        "tree--unreachable", "tree--live", "tree--aborted", "tree--path", "tree--cursor", "tree--connector",
        "tree--match",
    }
    DEFAULT_CSS = """
    RoundTreeView { background: $surface; }
    RoundTreeView > .tree--accept { color: $mh-accept; }
    RoundTreeView > .tree--reject { color: $mh-reject; }
    RoundTreeView > .tree--uncertain { color: $mh-uncertain; }
    RoundTreeView > .tree--deferred { color: $mh-deferred; text-style: italic; }
    RoundTreeView > .tree--leaf { color: $text-muted; }
    RoundTreeView > .tree--unreachable { color: $text-disabled; }
    RoundTreeView > .tree--live { color: $mh-live; }
    RoundTreeView > .tree--aborted { color: $text-muted; text-style: strike; }
    RoundTreeView > .tree--path { background: $mh-path; }
    RoundTreeView > .tree--cursor { color: $mh-cursor; text-style: bold; }
    RoundTreeView > .tree--connector { color: $text-muted; }
    RoundTreeView > .tree--match { color: $accent; text-style: bold; }
    """
    GUTTER = 2  # selection cursor, search mark

    class NodeSelected(Message):
        def __init__(self, node: NodeView | None) -> None:
            self.node = node
            super().__init__()

    # Navigation keys live here so they override ScrollView's scrolling keys while the
    # tree has focus (and leave the prompt's own cursor keys alone).
    BINDINGS = [
        Binding("left,h", "parent", "parent", show=False),
        Binding("up,k", "child(True)", "accept child", show=False),
        Binding("down,j", "child(False)", "reject child", show=False),
        Binding("right,l", "path_child", "path child", show=False),
        Binding("home", "screen.round_to(0)", "first round", show=False),
        Binding("end", "screen.round_to(-1)", "latest round", show=False),
    ]

    selected: reactive[int] = reactive(0)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.round_tree: RoundTree | None = None
        self.mode = "full"
        self.min_reach = 1e-3
        self.lay: Layout = Layout((), 0, 0)
        self.pinned: frozenset[int] = frozenset()  # hidden nodes a person navigated to
        self.marks: frozenset[int] = frozenset()  # search matches in this round

    def show(self, tree: RoundTree | None, keep_selection: bool = False) -> None:
        if keep_selection and tree is not None and tree is self.round_tree:
            # the same (frozen) round drawn again, as a live frame does: its layout and the hidden
            # nodes a person navigated to stay; only the search marks may have changed
            self.refresh()
            return
        # A node is kept by its path: the same node has another id in another tree object (a live
        # epoch is a new tree at every frame, and its nodes are numbered as they are recorded).
        path = self.round_tree.path_of(self.selected) if keep_selection and self.round_tree else None
        self.round_tree = tree
        self.pinned = frozenset()
        kept = tree.node_at(path) if tree is not None and path is not None else None
        self.selected = kept.id if kept is not None else 0
        self.relayout()

    def relayout(self) -> None:
        tree = self.round_tree
        self.lay = layout(tree, self.mode, self.min_reach, self.pinned) if tree else Layout((), 0, 0)
        width = max((len(r.prefix) + len(label(tree, r.node)) + 4 + self.GUTTER for r in self.lay.rows),
                    default=0) if tree else 0
        self.virtual_size = Size(width, len(self.lay.rows))
        if self.lay.row_of(self.selected) is None:
            self.selected = 0
        self._announce()
        self.refresh()

    def watch_selected(self, _old: int, _new: int) -> None:
        row = self.lay.row_of(self.selected)
        if row is not None:
            self.scroll_to_region_row(row)
        self._announce()
        self.refresh()

    def scroll_to_region_row(self, row: int) -> None:
        top = self.scroll_offset.y
        height = max(1, self.size.height)
        if row < top or row >= top + height:
            self.scroll_to(y=max(0, row - height // 2), animate=False)

    def _announce(self) -> None:
        node = self.round_tree.node(self.selected) if self.round_tree else None
        self.post_message(self.NodeSelected(node))

    def select(self, node_id: int | None) -> bool:
        """Select a node of the round's tree, revealing it if it was hidden; False if none."""
        if node_id is None or self.round_tree is None or self.round_tree.node(node_id) is None:
            return False
        if self.lay.row_of(node_id) is None:
            self.pinned = self.pinned | {node_id}
            self.relayout()
        self.selected = node_id
        return True

    def action_parent(self) -> None:
        if self.round_tree is not None:
            self.select(self.round_tree.parent_of(self.selected))

    def action_child(self, accept: bool) -> None:
        if self.round_tree is not None:
            self.select(self.round_tree.child(self.selected, accept))

    def action_path_child(self) -> None:
        """The child on the realized path (else the accept child)."""
        kids = self.round_tree.children(self.selected) if self.round_tree else []
        on_path = [v for v in kids if v.on_path]
        if on_path:
            self.select(on_path[0].id)
        else:
            self.action_child(True)

    def _style(self, kind: str) -> Style:
        return self.get_component_rich_style(f"tree--{kind}")

    def cell_style(self, kind: str, on_path: bool, selected: bool, base: Style) -> Style:
        """The style of a node's symbol and label: class colour, path band, selection (independent)."""
        cls = self._style(kind)
        return Style(color=cls.color, bgcolor=self._style("path").bgcolor if on_path else base.bgcolor,
                     italic=cls.italic, strike=cls.strike, bold=selected or None, underline=selected or None)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = y + scroll_y
        width = self.size.width
        if i >= len(self.lay.rows):
            return Strip.blank(width, self.rich_style)
        row = self.lay.rows[i]
        v = row.node
        base = self.rich_style
        selected = v.id == self.selected
        connector = base + self._style("connector")
        text_style = self.cell_style(row.kind, v.on_path, selected, base)
        branch = len(row.prefix) - 2 if v.id else len(row.prefix)  # the edge into this node: "┌─" / "└─"
        fg = self._style("cursor").color
        path_edge = connector + Style(bold=True, color=fg) if v.on_path else connector
        segs = [Segment("❯" if selected else " ", base + self._style("cursor")),
                Segment("•" if v.id in self.marks else " ", base + self._style("match")),
                Segment(row.prefix[:branch], connector),
                Segment(row.prefix[branch:], path_edge),
                Segment(symbol(row.kind) + " ", text_style),
                Segment(label(self.round_tree, v), text_style),  # type: ignore[arg-type]
                Segment(" ▶" if v.on_path else "", Style(color=fg, bgcolor=text_style.bgcolor))]
        strip = Strip(segs).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, base)

    def on_click(self, event) -> None:
        i = event.y + self.scroll_offset.y
        if 0 <= i < len(self.lay.rows):
            self.selected = self.lay.rows[i].node.id


def node_diff(tree: RoundTree, v: NodeView, pieces: Pieces, context: int = 12, budget: int = 1500,
              styles: DiffStyles = PLAIN_DIFF) -> Text:
    """The proposal made at this node against the state it holds, from the cut on (at most
    `budget` characters of each: the inspector is a small pane)."""
    text = Text()
    if v.decision is None:
        return text
    cut = v.decision.cut
    state = tree.state_of(v.src)
    text.append("…", style="dim")
    Writer(text, pieces, budget // 4).tokens(state.tokens[max(0, cut - context):cut], "dim")
    text.append("\n- ")
    Writer(text, pieces, budget).tokens(state.tokens[cut:], styles.removed)
    req = tree.requests[v.decision.request] if v.decision.request is not None else None
    if req is not None and req.done is not None:
        text.append(f"\n+ (not finished: {req.done} of {tree.T - cut} tokens decoded)", style="italic")
    elif req is not None:
        text.append("\n+ ")
        Writer(text, pieces, budget).tokens(req.proposal.tokens, styles.added)
    else:
        text.append("\n+ (not generated: deferred to a later round)", style="italic")
    return text


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


def ratio_text(sc: Score) -> Text:
    """`log r = ... = term + term ...` with every term named, and a line with what the terms are
    made of; a trace whose recorded terms do not add up to its log r is said to be inconsistent."""
    terms = ratio_terms(sc)
    t = Text(f"\nlog r = {sc.log_ratio:.3f} =")
    for i, (sign, name, value) in enumerate(terms):
        t.append(f"{' ' + sign if i else ''} {name} {value:.3f}")
    if sc.candidates:
        t.append(f"\n  W = sum of w_j (table); J = {sc.selected}: log w_J = target {sc.log_target:.3f}"
                 f" + proposal {sc.log_proposal:.3f}", style="dim")
    else:
        # target = alpha (log p0(y) - log p0(x)), proposal = log q(x) - log q(y): what they are made of
        t.append(f"\n  log p0 y {sc.log_p_y:.3f} x {sc.log_p_x:.3f} · log q x {sc.log_q_x:.3f} y {sc.log_q_y:.3f}",
                 style="dim")
        if len(terms) == 3:  # reverse move = log lambda(cut; y) - log lambda(cut; x)
            t.append(f"\n  cut law at the cut: lambda x {math.exp(sc.log_cut_x):.3f} y {math.exp(sc.log_cut_y):.3f}",
                     style="dim")
    total = math.fsum(v if sign == "+" else -v for sign, _, v in terms)
    if math.isfinite(total) and math.isfinite(sc.log_ratio) and abs(total - sc.log_ratio) > 1e-6 * max(
            1.0, abs(sc.log_ratio)):
        t.append(f"\n  the recorded terms sum to {total:.3f}, not log r: the trace is inconsistent",
                 style="bold")
    return t


class Inspector(Static):
    """Numbers and text diff of the selected node."""

    DEFAULT_CSS = """
    Inspector { height: auto; padding: 0 1; }
    Inspector > .inspector--removed { color: $mh-reject; text-style: strike; }
    Inspector > .inspector--added { color: $mh-accept; text-style: underline; }
    """
    COMPONENT_CLASSES = {"inspector--removed", "inspector--added"}

    def show(self, tree: RoundTree | None, v: NodeView | None, pieces: Pieces) -> None:
        if tree is None or v is None:
            self.update(Text("no round yet", style="dim"))
            return
        t = Text()
        t.append(f"node #{v.id}  depth {v.depth}  ", style="bold")
        t.append(f"{symbol(v.score.eps_class if v.status == EXPANDED and v.score else v.status)} {v.status}")
        t.append("  on path" if v.on_path else "")
        t.append(f"\nreach {v.reach:.3g}{'  in eps-rounded subtree' if v.rounded else ''}")
        d = v.decision
        if d is not None:
            t.append(f"\ndecision k={d.index}  cut {d.cut}/{tree.T} ({d.cut / tree.T:.2f})  u={d.accept_u:.3f}")
            if d.h_pred is not None:
                t.append(f"  h+={d.h_pred:.2f}")
        sc = v.score
        if sc is not None:
            t.append_text(ratio_text(sc))
            t.append(f"\nA = {sc.accept_prob:.4f}  class {sc.eps_class}  -> "
                     f"{'accept' if d is not None and d.accept_u < sc.accept_prob else 'reject'}")
            t.append("\nt: this ratio per token", style="dim")  # the per-token view (views/research.py)
            if sc.candidates:  # MultiTryMH: the candidate table
                t.append("\ncand  tau   log w    P(select)", style="bold")
                for j, (tau, log_w, prob) in enumerate(sc.candidates):
                    mark = "*" if j == sc.selected else " "
                    t.append(f"\n{mark}{j:<4} {tau:<5} {log_w:8.2f}  {prob:.3f}")
        elif v.status == DEFERRED:
            t.append("\nrequest infeasible this round (Condition 1); the decision keeps its inputs")
        elif v.status == LEAF:
            t.append("\nnot expanded this round")
        elif v.status == UNREACHABLE:
            t.append("\nissued below a deferred node's reject child: the walk cannot get here")
        elif v.status == LIVE:
            t.append("\nits request is still decoding (streaming): scored once it finishes")
        elif v.status == ABORTED:
            t.append("\nits request was aborted: no state the chain can still reach asks for it")
        if d is not None:
            t.append("\n")
            styles = DiffStyles(self.get_component_rich_style("inspector--removed"),
                                self.get_component_rich_style("inspector--added"))
            t.append_text(node_diff(tree, v, pieces, styles=styles))
        self.update(t)


def sparkline(values: Sequence[float], width: int = 24) -> str:
    bars = "▁▂▃▄▅▆▇█"
    vals = list(values)[-width:]
    return "".join(bars[min(7, int(v * 7.999))] for v in vals)


SEQUENTIAL_NAMES = {s.value: s.display for s in SamplerName}


def speedup_line(m: SessionSummary) -> Text:
    """The speedup estimate (SessionSummary.speedup_estimate, the one `run --json`, `stats` and
    `bench` report), shown only where it compares like with like, and saying against what.

    The summary decides where it compares like with like (`speedup_unavailable` says why not).
    """
    sampler = SEQUENTIAL_NAMES.get(str(m.params.get("sampler")), "sampler")
    sp = m.speedup_estimate
    if sp is None:
        return Text(f"speedup: n/a ({m.speedup_unavailable})", style="dim")
    t = Text(f"speedup ~{sp:.2f}x vs sequential {sampler}")
    t.append("\n  (est. from single-request call times)", style="dim")
    return t


class StatsPanel(Static):
    DEFAULT_CSS = """
    StatsPanel { height: auto; padding: 0 1; }
    StatsPanel > .stats--paused { color: $warning; text-style: bold reverse; }
    StatsPanel > .stats--heading { color: $text-muted; }
    """
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
    t = Text(f"\nlimit: dependency {lim.steps} steps")
    if lim.seconds is not None:
        t.append(f" = {lim.seconds:.2f} s")
    if lim.compute_seconds is not None:
        t.append(f", compute {lim.compute_seconds:.2f} s")
    share = m.limit_share
    if share is not None:
        t.append(f"; this run took {1 / share:.1f}x the binding one" if share > 0 else "")
    return t


GLYPHS = {"irreducible": "█", "width": "▓", "block end": "▌", "extension": "▒", "not speculated": "░",
          "budget": "▚", "ranked": "▞", "reissued": "×", "round": "▁", "scheduler": "·"}


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


def fold(pieces: Sequence[Text], width: int, sep: str) -> list[list[Text]]:
    """Pieces into lines of at most `width` cells, filled greedily; a piece is never split (one
    wider than a line gets a line of its own, which its widget cuts with an ellipsis)."""
    lines: list[list[Text]] = []
    used = 0
    for piece in pieces:
        if lines and used + len(sep) + piece.cell_len <= width:
            lines[-1].append(piece)
            used += len(sep) + piece.cell_len
        else:
            lines.append([piece])
            used = piece.cell_len
    return lines


def capped(lines: list[list[Text]], n: int) -> list[list[Text]]:
    """At most n lines (at least one): what does not fit goes on the last, to be cut there."""
    n = max(1, n)
    return lines if len(lines) <= n else lines[:n - 1] + [[p for line in lines[n - 1:] for p in line]]


def joined(lines: Sequence[Sequence[Text]], sep: str) -> Text:
    """The lines as one text (its widget's CSS says: no wrapping, an ellipsis where a line is cut)."""
    return Text("\n").join(Text(sep).join(line) for line in lines)


class TreeTitle(Static):
    """Where the tree on screen sits and what of it is shown (the mode, the reach threshold, how
    many nodes are hidden): one line where it fits, else folded between its parts, never cut
    mid-part; what is shown keeps its own line(s) and the location gives way first."""

    DEFAULT_CSS = "TreeTitle { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }"
    SEP = " · "

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._max_lines = 3
        self._parts: tuple[list[Text], list[Text]] = ([], [])
        self._lines = 1
        self._steady = False

    @property
    def max_lines(self) -> int:
        return self._max_lines

    @max_lines.setter
    def max_lines(self, n: int) -> None:
        """The screen lowers it on a short terminal, where every row counts."""
        if n != self._max_lines:
            self._max_lines = n
            self._draw()

    def show(self, where: str, view: RoundTreeView, steady: bool = False) -> None:
        """`steady`: do not shrink (while a run is live its title grows and shrinks every round;
        the tree should not jump by a row each time)."""
        mode = Text(f"[{view.mode}]")
        if view.round_tree is not None and view.round_tree.lazy and view.mode == "full":
            mode.append(f" reach >= {view.min_reach:.0e}")
            if view.min_reach <= REACH_FLOOR:
                mode.append(" (floor; reach-0 nodes show when navigated to)")
        shown = [mode]
        if view.lay.hidden:
            shown.append(Text(f"{view.lay.hidden:,} hidden (+ more)"))
        self._parts = ([Text(p) for p in where.split(self.SEP)], shown)
        self._steady = steady
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        where, shown = self._parts
        width = self.size.width or 80  # before the first layout
        lines = fold(where + shown, width, self.SEP)
        if len(lines) > self.max_lines:  # the location gives way first
            tail = fold(shown, width, self.SEP)
            lines = capped(capped(fold(where, width, self.SEP), self.max_lines - len(tail)) + tail, self.max_lines)
        self._lines = min(self.max_lines, max(len(lines), self._lines)) if self._steady else len(lines)
        self.styles.height = self._lines
        self.update(joined(lines, self.SEP))


class Legend(Static):
    """The symbols in their colours (with their meanings, they are in the help): on one line
    where it fits, else folded between entries."""

    DEFAULT_CSS = """
    Legend { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    Legend > .legend--accept { color: $mh-accept; }
    Legend > .legend--reject { color: $mh-reject; }
    Legend > .legend--uncertain { color: $mh-uncertain; }
    Legend > .legend--deferred { color: $mh-deferred; }
    """
    COMPONENT_CLASSES = {"legend--accept", "legend--reject", "legend--uncertain", "legend--deferred"}
    SEP = "  "

    def entries(self) -> list[Text]:
        out = []
        for kind, name in LEGEND:
            t = Text()
            t.append(symbol(kind) if kind != "path" else "▶",
                     style=self.get_component_rich_style(f"legend--{kind}", default=Style()))
            t.append(f" {name}")
            out.append(t)
        return out

    def on_resize(self) -> None:
        lines = fold(self.entries(), self.size.width or 80, self.SEP)
        self.styles.height = len(lines)
        self.update(joined(lines, self.SEP))
