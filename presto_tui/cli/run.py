"""`presto-tui run`: sample responses headless; Rich progress on stderr, results on stdout."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from presto_tui.cli import app
from presto_tui.cli import options as o


@app.command()
@o.handled
def run(
    ctx: typer.Context,
    prompt: Annotated[str | None, typer.Argument(help="The prompt to sample a response for.",
                                                     show_default=False)] = None,
    prompts_file: Annotated[Path | None, typer.Option(
        "--prompts-file", show_default=False,
        help="Text file with one prompt per line ('#' starts a comment).")] = None,
    sampler: o.Sampler = None, prefetch: o.Prefetch = None, inputs: o.Inputs = None, alpha: o.Alpha = None,
    tau: o.Tau = None, max_new_tokens: o.NewTokens = None, block_size: o.BlockSize = None,
    steps: o.Steps = None, budget: o.Budget = None, epsilon: o.Epsilon = None, seed: o.Seed = None,
    beta: o.Beta = None, cut_mix: o.CutMix = None, tries: o.Tries = None,
    paper_settings: o.PaperSettings = False, classifier: o.Classifier = None,
    backend: o.Backend = None, model: o.Model = None, chat_template: o.ChatTemplate = True, dtype: o.Dtype = None,
    max_model_len: o.MaxModelLen = None, gpu_memory_utilization: o.GpuMem = None,
    tensor_parallel_size: o.TensorParallel = 1, enforce_eager: o.Eager = None, threads: o.Threads = None,
    kv_cache_gib: o.KvCache = None,
    json_out: Annotated[bool, typer.Option("--json", rich_help_panel=o.OUTPUT,
                                           help="Print one JSON summary per prompt instead of text.")] = False,
    trace: o.TracePath = None, no_trace: o.NoTrace = False,
) -> None:
    """Sample responses headless and report how PreSTO did.

    Shows a progress bar on stderr (one tick per MH transition) and prints the final
    text with a summary: model calls, transitions per call, time per call, acceptance
    rate, epsilon-certain share and the estimated speedup over the sequential sampler.

    Examples:

      presto-tui run "What is 7 * 8?"                  # vLLM on the embedded SmolLM2-135M

      presto-tui run "Name a prime" --prefetch none    # sequential PowerMH

      presto-tui run --prompts-file prompts.txt --json --prefetch bfs -N 20

      presto-tui run "the cat" --backend synthetic     # no model needed
    """
    flags = ctx.params
    params = o.sampler_params(flags)
    prompts = o.read_prompts(prompt, prompts_file)
    clf = o.load_classifier(classifier)
    name, engine_opts = o.engine_options(flags)
    path = o.trace_path(flags, "run")
    engine = o.start_engine(name, engine_opts)
    writer = o.open_trace(path, "run", engine, params)
    run_prompts(engine, params, prompts, classifier=clf, json_out=json_out, trace=writer)


def run_prompts(engine, params, prompts: list[str], *, classifier=None, json_out: bool = False,
                trace=None) -> None:
    """Sample every prompt; record its events in `trace`.  Failures propagate (after the trace
    has its `error` event, or a `cancelled` end on Ctrl-C, and is closed)."""
    try:
        _run(engine, params, prompts, classifier, json_out, trace)
    except KeyboardInterrupt:
        if trace is not None:  # the trace keeps every finished round
            from presto_tui.runtime.session.runner import display_text

            trace.end_open_session("cancelled", lambda ids: display_text(engine, ids))
        raise
    finally:
        if trace is not None:
            trace.close()
            print(f"presto-tui: trace written to {trace.path}", file=sys.stderr)


def _run(engine, params, prompts, classifier, json_out, trace) -> None:
    import orjson
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from presto_tui.runtime.session.events import RoundDone
    from presto_tui.runtime.session.runner import run_session
    from presto_tui.runtime.session.summary import SessionSummary

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
            for ev in run_session(engine, params, engine.encode_prompt(prompt), prompt=prompt,
                                  classifier=classifier):
                summary.update(ev)
                if trace is not None:
                    trace.write(ev)
                if isinstance(ev, RoundDone):
                    bar.update(task, advance=ev.k_after - ev.k_before,
                               info=f"{summary.calls} calls, {summary.transitions_per_call:.2f} tr/call")
        if json_out:
            sys.stdout.write(orjson.dumps(summary.to_dict()).decode() + "\n")
            sys.stdout.flush()
        else:
            print_summary(out, summary, params, label)


def print_summary(out, s, params, label: str = "") -> None:
    from rich.table import Table
    from rich.text import Text

    from presto_tui.safetext import visible

    rule = "sequential" if params.prefetch == "none" else f"PreSTO {params.prefetch}"
    out.print(Text(f"{label}{visible(s.prompt, keep_newlines=False)}", style="bold"))
    out.print(Text(visible(s.text)))
    table = Table(title=f"{params.sampler}, {rule}, {params.inputs} inputs, N={params.budget}, K={params.steps}",
                  show_header=False, title_justify="left")
    sp = s.speedup_estimate
    rows = [
        ("model calls", f"{s.calls} (+{s.extend_calls} block extension)"),
        ("transitions", str(s.transitions)),
        ("transitions per call", f"{s.transitions_per_call:.2f}"),
        ("time per call", f"{s.time_per_call_s * 1000:.1f} ms"),
        ("acceptance rate", f"{s.acceptance_rate:.3f}"),
        ("epsilon-certain share", f"{s.eps_certain_share:.3f}"),
        ("requests issued / on path", f"{s.requests_issued} / {s.transitions}"),
        ("speedup over sequential (est.)", "n/a" if sp is None else f"{sp:.2f}x (from this session's "
                                                                   "single-request calls)"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    out.print(table)
