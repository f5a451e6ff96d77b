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


@app.command()
def run(
    prompt: Optional[str] = typer.Argument(None, help="The prompt to sample a response for."),
    prompts_file: Optional[Path] = typer.Option(
        None, "--prompts-file", help="Text file with one prompt per line ('#' starts a comment)."),
    sampler: str = typer.Option("powermh", help="The MH chain: powermh."),
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
    backend: str = typer.Option("synthetic", help="Engine: synthetic (a tiny deterministic model)."),
    classifier: Optional[Path] = typer.Option(
        None, help="JSON classifier for --prefetch predictive (from presto-tui fit-classifier)."),
    paper_settings: bool = typer.Option(
        False, "--paper-settings",
        help="The paper's settings: n=1024, one block, K=100, N_pf=20 (explicit flags still win)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON summary per prompt instead of text."),
    trace: Optional[Path] = typer.Option(
        None, "--trace", help="Write the session trace here [default: sessions/<time>-run.jsonl]."),
    no_trace: bool = typer.Option(False, "--no-trace", help="Do not write a trace."),
) -> None:
    """Sample responses headless and report how PreSTO did.

    Shows a progress bar on stderr (one tick per MH transition) and prints the final
    text with a summary: model calls, transitions per call, time per call, acceptance
    rate and epsilon-certain share.

    Examples:

      presto-tui run "What is 7 * 8?"

      presto-tui run "Name a prime" --prefetch none            # sequential PowerMH

      presto-tui run --prompts-file prompts.txt --json --prefetch bfs -N 20
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
                            epsilon=epsilon, seed=seed, **sizes).validate()
    except ParamError as e:
        fail(str(e))
    clf = None
    if classifier is not None:
        from presto_tui.runtime.classifier import CertaintyClassifier

        try:
            clf = CertaintyClassifier.load(classifier)
        except ValueError as e:
            fail(str(e))
    prompts = read_prompts(prompt, prompts_file)

    from presto_tui.headless import run_prompts
    from presto_tui.runtime.engines import BackendError, make_backend

    try:
        engine = make_backend(backend)
    except BackendError as e:
        fail(str(e), 1)
    writer = None if no_trace else open_trace(trace, "run", engine, params)
    code = run_prompts(engine, params, prompts, classifier=clf, json_out=json_out, trace=writer)
    raise typer.Exit(code)


def open_trace(path: Optional[Path], command: str, engine, params):
    from presto_tui.logs.writer import TraceWriter, default_trace_path

    path = path or default_trace_path(command)
    try:
        return TraceWriter(path, command=command, backend=engine.name, model=engine.model,
                           params=params.to_dict(), pieces=engine.token_pieces)
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
