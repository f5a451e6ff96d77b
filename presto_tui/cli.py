"""The `presto-tui` command line.

Machine-readable output goes to stdout, progress and errors to stderr.  Heavy
modules are imported inside commands so that `presto-tui --help` is instant.
Bad input ends with one line `presto-tui: error: ...` and exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from presto_tui import __version__

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    help="Run, watch and replay exact PreSTO power sampling of LLMs.\n\n"
    "PreSTO prefetches future Metropolis-Hastings proposals of PowerMH in one batched "
    "model call and walks them with the unchanged MH rule, so the chain keeps its law "
    "while needing several times fewer sequential model calls.",
)

EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """One line on stderr naming what is wrong, then exit non-zero."""
    print(f"presto-tui: error: {message}", file=sys.stderr)
    raise typer.Exit(code)


# Options shared by the commands that start an engine (run, bench, chat).
BACKEND_OPT = typer.Option(
    None, "--backend", envvar="PRESTO_TUI_BACKEND", help="Engine: vllm (default where installed), transformers (exact float32 "
    "reference), synthetic (tiny deterministic model for tests and demos).")
MODEL_OPT = typer.Option(
    None, "--model", help="Model: smollm2-135m (the embedded default), a local Hugging Face folder, "
    "or a .gguf file.")
CHAT_OPT = typer.Option(True, "--chat-template/--no-chat-template",
                        help="Wrap prompts in the model's chat template.")
DTYPE_OPT = typer.Option(None, "--dtype", help="Engine dtype [default: float32 on CPU, the model's on GPU].")
MAXLEN_OPT = typer.Option(None, "--max-model-len", help="vLLM: context length to reserve.")
GPUMEM_OPT = typer.Option(None, "--gpu-memory-utilization", help="vLLM on GPU: memory fraction.")
TP_OPT = typer.Option(1, "--tensor-parallel-size", help="vLLM: GPUs to shard the model over.")
EAGER_OPT = typer.Option(None, "--enforce-eager/--no-enforce-eager",
                         help="vLLM: skip graph capture [default: eager on CPU].")
THREADS_OPT = typer.Option(None, "--threads", help="CPU threads for the engine.")
KV_OPT = typer.Option(None, "--kv-cache-gib", help="vLLM on CPU: KV-cache size in GiB [default: 1].")
CLASSIFIER_OPT = typer.Option(
    None, "--classifier", help="JSON classifier for --prefetch predictive (from presto-tui fit-classifier).")
SAMPLER_OPT = typer.Option(
    "powermh", "--sampler", help="The MH chain: powermh (uniform cut), entropycut (cuts where p0's "
    "entropy jumps) or multitry (multiple-try Metropolis over 4 candidate suffixes).")
BETA_OPT = typer.Option(4.0, "--beta", help="EntropyCut: exponent of the entropy-jump cut law.")
TRIES_OPT = typer.Option(4, "--tries", help="MultiTryMH: candidates per transition.")
TRACE_OPT = typer.Option(None, "--trace", help="Write the session trace here [default: sessions/<time>-<command>.jsonl].")
NO_TRACE_OPT = typer.Option(False, "--no-trace", help="Do not write a trace.")


def engine_options(model, chat_template, dtype, max_model_len, gpu_memory_utilization,
                   tensor_parallel_size, enforce_eager, threads, kv_cache_gib):
    """The engine flags shared by run, bench and chat, as EngineOptions."""
    from presto_tui.runtime.engines import EngineOptions

    return EngineOptions(model=model, chat_template=chat_template, dtype=dtype, max_model_len=max_model_len,
                         gpu_memory_utilization=gpu_memory_utilization,
                         tensor_parallel_size=tensor_parallel_size, enforce_eager=enforce_eager,
                         threads=threads, kv_cache_gib=kv_cache_gib)


def start_engine(backend: Optional[str], options):
    """Start a backend with a spinner on stderr, or fail with one line."""
    from rich.console import Console

    from presto_tui.runtime.engines import BackendError, default_backend, make_backend

    name = backend or default_backend()
    what = "the synthetic model" if name == "synthetic" else (options.model or "the embedded SmolLM2-135M")
    try:
        with Console(stderr=True).status(f"starting {name} on {what}..."):
            return make_backend(name, options)
    except BackendError as e:
        fail(str(e), 1)


def load_classifier(path: Optional[Path]):
    if path is None:
        return None
    from presto_tui.runtime.classifier import CertaintyClassifier

    try:
        return CertaintyClassifier.load(path)
    except ValueError as e:
        fail(str(e))


def _version(value: bool) -> None:
    if value:
        print(f"presto-tui {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    pass


def read_prompts(prompt: Optional[str], prompts_file: Optional[Path]) -> list[str]:
    """Prompts from the argument and/or a file with one prompt per line ('#' comments)."""
    prompts = [prompt] if prompt else []
    if prompts_file is not None:
        try:
            lines = prompts_file.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            fail(f"{prompts_file}: cannot read prompts file ({e.strerror})")
        except UnicodeDecodeError:
            fail(f"{prompts_file}: prompts file is not UTF-8 text")
        prompts += [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        if not prompts:
            fail(f"{prompts_file}: no prompts in file (one per line, '#' starts a comment)")
    if not prompts:
        fail("give a prompt, e.g. presto-tui run \"What is 7 * 8?\", or --prompts-file FILE")
    return prompts


def open_trace(path: Optional[Path], command: str, engine, params):
    from presto_tui.logs.writer import TraceWriter, default_trace_path

    path = path or default_trace_path(command)
    try:
        return TraceWriter(path, command=command, backend=engine.name, model=engine.model,
                           params=params.to_dict(), pieces=engine.token_pieces,
                           engine=dict(getattr(engine, "info", {}) or {}))
    except FileExistsError:
        fail(f"{path}: trace file exists already; choose another --trace path")
    except OSError as e:
        fail(f"{path}: cannot write trace ({e.strerror})")


def load_traces(paths: list[Path]):
    """Read traces or fail with the reader's `file:line: what` message."""
    from presto_tui.logs.reader import TraceError, read_trace

    traces = []
    for p in paths:
        try:
            t = read_trace(p)
        except TraceError as e:
            fail(str(e))
        for w in t.warnings:
            print(f"presto-tui: warning: {w}", file=sys.stderr)
        traces.append(t)
    return traces




