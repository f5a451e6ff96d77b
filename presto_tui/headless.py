"""Headless sessions for `presto-tui run`: Rich progress on stderr, results on stdout."""

from __future__ import annotations

import sys

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from presto_tui.runtime.backend import Backend
from presto_tui.runtime.classifier import CertaintyClassifier
from presto_tui.runtime.events import RoundDone
from presto_tui.runtime.params import SamplerParams
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.session import display_text, run_session
from presto_tui.runtime.summary import SessionSummary
from presto_tui.safetext import visible

EXIT_INTERRUPTED = 130


def run_prompts(backend: Backend, params: SamplerParams, prompts: list[str], *,
                classifier: CertaintyClassifier | None = None, json_out: bool = False,
                trace: TraceWriter | None = None) -> int:
    """Sample every prompt; record its events in `trace`. Returns the exit code."""
    try:
        return _run(backend, params, prompts, classifier, json_out, trace)
    finally:
        if trace is not None:
            trace.close()
            print(f"presto-tui: trace written to {trace.path}", file=sys.stderr)


def _run(backend, params, prompts, classifier, json_out, trace) -> int:
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False)
    total = params.steps * params.n_blocks
    for i, prompt in enumerate(prompts):
        summary = SessionSummary()
        label = f"[{i + 1}/{len(prompts)}] " if len(prompts) > 1 else ""
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                      console=err, transient=True) as bar:
            task = bar.add_task(f"{label}transitions", total=total, info="starting")
            try:
                for ev in run_session(backend, params, backend.encode_prompt(prompt), prompt=prompt,
                                      classifier=classifier):
                    summary.update(ev)
                    if trace is not None:
                        trace.write(ev)
                    if isinstance(ev, RoundDone):
                        bar.update(task, advance=ev.k_after - ev.k_before,
                                   info=f"{summary.calls} calls, {summary.transitions_per_call:.2f} tr/call")
            except KeyboardInterrupt:
                if trace is not None:  # the trace keeps every finished round
                    trace.end_open_session("cancelled", lambda ids: display_text(backend, ids))
                err.print("presto-tui: interrupted", style="yellow")
                return EXIT_INTERRUPTED
            except Exception as e:  # noqa: BLE001 - reported in one line; the event says which kind
                print(f"presto-tui: error: {summary.error or e}", file=sys.stderr)
                return 1
        if json_out:
            sys.stdout.write(orjson.dumps(summary.to_dict()).decode() + "\n")
            sys.stdout.flush()
        else:
            print_summary(out, summary, params, label)
    return 0


def print_summary(out: Console, s: SessionSummary, params: SamplerParams, label: str = "") -> None:
    rule = "sequential PowerMH" if params.prefetch == "none" else f"PreSTO {params.prefetch}"
    out.print(Text(f"{label}{visible(s.prompt, keep_newlines=False)}", style="bold"))
    out.print(Text(visible(s.text)))
    table = Table(title=f"{rule}, {params.inputs} inputs, N={params.budget}, K={params.steps}",
                  show_header=False, title_justify="left")
    rows = [
        ("model calls", f"{s.calls} (+{s.extend_calls} block extension)"),
        ("transitions", str(s.transitions)),
        ("transitions per call", f"{s.transitions_per_call:.2f}"),
        ("time per call", f"{s.time_per_call_s * 1000:.1f} ms"),
        ("acceptance rate", f"{s.acceptance_rate:.3f}"),
        ("epsilon-certain share", f"{s.eps_certain_share:.3f}"),
        ("requests issued / on path", f"{s.requests_issued} / {s.transitions}"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    out.print(table)
