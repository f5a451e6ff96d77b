"""The chains of a prompt (`--chains M`) in traces and on a terminal: their reports and tables.

`chain_reports` finds the groups of chains in traces (each session once, as
`stats` counts them) and reports on each (`diagnostics.chains_report`); the
Rich tables here are what `run`, `stats` and the app print for a report.
Strings from a trace are shown through `visible()` inside `Text`, never as markup.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, ConsoleOptions, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from presto_tui.logs.reader import Trace
from presto_tui.logs.stats import _sessions
from presto_tui.runtime.session.diagnostics import (
    ALL,
    QUANTITIES,
    THRESHOLDS,
    ChainsReport,
    Selection,
    chain_groups,
    chains_report,
)
from presto_tui.runtime.session.summary import SessionSummary
from presto_tui.safetext import visible


def chain_reports(traces: list[Trace], selection: Selection = ALL) -> list[tuple[ChainsReport, list[dict]]]:
    """(report, members) for every group of chains in `traces`, diagnosed over the transitions
    `selection` keeps; members name each chain's session as `stats` does (trace, its number in it
    from 1, id, its chain from 1)."""
    summaries: list[SessionSummary] = []
    where: dict[int, dict] = {}
    for t, i, sess, seen_in in _sessions(traces):
        if seen_in is None and sess.start.chains > 1:
            s = sess.summary()
            summaries.append(s)
            where[id(s)] = {"trace": str(t.path), "session": i + 1, "session_id": sess.start.session_id,
                            "chain": s.chain}
    return [(chains_report(g, selection), [where[id(s)] for s in g]) for g in chain_groups(summaries)]


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _table(columns: list[str], rows: list[list], title: str = "", caption: str = "", left: tuple[str, ...] = (),
           ) -> Table:
    """Columns exactly as wide as their widest cell: a narrow terminal never hides or cuts one."""
    table = Table(title=title or None, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  caption=caption or None, caption_justify="left")
    for i, col in enumerate(columns):
        width = max([len(col)] + [Text(c).cell_len if isinstance(c, str) else c.cell_len for c in (r[i] for r in rows)])
        table.add_column(col, justify="left" if col in left else "right", no_wrap=True, width=width)
    for r in rows:
        table.add_row(*r)
    return table


SHORT = {"log_target": "log-target", "loglik": "log-lik", "confidence": "conf"}


def diagnostics_table(report: ChainsReport, title: str = "", compact: bool = False) -> Table:
    """Per block and quantity: mean, R-hat, bulk and tail ESS, MCSE; what fails a threshold in bold.
    `compact` (a side panel): without the draws and the mean, shorter names."""
    all_blocks = {d.block for d in report.diagnostics}
    blocks = len(all_blocks) > 1
    rows = []
    for d in report.diagnostics:
        bad = d.problems()
        rhat = Text(_num(d.rhat, ".3f"), style="bold" if any(p.startswith("R-hat") for p in bad) else "")
        ess = Text(_num(d.ess_bulk, ".0f"), style="bold" if any(p.startswith("bulk") for p in bad) else "")
        cells: list = [(SHORT if compact else QUANTITIES).get(d.quantity, d.quantity)]
        cells += [] if compact else [str(d.draws), _num(d.mean, ".4g")]
        cells += [rhat, ess, _num(d.ess_tail, ".0f"), _num(d.mcse, ".3g")]
        rows.append(([f"{d.block}" + ("" if d.block in report.shared else "*")] if blocks else []) + cells)
    draws = {d.draws for d in report.diagnostics}
    # the commands always say which draws they read; a side panel only when it is not every one
    said = "" if compact and report.selection == ALL else f"; {report.selection.words}"
    caption = (f"over {report.chains} chains" + (f" x {draws.pop()} transitions" if compact and len(draws) == 1 else "")
               + f"{said}; thresholds {THRESHOLDS}")
    if blocks and len(report.shared) < len(all_blocks):
        caption += "; * a block whose chains start from their own earlier blocks (no shared target: no warning)"
    columns = ["quantity"] + ([] if compact else ["draws", "mean"]) + ["R-hat", "bulk ESS", "tail ESS", "MCSE"]
    return _table((["block"] if blocks else []) + columns, rows, title, caption, left=("quantity",))


def chains_table(group: Sequence[SessionSummary], title: str = "") -> Group:
    """One row per chain: its status, acceptance, final log-likelihood and confidence; then each
    chain's text on a line of its own, cut at the terminal's width (every chain's seed and whole
    text are in the JSON and the trace)."""
    rows = []
    for s in group:
        chain = not s.one_shot or s.population  # a one-shot method (best-of-N, ...) makes no transitions
        rows.append([str(s.chain), Text(visible(s.status, keep_newlines=False)),
                     str(s.transitions) if chain else "-", f"{s.acceptance_rate:.2f}" if chain else "-",
                     _num(s.answer_loglik, ".3f"), _num(s.answer_confidence, ".3f")])
    texts = [Text.assemble((f"chain {s.chain}: ", "bold"), visible(s.text, keep_newlines=False), no_wrap=True,
                           overflow="ellipsis") for s in group]
    return Group(_table(["chain", "status", "tr", "acc", "log-lik", "conf"], rows, title), *texts)


class _Fitted:
    """The diagnostics table, compact where the full one does not fit the width it is drawn in."""

    def __init__(self, report: ChainsReport) -> None:
        self.report = report

    def __rich_console__(self, console: Console, options: ConsoleOptions):
        full = diagnostics_table(self.report)
        yield full if Measurement.get(console, options.update_width(10_000), full).maximum <= options.max_width else \
            diagnostics_table(self.report, compact=True)


def answer_text(report: ChainsReport) -> Text:
    """The answer most chains agree on, with its share (and the others' counts)."""
    v = report.vote
    t = Text()
    if v.majority is None:
        return Text("no chain gave an answer", style="dim")
    t.append(f"{'agreed answer' if v.share > 0.5 else 'most common answer'}: {v.majority.count}/{v.total} "
             f"chains ({v.share:.2f}){', tied' if v.tied else ''}"
             f"{'' if len(v.groups) == 1 else ' · others: ' + ', '.join(str(g.count) for g in v.groups[1:])}\n",
             style="bold")
    t.append(visible(v.majority.answer))
    return t


def warnings_text(report: ChainsReport) -> Text:
    return Text("\n".join(f"warning: {visible(w, keep_newlines=False)}" for w in report.warnings), style="yellow")


def report_renderable(report: ChainsReport, group: Sequence[SessionSummary] | None = None,
                      compact: bool = False) -> Group:
    """Everything about one prompt's chains: the chains (given their summaries), the diagnostics,
    warnings and the agreed answer."""
    parts: list = []
    if group is not None:
        parts.append(chains_table(group))
    if report.diagnostics:
        parts.append(diagnostics_table(report, compact=True) if compact else _Fitted(report))
    if report.warnings:
        parts.append(warnings_text(report))
    parts.append(answer_text(report))
    return Group(*parts)


def render(console: Console, reports: list[tuple[ChainsReport, list[dict]]], names: list[str]) -> None:
    """`stats`: one block per group of chains, its sessions named as in the sessions table."""
    for report, members in reports:
        console.print()
        ids = " ".join(f"[{names.index(m['trace']) + 1}]#{m['session']}" if m["trace"] in names
                       else f"#{m['session']}" for m in members)
        size = f"{report.chains} chains x K={report.steps}" if report.steps else f"{report.chains} chains"
        head = Text(f"chains {visible(report.group, keep_newlines=False)} ({size}: {ids}) ", style="bold")
        prompt = visible(report.prompt, keep_newlines=False)
        head.append(prompt if len(prompt) <= 60 else prompt[:59] + "…", style="")
        console.print(head)
        console.print(report_renderable(report))
