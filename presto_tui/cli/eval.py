"""`presto-tui eval`: graded tasks, several methods, one table (paper appendix E.3 and E.8)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from presto_tui.api.params import BENCH_SIZES, LIMITS, BackendName, Group, frontier_axes, load_classifier, methods_help
from presto_tui.cli import options as o
from presto_tui.cli.params import takes
from presto_tui.cli.root import command
from presto_tui.errors import InputError, OutputError
from presto_tui.eval.frontier import DEFAULT_SPEC as DEFAULT_FRONTIER
from presto_tui.files import make_folders, output_path
from presto_tui.logs.writer import default_trace_path, open_trace
from presto_tui.safetext import visible

DEFAULT_METHODS = "lowtemp,bon:4,smc:4,powermh,powermh+stream"
FRONTIER = "Frontier"
CODE_TIMEOUT = o.Limit(0.1, 3600)
CODE_MEMORY = o.Limit(16, 1 << 20, integer=True)


@command("eval")
@o.handled
@takes(Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE, Group.METHOD, defaults=BENCH_SIZES,
       without=("sampler", "prefetch"),
       help={"seed": "The methods' seed: each item's sessions run on a seed derived from it and the item's id, "
             "every method of an item on the same one"})
def eval_(
    ctx: typer.Context,
    tasks: Annotated[str, typer.Argument(
        metavar="TASKS", show_default=False,
        help="A task file (JSONL: one object a line with prompt and answer, optionally grader and id; or a "
        "published file, JSONL, CSV or Parquet, read with --preset or --fields), a hub dataset "
        "hf:ORG/NAME[/CONFIG][:SPLIT], or the built-in set: builtin, builtin:arith or builtin:mc "
        "[default: builtin].")] = "builtin",
    methods: Annotated[str, typer.Option(
        "--methods", "-m", metavar="METHOD,...",
        help=methods_help() + ". Every other parameter comes from the flags below.")] = DEFAULT_METHODS,
    limit: Annotated[int | None, typer.Option(
        "--limit", show_default=False,
        help=f"Use only the first N items, {o.CLI_LIMITS['limit'].where} [default: all].")] = None,
    task_seed: Annotated[int, typer.Option(
        "--task-seed", help="Seed of the built-in set: the same seed gives the same items.")] = 0,
    grader: Annotated[str | None, typer.Option(
        "--grader", metavar="NAME", show_default=False,
        help="Grader of the items that name none: exact, number, mc, regex, python or math [default: the "
        "preset's, else exact].")] = None,
    preset: Annotated[str | None, typer.Option(
        "--preset", metavar="LAYOUT", show_default=False,
        help="A published task file's layout, read as it is: math, also named math500 or aime (MATH-500, AIME: "
        "problem, answer; graded by math), gsm8k (question, answer with '#### N'; math) or humaneval (prompt, "
        "test, entry_point; python).")] = None,
    fields: Annotated[str | None, typer.Option(
        "--fields", metavar="FIELD=COLUMN,...", show_default=False,
        help="Which of the file's columns make an item's prompt, answer, id and grader (over --preset's), as "
        "prompt=problem,answer=answer; grader=COLUMN names a column holding each row's grader (one grader for "
        "every item: --grader).")] = None,
    prompt_template: Annotated[str | None, typer.Option(
        "--prompt-template", metavar="TEXT", show_default=False,
        help="The prompt sent, as '{prompt} Put the final answer in \\boxed{}.': {prompt} is the prompt "
        "column, {COLUMN} any other column's value; a bracket after a LaTeX command stays as written [default: "
        "the preset's, else the prompt as it is].")] = None,
    code_timeout: Annotated[float, typer.Option(
        "--code-timeout", metavar="S", help=f"python grader: seconds a response's code and its tests may run, "
        f"{CODE_TIMEOUT.where}.")] = 10.0,
    code_memory: Annotated[int, typer.Option(
        "--code-memory", metavar="MIB", help=f"python grader: memory they may use, MiB, {CODE_MEMORY.where}.")
    ] = 1024,
    tost: Annotated[list[str] | None, typer.Option(
        "--tost", metavar="A,B", show_default=False,
        help="Also test methods A and B for equivalence (paired TOST of eq. 23 on log-likelihood and confidence); "
        "repeat for more pairs. Every PreSTO method is always tested against its sequential sampler when both "
        "are listed.")] = None,
    classifier: o.Classifier = None, chains: o.Chains = None, burn_in: o.BurnIn = 0, thin: o.Thin = 1,
    vote: Annotated[bool, typer.Option(
        "--vote", help="With --chains M: grade the answer most chains agree on (grouped by what the grader reads "
        "from each: self-consistency's majority vote) instead of the first chain's.")] = False,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", "-C",
        help=f"Sessions at once on each engine, sharing its batch, {o.CLI_LIMITS['concurrency'].where}. Above 1 "
        "a session's time and peak KV-pool use include the others it ran beside (1: one prompt at a time, as "
        "the paper measures).")] = 1,
    workers: o.Workers = None, ray_address: o.RayAddress = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", rich_help_panel=o.OUTPUT, show_default=False,
        help="Write the results JSON here; the figures go beside it [default: beside the trace, "
        "sessions/<time>-eval.json].")] = None,
    figures: Annotated[str, typer.Option(
        "--figures", metavar="png|svg|none", rich_help_panel=o.OUTPUT,
        help="Image format of the two figures saved beside the results (<results>-accuracy, <results>-kv).")
    ] = "png",
    trace: o.TracePath = None, no_trace: o.NoTrace = False,
    resume: Annotated[Path | None, typer.Option(
        "--resume", metavar="RESULTS", rich_help_panel=o.OUTPUT, show_default=False,
        help="Continue an interrupted run: RESULTS is its run log (<results>.runlog, written as sessions "
        "finish) or its results JSON. Only the sessions it does not hold run, on the same seeds, appended to "
        "the same trace; the results go where the first run's went (or to --output). Give the first run's "
        "settings: a run whose settings differ is refused, naming the difference.")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", rich_help_panel=o.OUTPUT, help="Print the results JSON on stdout instead of tables and plots.")
    ] = False,
    frontier: Annotated[str | None, typer.Option(
        "--frontier", metavar="SPEC", rich_help_panel=FRONTIER, show_default=False,
        help="Instead of --methods: each method over a range of its budget, quality against time, the Pareto "
        "fronts and the speedup at equal quality. SPEC: entries METHOD[@B1,B2,...] separated by ';' (METHOD in "
        "--methods' language, :SYMBOL=VALUE settings included), B the values of its budget axis: "
        f"{frontier_axes()} (an MH chain's with or without a PreSTO rule); default: {DEFAULT_FRONTIER}. Quality: "
        "the exact distance to pi_alpha on an enumerable model "
        "(--backend synthetic --synthetic-vocab V), else log-likelihood, confidence and accuracy.")] = None,
    frontier_seeds: Annotated[int | None, typer.Option(
        "--frontier-seeds", metavar="S", rich_help_panel=FRONTIER, show_default=False,
        help="--frontier: sessions per prompt and point, each with a seed of its own [default: 200 on an "
        "enumerable model, 1 elsewhere].")] = None,
    frontier_axis: Annotated[str | None, typer.Option(
        "--frontier-axis", metavar="time|tokens|steps", rich_help_panel=FRONTIER, show_default=False,
        help="--frontier: the cost the fronts are read at: time per prompt, tokens decoded per prompt (equal "
        "tokens, as papers compare) or engine steps per prompt [default: time].")] = None,
) -> None:
    """Grade several methods on the same tasks: accuracy, cost, and whether PreSTO changed the answers.

    Every method answers every item with the same prompt and seed, items in turn and the
    methods of an item one after another, so that drift on a shared machine hits them
    alike. Per method: accuracy with its 95% Wilson interval, time per prompt, MH
    transitions, tokens generated, peak KV-pool use (vLLM's own count) and the answers'
    log-likelihood and confidence under p0 (paper eqs. 21-22); per item every method's
    answer. Then the paper's paired TOST (eq. 23): each PreSTO method against its
    sequential sampler (with decision inputs they are identical token for token: no
    test is needed; with --inputs node the test is what shows the law unchanged), and
    any pair given with --tost. Two figures (accuracy, and peak KV-pool use, against
    time per prompt: Figure 20's axes) print in the terminal and are saved beside the
    results JSON; every session goes to the trace. Ctrl-C keeps what finished, and every
    finished session goes to a run log beside the results as it ends: --resume continues
    a run that stopped, even one killed, running only what it lacks (docs/eval/resume.md).

    Graders: exact (the whole response, ignoring case, spacing and outer punctuation),
    number (the number given, however written), mc (the option letter), regex (the
    answer is a pattern to find), python (the answer is test code, run with the
    response's code in a separate process with a time and a memory limit) and math (the
    last boxed answer against a LaTeX answer, by math-verify: 0.5 = 1/2 = 2/4).
    Published files (JSONL, CSV, Parquet, hf:ORG/NAME) are read as they are with
    --preset math (MATH-500, AIME), gsm8k or humaneval, or --fields; with --chains M the
    table adds pass@k and maj@k (docs/eval/published.md).

    Examples:

      presto-tui eval                            # built-in tasks, embedded model

      presto-tui eval --limit 10 -n 48 -K 8

      presto-tui eval tasks.jsonl --methods powermh,powermh+spine:8 -K 8

      presto-tui eval math500.jsonl --preset math --chains 4   # pass@k, maj@k

      presto-tui eval --methods powermh,powermh+bfs --inputs node -N 20  # TOST

      presto-tui eval --backend synthetic --methods powermh,bon:4 \\
        --tost powermh,bon:4

      presto-tui eval --methods powermh+stream --chains 5 --vote  # majority

      presto-tui eval --methods "powermh,ppt:r=4,rm+stream:p=16"  # populations

      presto-tui eval tasks.jsonl -o run.json --resume run.runlog  # after a crash

      presto-tui eval --frontier "lowtemp; smc@2,4; powermh+stream@2,8"

      presto-tui eval --backend synthetic --frontier default   # no model needed

    With --frontier (docs/eval/frontier.md) each method runs over a range of its budget
    instead: its quality against its time per prompt, each method's Pareto front and the
    joint one (a table, a plot, a PNG beside the results), the speedup of PreSTO over its
    sequential sampler at equal quality, and where the other methods land against both.
    """
    flags = ctx.params
    from presto_tui.api.params import PrefetchRule, parse_methods, unknown_choice
    from presto_tui.eval.figures import FORMATS, need_matplotlib
    from presto_tui.eval.graders import GRADERS
    from presto_tui.eval.sandbox import CodeLimits
    from presto_tui.eval.tasks import BUILTIN, layout, load_tasks
    from presto_tui.logs.paired import need_statsmodels

    need_statsmodels()
    if figures not in FORMATS:
        raise InputError(unknown_choice("--figures", figures, FORMATS))
    need_matplotlib(figures)
    if grader is not None and grader not in GRADERS:
        raise InputError(unknown_choice("--grader", grader, tuple(GRADERS)))
    CODE_TIMEOUT.check("--code-timeout", code_timeout)
    CODE_MEMORY.check("--code-memory", code_memory)
    o.CLI_LIMITS["concurrency"].check("--concurrency", concurrency)
    if limit is not None:
        o.CLI_LIMITS["limit"].check("--limit", limit)
    LIMITS["seed"].check("--task-seed", task_seed)
    per_pair = o.chain_count(chains)
    if frontier is not None:
        from presto_tui.cli.frontier import conflicts

        source = ctx.get_parameter_source("methods")  # typer's own click: read by name
        conflicts(flags, methods_given=source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"),
                  tost=tost, chains=per_pair, vote=vote, concurrency=concurrency)
    elif frontier_seeds is not None or frontier_axis is not None:
        raise InputError(f"{'--frontier-seeds' if frontier_seeds is not None else '--frontier-axis'} goes with "
                         "--frontier")
    if vote and per_pair < 2:
        raise InputError("--vote grades the answer several chains agree on: give --chains M with M >= 2")
    if per_pair > 1 and (workers is not None or ray_address is not None):
        raise InputError("--chains runs a prompt's chains at once on one engine; it does not combine with --workers")
    # every method sets its own sampler and rule; the base is valid with any --inputs
    base = o.sampler_params(flags, preset={**BENCH_SIZES, "prefetch": PrefetchRule.NONE.value}, one_sampler=False)
    kept = o.selection(burn_in, thin, base.steps)
    method_list = parse_methods(methods, base, budget_given=o.budget_given(flags))
    pairs = _pairs(tost or [], [m.label for m in method_list])
    items = load_tasks(tasks, default_grader=grader, seed=task_seed,
                       layout=layout(preset, fields, prompt_template), limit=limit)
    clf = load_classifier(classifier)
    name, engine_opts = o.engine_options(flags)
    if frontier is not None and resume is not None:
        raise InputError("--resume continues an evaluation of --methods; --frontier runs anew")
    if frontier is None:
        from presto_tui.eval.resume import eval_settings

        settings = eval_settings(source=tasks, items=items, methods=method_list, base=base, chains=per_pair,
                                 vote=vote, grader=grader, code_timeout=code_timeout, code_memory=code_memory,
                                 classifier=None if classifier is None else str(classifier), backend=name,
                                 engine_opts=engine_opts,
                                 selection=kept.to_dict() if per_pair > 1 else None)
    if resume is not None:
        log, resumed, path, out_path = _resumed(resume, settings, flags, output)
    else:
        path = o.trace_path(flags, "eval")
        out_path = output_path(output or (path or default_trace_path("eval")).with_suffix(".json"),
                               "results", overwrite=output is not None)
        resumed = None
    limits = CodeLimits(timeout_s=code_timeout, memory_mib=code_memory)
    # what every method shares (each method's own parameters are in its row)
    builtin = tasks == BUILTIN or tasks.startswith(BUILTIN + ":")
    read_as = {k: v for k, v in (("preset", preset), ("fields", fields), ("prompt_template", prompt_template)) if v}
    meta = {"tasks": {"source": tasks, "items": len(items), **({"task_seed": task_seed} if builtin else {}),
                      **read_as},
            "shared_params": base.to_dict(), "concurrency": concurrency, "workers": workers,
            "chains": per_pair, "vote": vote, **({"diagnostics_draws": kept.to_dict()} if per_pair > 1 else {})}
    if frontier is not None:
        from presto_tui.cli.frontier import run_frontier

        return run_frontier(spec=frontier, seeds=frontier_seeds, axis=frontier_axis or "time", base=base, items=items,
                            task_meta=meta["tasks"],
                            clf=clf, name=name, engine_opts=engine_opts, path=path, out_path=out_path,
                            figures=figures, json_out=json_out, limits=limits, progress_cls=_progress, finish=_finish,
                            budget_given=o.budget_given(flags))
    if resume is None:
        from presto_tui.eval.resume import RunLog, log_path_of

        log = RunLog.create(log_path_of(out_path), "eval", settings, trace=path, output=out_path)
    try:
        ev, writer = _evaluate(flags, name, engine_opts, concurrency, path, base, items, method_list, clf, limits,
                               per_pair, vote, log, resumed, meta)
    finally:
        log.close()
    kind = BackendName.of(meta["backend"])
    meta.update(time_unit=kind.time_unit, virtual_clock=kind.virtual_clock)
    _report(ev, pairs, meta, out_path, figures, json_out, writer)
    if ev.failure is not None or ev.interrupted:
        print(f"presto-tui: continue this run with --resume {visible(str(log.path), keep_newlines=False)}",
              file=o.term())
    if ev.failure is not None:  # reported in one line, after the results of what finished were written
        raise ev.failure
    if ev.interrupted:
        raise KeyboardInterrupt


def _resumed(given: Path, settings: dict, flags: dict, output: Path | None):
    """The run log of the run --resume continues, its finished sessions, and its trace and results paths."""
    from presto_tui.eval.resume import reopen
    from presto_tui.eval.runner import Resumed

    log, records, path, out_path = reopen(given, "eval", settings, trace=flags.get("trace"),
                                          no_trace=bool(flags.get("no_trace")), output=output)
    return log, Resumed(records, log.shown), path, out_path


def _evaluate(flags, name, engine_opts, concurrency, path, base, items, method_list, clf, limits, per_pair, vote,
              log, resumed, meta):
    """Every session the run log does not hold, on the engine or the Ray workers; (evaluation, trace)."""
    from presto_tui.logs.writer import append_trace

    done = resumed.records if resumed is not None else None
    labels = [m.label for m in method_list]

    def trace_of(engine):
        if path is None or resumed is None:
            return open_trace(path, "eval", engine, base)
        writer, earlier = append_trace(path, "eval", engine, base, {str(r.get("session_id")) for r in resumed.records})
        resumed.trace = earlier.sessions  # what ended there and not in the run log is recovered, not run again
        return writer

    cluster = o.start_cluster(flags, name, engine_opts, concurrency)
    if cluster is not None:
        from presto_tui.cli.run import _Remote
        from presto_tui.eval.runner import run_cluster

        with cluster:
            remote = _Remote(cluster)
            writer = trace_of(remote)
            with _progress(len(items) * len(method_list), methods=labels, done=done) as progress:
                ev = _finish(writer, lambda: run_cluster(
                    cluster, items, method_list, classifier=clf, trace=writer, limits=limits,
                    on_end=progress.ended, on_lost=progress.lost, log=log, resumed=resumed))
            meta.update(backend=remote.name, model=remote.model, engine=remote.info)
    else:
        from presto_tui.eval.runner import run_local

        engine = o.start_engine(name, engine_opts)
        writer = trace_of(engine)
        with _progress(len(items) * len(method_list) * per_pair, methods=labels, done=done) as progress:
            ev = _finish(writer, lambda: run_local(
                engine, items, method_list, concurrency=concurrency, classifier=clf, trace=writer, limits=limits,
                on_end=progress.ended, chains=per_pair, vote=vote, log=log, resumed=resumed))
        meta.update(backend=engine.name, model=engine.model, engine=dict(engine.info))
    return ev, writer


def _pairs(specs: list[str], labels: list[str]) -> list[tuple[str, str]]:
    out = []
    for spec in specs:
        parts = [p.strip().lower() for p in spec.split(",")]
        if len(parts) != 2 or not all(parts):
            raise InputError(f"--tost takes two methods as A,B, got {spec!r}")
        for p in parts:
            if p not in labels:
                raise InputError(f"--tost: {p!r} is not among --methods ({', '.join(labels)})")
        if parts[0] == parts[1]:
            raise InputError(f"--tost: {spec!r} pairs a method with itself")
        out.append((parts[0], parts[1]))
    return out


def _finish(writer, run):
    """Run the evaluation; the trace is closed and named whatever happens."""
    try:
        return run()
    finally:
        if writer is not None:
            writer.close()
            for gap in writer.gaps:
                print(f"presto-tui: warning: {visible(str(writer.path), keep_newlines=False)}: "
                      f"{visible(gap, keep_newlines=False)}", file=o.term())


def _report(ev, named_pairs, meta, out_path: Path, figures: str, json_out: bool, writer) -> None:
    from presto_tui.eval.figures import save_figures, terminal_figures
    from presto_tui.eval.report import default_pairs, render, results

    labels = [m.label for m in ev.methods]
    pairs = default_pairs(ev)
    pairs += [p for p in ((labels.index(a), labels.index(b)) for a, b in named_pairs) if p not in pairs]
    res = results(ev, pairs, meta)
    make_folders(out_path.parent, "results", error=OutputError)  # before the figures, which go beside it
    saved = save_figures(res, out_path.with_suffix(""), figures)
    # beside the results: named by file, so that the folder can move
    res["figures"] = {k: Path(v).name if k in ("accuracy", "kv") and v else v for k, v in saved.items()}

    def show(console, res: dict) -> None:
        render(console, res)
        if res["figures"].get("kv_missing"):
            console.print(f"no KV-pool figure: {res['figures']['kv_missing']}")

    o.publish(res, out_path, json_out, show, terminal_figures, [p for p in (saved["accuracy"], saved["kv"]) if p],
              writer)


class _progress:
    """Sessions finished on stderr (a bar on a terminal, a line per session elsewhere), per method, with
    the accuracy so far and an ETA from the run's pace.  `methods`: the methods' labels, each running
    `total / len(methods)` sessions; `done`: the run log's records of a resumed run (done already)."""

    def __init__(self, total: int, every_s: float = 0.0, graded: bool = True, methods: list[str] | None = None,
                 done: list[dict] | None = None):
        from collections import Counter

        from presto_tui.console import SessionProgress

        self.labels = methods or []
        per: dict[str, int] = {}
        for m in self.labels:  # (a label may repeat: the frontier's points of one method count as the method)
            per[m] = per.get(m, 0) + total // len(self.labels)
        done = done or []
        self.bar = SessionProgress(total, "eval", every_s=every_s, per=per or None,
                                   done=dict(Counter(str(r.get("method")) for r in done)))
        grades = [r["grade"] for r in done if isinstance(r.get("grade"), dict)]
        self.right, self.graded = sum(bool(g.get("correct")) for g in grades), len(grades)
        self.show_right = graded  # False: the answers' grades mean nothing here (the frontier's distance)
        self.t0 = time.perf_counter()

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        self.bar.__exit__(*exc)

    def ended(self, outcome) -> None:
        if outcome.grade is not None:
            self.graded += 1
            self.right += outcome.grade.correct
        self.bar.doing(f"{self.right}/{self.graded} right so far" if self.show_right else "")
        self.bar.advance(self.labels[outcome.method] if outcome.method < len(self.labels) else None)

    def lost(self, event) -> None:
        print(f"presto-tui: worker {event.worker} died ({visible(event.reason, keep_newlines=False)}); "
              f"{len(event.prompts)} unfinished prompt(s) run again on the others", file=o.term())
