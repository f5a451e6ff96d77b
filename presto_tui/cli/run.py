"""`presto-tui run`: sample responses headless; Rich progress on stderr, results on stdout."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from presto_tui.api.params import Group, load_classifier
from presto_tui.cli import options as o
from presto_tui.cli.params import takes
from presto_tui.cli.root import command
from presto_tui.errors import InputError
from presto_tui.logs.writer import open_trace
from presto_tui.safetext import visible
from presto_tui.words import count


@command()
@o.handled
@takes(Group.METHOD, Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE)
def run(
    ctx: typer.Context,
    prompt: Annotated[str | None, typer.Argument(help="The prompt to sample a response for.", metavar="PROMPT",
                                                     show_default=False)] = None,
    prompts_file: Annotated[Path | None, typer.Option(
        "--prompts-file", show_default=False,
        help="Text file with one prompt per line ('#' starts a comment).")] = None,
    chains: o.Chains = None, burn_in: o.BurnIn = 0, thin: o.Thin = 1, paper_settings: o.PaperSettings = False,
    classifier: o.Classifier = None,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", "-C", show_default=False,
        help=f"Chains run at once on each engine, sharing its batch, {o.CLI_LIMITS['concurrency'].where} "
        "[default: 1 for one prompt; with --prompts-file enough to keep about 64 requests live].")] = None,
    workers: o.Workers = None, ray_address: o.RayAddress = None,
    json_out: Annotated[bool, typer.Option("--json", rich_help_panel=o.OUTPUT,
                                           help="Print one JSON summary per prompt instead of text.")] = False,
    trace: o.TracePath = None, no_trace: o.NoTrace = False, draws: o.Draws = None,
) -> None:
    """Sample responses headless and report how PreSTO did.

    Shows a progress bar on stderr (one tick per MH transition) and prints each final
    text with a summary: model calls, transitions per call, time per transition,
    acceptance rate, epsilon-certain share, wasted tokens and the estimated speedup
    over the sequential sampler. Many prompts run as chains at once on one engine
    (--concurrency), or over Ray workers (--workers); results come in prompt order.

    Examples (vLLM on the embedded SmolLM2-135M unless --backend says otherwise):

      presto-tui run "What is 7 * 8?"

      presto-tui run "Name a prime" --prefetch none     # sequential PowerMH

      presto-tui run "Name a prime" --prefetch stream   # continuous speculation

      presto-tui run --prompts-file prompts.txt --json -C 8

      presto-tui run --prompts-file prompts.txt --workers 2

      presto-tui run "What is 7 * 8?" --chains 4 -K 48  # R-hat, ESS, vote

      presto-tui run "the cat" --backend synthetic      # no model needed
    """
    flags = ctx.params
    params = o.sampler_params(flags)
    prompts = o.read_prompts(prompt, prompts_file)
    if concurrency is not None:
        o.CLI_LIMITS["concurrency"].check("--concurrency", concurrency)
    per_prompt = o.chain_count(chains)
    kept = o.selection(burn_in, thin, params.steps)
    draws_to = o.draws_paths(draws)
    if per_prompt > 1 and (workers is not None or ray_address is not None):
        raise InputError("--chains runs a prompt's chains together on one engine; it does not combine with "
                         "--workers or --ray-address")
    sessions = len(prompts) * per_prompt
    from presto_tui.api.sessions import default_concurrency

    # by default a prompt's chains all run at once, sharing the engine's batch
    at_once = min(concurrency or max(per_prompt, default_concurrency(sessions, params)), sessions)
    clf = load_classifier(classifier)
    name, engine_opts = o.engine_options(flags)
    path = o.trace_path(flags, "run")
    cluster = o.start_cluster(flags, name, engine_opts, at_once)
    if cluster is not None:
        with cluster:
            writer = open_trace(path, "run", _Remote(cluster), params)
            run_on(lambda: cluster.run(prompts, params, clf), prompts, params, json_out, writer, None,
                   selection=kept, draws=draws_to)
        return
    engine = o.start_engine(name, engine_opts)
    writer = open_trace(path, "run", engine, params)
    run_prompts(engine, params, prompts, classifier=clf, json_out=json_out, trace=writer, concurrency=at_once,
                chains=per_prompt, selection=kept, draws=draws_to)


class _Remote:
    """What the trace writer needs of an engine, for engines that live in Ray workers."""

    def __init__(self, cluster):
        self.name, self.model = cluster.engine["name"], cluster.engine["model"]
        self.info, self.token_pieces = cluster.engine["info"], cluster.pieces


def run_prompts(engine, params, prompts: list[str], *, classifier=None, json_out: bool = False,
                trace=None, concurrency: int = 1, chains: int = 1, selection=None, draws=None) -> None:
    """Sample every prompt with `chains` chains each, `concurrency` chains at a time on one engine;
    results in prompt order.

    Failures propagate (after the trace has its `error` events, or `cancelled` ends on
    Ctrl-C, and is closed); every finished session stays in the trace."""
    from presto_tui.api.sampling import stream
    from presto_tui.api.sessions import display_text

    def events():
        # (the consumer indexes sessions from 0, as the Ray cluster's runner does; the API numbers them from 1)
        return ((s - 1, ev) for s, ev in stream(engine, prompts, params, chains=chains, concurrency=concurrency,
                                                classifier=classifier))

    run_on(events, prompts, params, json_out, trace, lambda ids: display_text(engine, ids), chains, selection, draws)


def run_on(events, prompts: list[str], params, json_out: bool, trace, text_of, chains: int = 1,
           selection=None, draws=None) -> None:
    """Consume the (session index, event) stream of any runner (one engine, a Ray cluster), session
    i being chain i % chains of prompt i // chains: progress on stderr, results in prompt order on
    stdout, every event in the trace; every chain's draws to the `draws` paths at the end."""
    from presto_tui.api.diagnostics import ALL

    recorded: dict | None = {} if draws else None
    try:
        _consume(events(), prompts, params, json_out, trace, chains, selection, recorded)
        if recorded is not None:
            o.write_draws(draws, [recorded[i] for i in sorted(recorded)], selection or ALL)
    except KeyboardInterrupt:
        if trace is not None:  # the trace keeps every finished session and round
            trace.end_open_session("cancelled", text_of or (lambda ids: ""))
        raise
    finally:
        if trace is not None:
            trace.close()
            for gap in trace.gaps:  # an event the writer could not encode: the session still ended
                print(f"presto-tui: warning: {visible(str(trace.path), keep_newlines=False)}: "
                      f"{visible(gap, keep_newlines=False)}", file=o.term())
            if not trace.broken:  # a failed write names the file in its own error line
                print(f"presto-tui: trace written to {visible(str(trace.path), keep_newlines=False)}", file=o.term())