@app.command()
def chat(
    sampler: str = SAMPLER_OPT,
    beta: float = BETA_OPT,
    tries: int = TRIES_OPT,
    prefetch: str = typer.Option("spine", help="none, bfs, predictive or spine."),
    inputs: str = typer.Option("decision", help="decision or node random inputs."),
    alpha: float = typer.Option(4.0, help="Power exponent."),
    max_new_tokens: int = typer.Option(96, "--max-new-tokens", "-n", help="Response length n."),
    steps: int = typer.Option(24, "--steps", "-K", help="MH transitions per block."),
    budget: int = typer.Option(8, "--budget", "-N", help="Prefetch budget."),
    seed: int = typer.Option(0, help="Session seed."),
    backend: Optional[str] = BACKEND_OPT,
    model: Optional[str] = MODEL_OPT,
    chat_template: bool = CHAT_OPT,
    dtype: Optional[str] = DTYPE_OPT,
    max_model_len: Optional[int] = MAXLEN_OPT,
    gpu_memory_utilization: Optional[float] = GPUMEM_OPT,
    tensor_parallel_size: int = TP_OPT,
    enforce_eager: Optional[bool] = EAGER_OPT,
    threads: Optional[int] = THREADS_OPT,
    kv_cache_gib: Optional[float] = KV_OPT,
    classifier: Optional[Path] = CLASSIFIER_OPT,
    trace: Optional[Path] = TRACE_OPT,
    no_trace: bool = NO_TRACE_OPT,
) -> None:
    """Chat with a model and watch every PreSTO round as a live tree.

    Type a prompt; each prefetch round appears as a binary tree (accept child above,
    reject child below), coloured and marked by epsilon class, with the realized path
    highlighted. Select nodes with the arrow keys or the mouse to inspect their MH
    ratio and the text they propose. ? shows every key. Starts on vLLM with the
    embedded SmolLM2-135M unless --backend/--model say otherwise.

      presto-tui chat

      presto-tui chat --backend synthetic        # no model needed
    """
    from presto_tui.runtime.params import ParamError, SamplerParams

    try:
        params = SamplerParams(sampler=sampler, beta=beta, tries=tries, prefetch=prefetch, inputs=inputs,
                               alpha=alpha, max_new_tokens=max_new_tokens, steps=steps, budget=budget,
                               seed=seed).validate()
    except ParamError as e:
        fail(str(e))
    clf = load_classifier(classifier)
    from dataclasses import replace

    from presto_tui.runtime.engines import default_backend, make_backend

    name = backend or default_backend()
    options = engine_options(model, chat_template, dtype, max_model_len, gpu_memory_utilization,
                             tensor_parallel_size, enforce_eager, threads, kv_cache_gib)

    def factory(model_name):  # the settings screen can change the model between prompts
        return make_backend(name, replace(options, model=model_name))

    def opener(engine, p):
        return None if no_trace else open_trace(trace, "chat", engine, p)

    from presto_tui.views.app import PrestoApp

    app_ = PrestoApp(mode="chat", pieces=lambda ids: [f"<{i}>" for i in ids], params=params,
                     backend_factory=factory, model=model, classifier=clf, trace_opener=opener,
                     title=f"{name} on {model or ('synthetic' if name == 'synthetic' else 'smollm2-135m')}")
    app_.run()
    if app_.trace is not None:
        print(f"presto-tui: trace written to {app_.trace.path}", file=sys.stderr)


