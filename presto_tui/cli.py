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
    code = run_prompts(engine, params, prompts, classifier=clf, json_out=json_out)
    raise typer.Exit(code)


def main() -> None:
    app()