def _consume(stream, prompts, params, json_out, trace, chains: int = 1, selection=None,
             recorded: dict | None = None) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from presto_tui.api.events import RoundDone, SessionEnd, SessionError, SessionStart, SessionSummary
    from presto_tui.api.sessions import WorkerLost

    out = Console(highlight=False, soft_wrap=True)
    err = Console(file=o.term(), highlight=False)
    summaries: dict[int, SessionSummary] = {}
    sids: dict[int, str] = {}
    shown = 0  # results print in prompt order, as soon as every earlier prompt has finished
    finished: set[int] = set()
    rerun: set[int] = set()  # prompts whose worker died, to be run again
    many = len(prompts) > 1
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task(f"prompts 0/{len(prompts)}, transitions" if many else "transitions",
                            total=len(prompts) * chains * params.steps * params.n_blocks, info="starting")
        members = lambda p: range(p * chains, (p + 1) * chains)  # the sessions of prompt p
        done = 0  # prompts whose chains have all finished
        for i, ev in stream:
            if isinstance(ev, WorkerLost):
                err.print(f"presto-tui: worker {ev.worker} died ({visible(ev.reason, keep_newlines=False)}); "
                          f"{len(ev.prompts)} unfinished prompt(s) run again on the others", style="yellow")
                rerun.update(ev.prompts)
                continue
            if isinstance(ev, SessionStart):
                sids[i] = ev.session_id
                if i in summaries and summaries[i].transitions:  # run again after its worker died
                    bar.update(task, advance=-summaries[i].transitions)
                summaries[i] = SessionSummary()
            s = summaries.setdefault(i, SessionSummary())
            s.update(ev)
            if recorded is not None:  # --draws: every chain's transitions and states (logs/draws.py)
                from presto_tui.logs.draws import ChainDraws

                if isinstance(ev, SessionStart):
                    recorded[i] = ChainDraws()
                recorded.setdefault(i, ChainDraws()).update(ev)
            if trace is not None:
                trace.write(ev, sids.get(i))
            if isinstance(ev, RoundDone):
                live = sum(1 for j in summaries if j not in finished)
                info = f"{count(live, 'chain')} live" if many or chains > 1 else (
                    f"{s.calls} calls, {s.transitions_per_call:.2f} tr/call" if s.calls else
                    f"{s.transitions_per_s:.2f} tr/s")
                bar.update(task, advance=ev.k_after - ev.k_before, info=info)
            if isinstance(ev, SessionError) and i in rerun:
                rerun.discard(i)
                continue  # the session its worker left open ends; the prompt runs again elsewhere
            if isinstance(ev, (SessionEnd, SessionError)):
                finished.add(i)
                done += all(j in finished for j in members(i // chains))
                if many:
                    bar.update(task, description=f"prompts {done}/{len(prompts)}, transitions")
                while shown < len(prompts) and all(j in finished for j in members(shown)):
                    group = [summaries[j] for j in members(shown)]
                    _print(out, group, params, json_out, f"[{shown + 1}/{len(prompts)}] " if many else "",
                           selection)
                    shown += 1


def _print(out, group, params, json_out: bool, label: str, selection=None) -> None:
    """A prompt's result: its one chain's summary, or its chains' report (diagnosed over the transitions
    `selection` keeps)."""
    if len(group) == 1:
        obj = group[0].to_dict()
    else:
        from presto_tui.api.diagnostics import ALL, chains_report

        report = chains_report(group, selection or ALL)
        obj = {**report.to_dict(), "sessions": [s.to_dict() for s in group]}
    if json_out:
        import orjson

        sys.stdout.write(orjson.dumps(obj).decode() + "\n")
        sys.stdout.flush()
    elif len(group) == 1:
        print_summary(out, group[0], params, label)
    else:
        print_chains(out, group, report, params, label)


def mh_rows(s) -> list[tuple[str, str]]:
    sp, alone = s.speedup_estimate, s.speedup_transitions
    rows = [("model calls", f"{s.calls} (+{s.extend_calls} block extension)")] if s.calls else []
    return rows + [
        ("transitions", str(s.transitions)),
        *([("transitions per call", f"{s.transitions_per_call:.2f}"),
           ("time per call", f"{s.time_per_call_s * 1000:.1f} ms")] if s.calls else []),
        ("time", f"{s.wall_s:.2f} s from the session's start, block extensions ({s.extend_time_s:.2f} s) included"),
        ("time per transition", f"{s.wall_per_transition_s * 1000:.1f} ms"),
        ("acceptance rate", f"{s.acceptance_rate:.3f}"),
        ("epsilon-certain share", f"{s.eps_certain_share:.3f}"),
        ("requests issued / on path", f"{s.requests_issued} / {s.transitions}"
         + (f" ({s.requests_aborted} aborted)" if s.requests_aborted else "")),
        ("tokens wasted", f"{100 * s.wasted_share:.0f}% of {s.proposal_tokens}"),
        ("speedup over sequential (est.)", f"n/a ({s.speedup_unavailable})" if sp is None else
         f"{sp:.2f}x (from this session's single-request calls" + (
             f"; {alone:.2f}x over the transitions alone, extensions left out)" if alone is not None else ")")),
    ]


def print_summary(out, s, params, label: str = "") -> None:
    from rich.table import Table
    from rich.text import Text

    out.print(Text(f"{label}{visible(s.prompt, keep_newlines=False)}", style="bold"))
    out.print(Text(visible(s.text)))
    quality = []
    if s.answer_loglik is not None and s.answer_confidence is not None:
        quality = [("answer under p0 (eqs. 21-22)", f"log-likelihood {s.answer_loglik:.3f} per token, confidence "
                    f"{s.answer_confidence:.3f}")]
    table = Table(title=setting(params), show_header=False, title_justify="left")
    if s.one_shot:
        rows = [("model calls", str(s.calls)), ("time", f"{s.wall_s:.2f} s"),
                ("tokens generated", str(s.tokens_generated)), ("answer tokens", str(len(s.tokens)))]
        if s.population:  # its draws' transitions (tempering: the alpha replica's; resample-move: every particle's)
            rows.append(("MH transitions / acceptance rate", f"{s.transitions} / {s.acceptance_rate:.3f}"))
        rows += s.info.rows() + quality
    else:
        rows = mh_rows(s) + s.info.rows() + quality
    for k, v in rows:
        table.add_row(k, v)
    out.print(table)
    for note in s.info.notes():
        out.print(Text(f"note: {note}", style="dim"))


def setting(params) -> str:
    """What ran, in its method's words (the settings, its rule and sizes), and the parameters every
    method reads."""
    from presto_tui.api.params import describe

    words = describe(params)
    if params.method.chain:
        inputs = f"{params.inputs} inputs"  # a node-input rule's words already say it
        inputs = "" if inputs in words else f", {inputs}"
        return f"{words}{inputs}, K={params.steps}" + (
            f", B={params.block}" if params.block != params.max_new_tokens else "")
    return f"{words}, tau={params.proposal_tau:g}"


def print_chains(out, group, report, params, label: str = "") -> None:
    """A prompt's chains: one row each, their diagnostics and warnings, and the answer they agree on."""
    from rich.text import Text

    from presto_tui.logs.chains import report_renderable

    out.print(Text(f"{label}{visible(group[0].prompt, keep_newlines=False)}", style="bold"))
    took = f"; {report.elapsed_s:.2f} s of engine time (the longest chain)" if report.elapsed_s else ""
    out.print(Text(f"{len(group)} chains (seeds from --seed {params.seed}), {setting(params)}{took}"))
    out.print(report_renderable(report, group))