@app.command()
def replay(
    trace: Path = typer.Argument(..., help="A trace written by presto-tui run, chat or bench."),
    play: bool = typer.Option(False, "--play", help="Start playing at once."),
) -> None:
    """Replay a recorded session: the same trees, inspector and stats, no model needed.

    A timeline runs over every round; space plays and pauses, < and > change the speed,
    [ and ] step, home and end jump. ? shows every key.

      presto-tui replay sessions/example.jsonl
    """
    traces = load_traces([trace])
    if not any(s.rounds for s in traces[0].sessions):
        fail(f"{trace}: the trace holds no rounds to replay")
    from presto_tui.views.app import replay_app

    replay_app(traces[0], autoplay=play).run()


@app.command()
def run(
    prompt: Optional[str] = typer.Argument(None, help="The prompt to sample a response for."),
    prompts_file: Optional[Path] = typer.Option(
        None, "--prompts-file", help="Text file with one prompt per line ('#' starts a comment)."),
    sampler: str = SAMPLER_OPT,
    beta: float = BETA_OPT,
    tries: int = TRIES_OPT,
    prefetch: str = typer.Option(
        "spine", help="none = sequential PowerMH (one call per transition); bfs, predictive, "
        "spine = PreSTO with that traversal rule."),
    inputs: str = typer.Option(
        "decision", help="decision = random inputs keyed by decision (PreSTO reproduces "
        "sequential PowerMH token for token); node = each tree node draws its own, as in the paper."),
    alpha: float = typer.Option(4.0, help="Power exponent: the target is p0^alpha."),
    tau: Optional[float] = typer.Option(None, help="Proposal temperature [default: 1/alpha]."),
    max_new_tokens: Optional[int] = typer.Option(
        None, "--max-new-tokens", "-n", help="Response length n (fixed; EOS does not stop it) [default: 96]."),
    block_size: Optional[int] = typer.Option(
        None, "--block-size", "-B", help="Block size B, must divide n [default: n, one block]."),
    steps: Optional[int] = typer.Option(None, "--steps", "-K", help="MH transitions per block K [default: 24]."),
    budget: Optional[int] = typer.Option(
        None, "--budget", "-N", help="Prefetch budget N_pf: distinct requests per model call [default: 8]."),
    epsilon: float = typer.Option(0.01, help="Epsilon of epsilon-certainty (A >= 1-eps or A <= eps)."),
    seed: int = typer.Option(0, help="Session seed; the same seed gives the same chain."),
    backend: Optional[str] = BACKEND_OPT,
    model: Optional[str] = MODEL_OPT,
    chat_template: bool = CHAT_OPT,
    dtype: Optional[str] = DTYPE_OPT,
    max_model_len: Optional[int] = MAXLEN_OPT,
    gpu_memory_utilization: Optional[float] = GPUMEM_OPT,
    tensor_parallel_size: int = TP_OPT,
    enforce_eager: Optional[bool] = EAGER_OPT,
    threads: Optional[int] = THREADS_OPT,
    kv_cache_gib: Optional[float] = KV_OPT,
    classifier: Optional[Path] = CLASSIFIER_OPT,
    paper_settings: bool = typer.Option(
        False, "--paper-settings",
        help="The paper's settings: n=1024, one block, K=100, N_pf=20 (explicit flags still win)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON summary per prompt instead of text."),
    trace: Optional[Path] = TRACE_OPT,
    no_trace: bool = NO_TRACE_OPT,
) -> None:
    """Sample responses headless and report how PreSTO did.

    Shows a progress bar on stderr (one tick per MH transition) and prints the final
    text with a summary: model calls, transitions per call, time per call, acceptance
    rate and epsilon-certain share.

    Examples:

      presto-tui run "What is 7 * 8?"                  # vLLM on the embedded SmolLM2-135M

      presto-tui run "Name a prime" --prefetch none    # sequential PowerMH

      presto-tui run --prompts-file prompts.txt --json --prefetch bfs -N 20

      presto-tui run "the cat" --backend synthetic     # no model needed
    """
    from presto_tui.runtime.params import PAPER_SETTINGS, ParamError, SamplerParams

    base = SamplerParams()
    sizes = dict(PAPER_SETTINGS) if paper_settings else {}
    given = dict(max_new_tokens=max_new_tokens, block_size=block_size, steps=steps, budget=budget)
    sizes.update({k: v for k, v in given.items() if v is not None})
    if paper_settings and max_new_tokens is not None and block_size is None:
        sizes["block_size"] = None  # one block of the n the user chose
    try:
        params = base.with_(sampler=sampler, prefetch=prefetch, inputs=inputs, alpha=alpha, tau=tau,
                            epsilon=epsilon, seed=seed, beta=beta, tries=tries, **sizes).validate()
    except ParamError as e:
        fail(str(e))
    clf = load_classifier(classifier)
    prompts = read_prompts(prompt, prompts_file)
    engine = start_engine(backend, engine_options(model, chat_template, dtype, max_model_len,
                                                  gpu_memory_utilization, tensor_parallel_size,
                                                  enforce_eager, threads, kv_cache_gib))

    from presto_tui.headless import run_prompts

    writer = None if no_trace else open_trace(trace, "run", engine, params)
    code = run_prompts(engine, params, prompts, classifier=clf, json_out=json_out, trace=writer)
    raise typer.Exit(code)


