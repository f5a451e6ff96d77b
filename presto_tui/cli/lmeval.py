"""`presto-tui lm-eval`: lm-evaluation-harness tasks answered by presto-tui's methods."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Annotated

import typer

from presto_tui import console
from presto_tui.api.params import BackendName, Group, Limit, PrefetchRule, load_classifier, methods_help
from presto_tui.cli import options as o
from presto_tui.cli.params import takes
from presto_tui.cli.root import command
from presto_tui.errors import InputError, PrestoError
from presto_tui.files import output_path
from presto_tui.logs.writer import open_trace
from presto_tui.safetext import visible

DEFAULT_METHODS = "lowtemp,powermh+stream"
FEWSHOT = Limit(0, 10_000, integer=True)
NEED = "presto-tui lm-eval needs lm-eval (the lm-evaluation-harness): pip install -e '.[lmeval]'"


@command("lm-eval")
@o.handled
@takes(Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE, Group.METHOD, without=("sampler", "prefetch"),
       defaults={"max_new_tokens": "each request's max_gen_toks, as its task sets it; 96 where it sets none"},
       help={"seed": "The methods' seed: each request's session runs on a seed derived from it and the request's "
             "context, every method of a request on the same one"})
def lm_eval_(
    ctx: typer.Context,
    tasks: Annotated[str, typer.Option(
        "--tasks", "-t", metavar="TASK,...", show_default=False,
        help="lm-eval tasks (names of tasks, groups or tags, or task YAML files), comma-separated; each must "
        "ask for generations (output_type generate_until).")],
    methods: Annotated[str, typer.Option(
        "--methods", "-m", metavar="METHOD,...",
        help=methods_help("Comma-separated methods, each run over every task") + ". Every other parameter comes "
        "from the flags below.")] = DEFAULT_METHODS,
    include_path: Annotated[Path | None, typer.Option(
        "--include-path", metavar="DIR", show_default=False,
        help="A folder of task YAML files (lm-eval's --include_path): a local JSON or JSONL dataset needs "
        "nothing downloaded.")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", show_default=False,
        help=f"Only the first N documents of each task, {o.CLI_LIMITS['limit'].where} [default: all].")] = None,
    num_fewshot: Annotated[int | None, typer.Option(
        "--num-fewshot", show_default=False,
        help=f"Few-shot examples in each context, {FEWSHOT.where} [default: the task's own].")] = None,
    classifier: o.Classifier = None, chains: o.Chains = None,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", "-C", show_default=False,
        help=f"Sessions at once on the engine, sharing its batch, {o.CLI_LIMITS['concurrency'].where} "
        "[default: enough to keep about 64 requests live].")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", rich_help_panel=o.OUTPUT, show_default=False,
        help="Also write lm-eval's results for every method, with every document's answer, to this JSON "
        "file.")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", rich_help_panel=o.OUTPUT, help="Print that JSON on stdout instead of the tables.")] = False,
    trace: o.TracePath = None, no_trace: o.NoTrace = False,
) -> None:
    """Run lm-evaluation-harness tasks with presto-tui's methods answering.

    For each method, lm-eval builds every request of the tasks (its prompts, few-shot
    examples, stop strings) and presto-tui answers them all as concurrent sessions on
    one engine; lm-eval then filters and scores the answers and its own table is
    printed. A request's max_gen_toks is the response length n (the chain generates
    n tokens; -n sets one n for all), and its stop strings cut the answer (after EOS
    has). Each request runs with its own seed (from --seed and its context), the same
    for every method. Every session goes to one trace, progress to stderr.

    Only generation tasks can run: a task that asks for log-likelihoods
    (loglikelihood, multiple_choice) scores p0 itself, which power sampling does not
    change; lm-eval's own hf or vllm model answers it.

    Contexts go through the model's chat template unless --no-chat-template, as
    presto-tui run sends a prompt.

    Examples (vLLM on the embedded SmolLM2-135M unless --backend says otherwise):

      presto-tui lm-eval --tasks arith --include-path tasks/ --limit 20 -K 8

      presto-tui lm-eval --tasks arith --include-path tasks/ \\
        --methods powermh,powermh+stream:16

      presto-tui lm-eval --tasks gsm8k --methods lowtemp,bon:8 --limit 50

    From Python, importing presto_tui.lmeval.model registers the model "presto-tui"
    with lm-eval; its model_args are these flags with underscores, one method each:

      import lm_eval, presto_tui.lmeval.model

      lm_eval.simple_evaluate(model="presto-tui", tasks=["arith"],
          model_args="method=powermh+stream,steps=8,backend=synthetic",
          task_manager=lm_eval.tasks.TaskManager(include_path="tasks/"))

    lm-eval's own command line, with the model registered:

      python -m presto_tui.lmeval run --model presto-tui --tasks arith \\
        --include_path tasks/
    """
    flags = ctx.params
    if importlib.util.find_spec("lm_eval") is None:
        raise InputError(NEED)
    from presto_tui.api.params import parse_methods
    from presto_tui.lmeval.tasks import check_tasks, task_manager, task_names

    if concurrency is not None:
        o.CLI_LIMITS["concurrency"].check("--concurrency", concurrency)
    if limit is not None:
        o.CLI_LIMITS["limit"].check("--limit", limit)
    if num_fewshot is not None:
        FEWSHOT.check("--num-fewshot", num_fewshot)
    # every method sets its own sampler and rule; the base is valid with any --inputs
    base = o.sampler_params(flags, preset={"prefetch": PrefetchRule.NONE.value}, one_sampler=False)
    # -n given: one n for every request; else each request's max_gen_toks
    max_new_tokens = base.max_new_tokens if flags.get("max_new_tokens") is not None else None
    method_list = parse_methods(methods, base, budget_given=o.budget_given(flags))
    clf = load_classifier(classifier)
    name, engine_opts = o.engine_options(flags)
    path = o.trace_path(flags, "lm-eval")
    if output is not None:
        output_path(output, "results", overwrite=True)
    names = task_names(tasks)
    quiet_datasets()
    o.divert_engine_output()  # lm-eval's own notices (and git's, which it runs) go to the engine log too
    try:
        manager = task_manager(names, include_path)
        check_tasks(manager, names, [m.params for m in method_list], max_new_tokens)
    except PrestoError:
        console.restore_terminal()  # a bad task is said on its own, with no engine log to look at
        raise

    engine = o.start_engine(name, engine_opts)
    writer = open_trace(path, "lm-eval", engine, method_list[0].params)
    runs = []
    try:
        for method in method_list:
            runs.append(_evaluate(engine, method, manager, names, limit=limit, num_fewshot=num_fewshot,
                                  max_new_tokens=max_new_tokens, concurrency=concurrency, classifier=clf,
                                  trace=writer, keep_samples=json_out or output is not None))
            if not json_out:
                _print_run(runs[-1])
    finally:
        if writer is not None:
            writer.close()
            if not writer.broken:
                print(f"presto-tui: trace written to {visible(str(writer.path), keep_newlines=False)}", file=o.term())
    if output is not None or json_out:
        _write_results(runs, output, json_out)


def quiet_datasets() -> None:
    """The datasets library draws a progress bar for every local file it reads; not on the terminal
    (unless --verbose)."""
    if not o.VERBOSE["on"]:
        import datasets

        datasets.disable_progress_bars()


def _evaluate(engine, method, manager, names: list[str], *, limit, num_fewshot, max_new_tokens, concurrency,
              classifier, trace, keep_samples: bool) -> dict:
    """One method over every task: lm-eval's results, and the method's sessions."""
    from lm_eval import simple_evaluate

    from presto_tui.lmeval.model import PrestoLM

    lm = PrestoLM.on_engine(engine, method.params, label=method.label, max_new_tokens=max_new_tokens,
                            concurrency=concurrency, classifier=classifier, trace=trace)
    results = simple_evaluate(model=lm, tasks=list(names), task_manager=manager, limit=limit,
                              num_fewshot=num_fewshot, log_samples=keep_samples)
    assert results is not None  # (None only on the other ranks of a distributed run)
    results.pop("pretty_env_info", None)  # the machine's whole software list, not this run's
    return {"method": method.label, "params": method.params.to_dict(), "results": results,
            "sessions": lm.summaries, "backend": engine.name}


def _print_run(run: dict) -> None:
    from lm_eval.utils import make_table


    out = o.table_console()
    s = run["sessions"]
    time_s = sum(x.wall_s for x in s)
    unit = "engine clock (virtual)" if BackendName.of(run["backend"]).virtual_clock else "s"
    line = f"{len(s)} sessions, {time_s / max(1, len(s)):.2f} {unit} per answer"
    transitions = sum(x.transitions for x in s)
    if transitions:
        accepted = sum(x.accepted for x in s)
        line += f", {transitions} MH transitions, acceptance {accepted / transitions:.2f}"
    out.print(f"\n{run['method']}: {line}", markup=False)
    sys.stdout.write(make_table(run["results"]))
    if run["results"].get("groups"):
        sys.stdout.write(make_table(run["results"], "groups"))
    sys.stdout.flush()


def _write_results(runs: list[dict], output: Path | None, json_out: bool) -> None:
    import json

    from lm_eval.utils import handle_non_serializable

    doc = {"methods": [{k: v for k, v in r.items() if k != "sessions"} for r in runs]}
    text = json.dumps(doc, default=handle_non_serializable, ensure_ascii=False)
    if output is not None:
        o.write_results(output, (text + "\n").encode("utf-8"))
        print(f"presto-tui: results written to {visible(str(output), keep_newlines=False)}", file=o.term())
    if json_out:
        sys.stdout.write(text + "\n")