@app.command()
def bench(
    prompts_file: Optional[Path] = typer.Option(
        None, "--prompts-file", help="One prompt per line [default: the shipped math, code and general set]."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use only the first N prompts."),
    budgets: str = typer.Option("8,12,20", help="Comma-separated prefetch budgets to compare."),
    rules: str = typer.Option("bfs,predictive,spine", help="Comma-separated traversal rules to compare."),
    samplers: str = typer.Option("powermh", help="Comma-separated samplers, each against its own "
                                 "sequential run: powermh, entropycut, multitry."),
    beta: float = BETA_OPT,
    tries: int = TRIES_OPT,
    seeds: int = typer.Option(1, help="Seeds per prompt (0..seeds-1)."),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", "-n", help="Response length n."),
    steps: int = typer.Option(16, "--steps", "-K", help="MH transitions per prompt (one block)."),
    alpha: float = typer.Option(4.0, help="Power exponent."),
    backend: Optional[str] = BACKEND_OPT,
    model: Optional[str] = MODEL_OPT,
    chat_template: bool = CHAT_OPT,
    dtype: Optional[str] = DTYPE_OPT,
    max_model_len: Optional[int] = MAXLEN_OPT,
    gpu_memory_utilization: Optional[float] = GPUMEM_OPT,
    tensor_parallel_size: int = TP_OPT,
    enforce_eager: Optional[bool] = EAGER_OPT,
    threads: Optional[int] = THREADS_OPT,
    kv_cache_gib: Optional[float] = KV_OPT,
    classifier: Optional[Path] = CLASSIFIER_OPT,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the results JSON here "
                                          "[default: sessions/<time>-bench.json]."),
    trace: Optional[Path] = TRACE_OPT,
    no_trace: bool = NO_TRACE_OPT,
    json_out: bool = typer.Option(False, "--json", help="Print the results JSON on stdout instead of tables."),
) -> None:
    """Each sampler sequentially against PreSTO at every rule and budget, in one run.

    Same prompts, seeds and engine for every sampler, interleaved prompt by prompt so
    that machine noise hits all alike. Reports model calls, transitions per call, time
    per call, cumulative call time, speedup over sequential PowerMH (paper eq. 20),
    tokens generated and requests issued against requests used; plus the engine's time
    for a batch of 20 suffixes against one suffix, and the prefix-cache hit rate.

      presto-tui bench                       # embedded model, shipped prompts

      presto-tui bench --limit 2 -K 8 --budgets 8,20 --rules spine

      presto-tui bench --samplers powermh,entropycut,multitry --budgets 8,20
    """
    from presto_tui.runtime.params import ParamError, SamplerParams

    try:
        budget_list = [int(b) for b in budgets.split(",") if b.strip()]
    except ValueError:
        fail(f"--budgets must be comma-separated integers, got {budgets!r}")
    rule_list = [r.strip() for r in rules.split(",") if r.strip()]
    sampler_list = [x.strip() for x in samplers.split(",") if x.strip()]
    try:
        base = SamplerParams(alpha=alpha, max_new_tokens=max_new_tokens, steps=steps, beta=beta,
                             tries=tries).validate()
        for r in rule_list:
            if r == "none":
                fail("--rules lists PreSTO rules; each sampler's sequential run is always the reference")
            for smp in sampler_list:
                for b in budget_list:
                    base.with_(sampler=smp, prefetch=r, budget=b).validate()
    except ParamError as e:
        fail(str(e))
    if not budget_list or not rule_list or not sampler_list or seeds < 1:
        fail("bench needs at least one sampler, budget, rule and seed")
    if prompts_file is None:
        from importlib.resources import files

        prompts_file = Path(str(files("presto_tui") / "data" / "prompts.txt"))
    prompts = read_prompts(None, prompts_file)[: limit or None]
    clf = load_classifier(classifier)
    engine = start_engine(backend, engine_options(model, chat_template, dtype, max_model_len,
                                                  gpu_memory_utilization, tensor_parallel_size,
                                                  enforce_eager, threads, kv_cache_gib))
    from presto_tui.bench import run_bench

    writer = None if no_trace else open_trace(trace, "bench", engine, base)
    code = run_bench(engine, base, prompts, rules=rule_list, budgets=budget_list, samplers=sampler_list, seeds=seeds,
                     classifier=clf, trace=writer, output=output, json_out=json_out)
    raise typer.Exit(code)


@app.command()
def stats(
    traces: list[Path] = typer.Argument(..., help="Trace files (JSONL) to summarise."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON: per-session rows and pooled totals."),
) -> None:
    """Per-session and pooled statistics of recorded traces; no model needed.

    Model calls, transitions per call, time per call, acceptance rate, epsilon-class
    shares of the scored decisions, and requests issued against requests the walk used.

      presto-tui stats sessions/example.jsonl
    """
    from rich.console import Console

    from presto_tui.logs.stats import pooled, render, session_rows

    loaded = load_traces(traces)
    rows = session_rows(loaded)
    pool = pooled(rows)
    if json_out:
        import orjson

        sys.stdout.write(orjson.dumps({"sessions": rows, "pooled": pool}).decode() + "\n")
    else:
        render(Console(highlight=False), rows, pool)


@app.command("fit-classifier")
def fit_classifier(
    traces: list[Path] = typer.Argument(..., help="Trace files whose scored decisions are the examples."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the classifier JSON."),
    features: str = typer.Option(
        "cut_fraction", help="Comma-separated features: cut_fraction (the paper's choice), "
        "cut_index_fraction, gap_fraction, depth, accepts."),
) -> None:
    """Fit the predictive rule's epsilon-class model (3-class logistic regression).

    Reports prompt-grouped 5-fold cross-validated accuracy and log loss against the
    constant baseline (paper appendix E.7). Use the result with
    `presto-tui run --prefetch predictive --classifier model.json`.
    """
    from presto_tui.runtime.classifier import FEATURES

    names = tuple(f.strip() for f in features.split(",") if f.strip())
    bad = [f for f in names if f not in FEATURES]
    if bad or not names:
        fail(f"unknown feature {bad[0] if bad else '(none given)'!r}; choose from {', '.join(FEATURES)}")
    try:
        from presto_tui.logs.fit import FitError, fit
    except ImportError:
        fail("fit-classifier needs scikit-learn: pip install 'presto-tui[fit]'", 1)
    loaded = load_traces(traces)
    try:
        clf = fit(loaded, names)
    except FitError as e:
        fail(str(e))
    import json

    try:
        output.write_text(json.dumps(clf.to_json(), indent=2) + "\n")
    except OSError as e:
        fail(f"{output}: cannot write ({e.strerror})")
    m = clf.meta
    cv = m["cross_validation"]
    print(f"{m['examples']} scored decisions from {m['sessions']} sessions; classes {m['class_counts']}")
    if cv:
        print(f"held-out accuracy {cv['accuracy']:.3f} (baseline {cv['baseline_accuracy']:.3f}), "
              f"log loss {cv['log_loss']:.3f} (baseline {cv['baseline_log_loss']:.3f}), "
              f"{cv['folds']}-fold grouped by prompt")
    else:
        print("cross-validation skipped: it needs traces of at least two sessions")
    print(f"wrote {output}")


def main() -> None:
    app()
