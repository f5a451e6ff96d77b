"""Options shared by the commands, declared once, and the one place that turns them into objects.

Every sampler flag defaults to None ("not given"); `sampler_params` fills in
`SamplerParams`' own defaults (or a preset such as the paper's sizes) and
validates, so `run`, `chat` and `bench` can never disagree on a default.
`engine_options` does the same for the engine flags.  Everything a person can
get wrong is checked here, before any engine starts.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from presto_tui import console
from presto_tui.api.params import LIMITS, Limit
from presto_tui.api.sessions import CHAINS
from presto_tui.console import term
from presto_tui.errors import EXIT_INTERRUPTED, InputError, OutputError, PrestoError, describe
from presto_tui.files import make_folders, readable_file
from presto_tui.logs import writer
from presto_tui.safetext import visible

if TYPE_CHECKING:
    from rich.console import Console

SAMPLER, OUTPUT = "Sampler", "Output"

# The CLI's own numbers (the parameters' ranges are the specification's: runtime/core/spec.py).
CLI_LIMITS: dict[str, Limit] = {
    "concurrency": Limit(1, 256, integer=True),
    "chains": CHAINS,
    "workers": Limit(1, 4096, integer=True),
    "seeds": Limit(1, 10_000, integer=True),
    "limit": Limit(1, float("inf"), integer=True),
    "burn_in": Limit(0, 1_000_000, integer=True),
    "thin": Limit(1, 1_000_000, integer=True),
    # serve
    "port": Limit(0, 65535, integer=True),
    "max_chains": Limit(1, 256, integer=True),
    "max_queue": Limit(0, 100_000, integer=True),
    "request_timeout": Limit(0, 86_400),
    "max_body_bytes": Limit(1024, 1 << 30, integer=True),
    "max_steps": LIMITS["steps"],
    "max_tokens": LIMITS["max_new_tokens"],
    "read_timeout": Limit(0.1, 3600),
    "max_connections": Limit(1, 1 << 20, integer=True),
    "max_event_streams": Limit(1, 1 << 20, integer=True),
    "max_request_tokens": Limit(1, 1 << 62, integer=True),
    "max_engine_requests": Limit(1, 1 << 62, integer=True),
    "max_tenant_tokens": Limit(1, 1 << 62, integer=True),
    "max_live_requests": Limit(1, 1 << 30, integer=True),
    "max_request_memory": Limit(1 << 20, 1 << 50, integer=True),
}


def limit_of(name: str) -> Limit | None:
    """The documented range of the parameter `name` (a command's argument name), if it has one."""
    return CLI_LIMITS.get(name)


# -- options every command that runs chains shares (command options, not sampler parameters) ---
Chains = Annotated[int | None, typer.Option(
    "--chains", rich_help_panel=SAMPLER, show_default=False,
    help=f"Chains per prompt M, {CLI_LIMITS['chains'].where}, run at once on one engine, each with its own seed "
    "derived from --seed (the first chain keeps it). With M >= 2: split R-hat, bulk and tail ESS and MCSE of the "
    "log-target and the log-likelihood across the chains (a warning where R-hat > 1.01 or bulk ESS < 100: "
    "K was too short), and the answer most chains agree on [default: 1].")]
PaperSettings = Annotated[bool, typer.Option(
    "--paper-settings", rich_help_panel=SAMPLER,
    help="The paper's sizes: n=1024, one block, K=100, N=20 (explicit flags still win).")]
Classifier = Annotated[Path | None, typer.Option(
    "--classifier", rich_help_panel=SAMPLER, show_default=False,
    help="JSON epsilon-class model for --prefetch predictive (from presto-tui fit-classifier).")]

# -- scale-out ----------------------------------------------------------------------
SCALE = "Scale-out (Ray)"
Workers = Annotated[int | None, typer.Option(
    "--workers", "-W", rich_help_panel=SCALE, show_default=False,
    help="Spread the prompts over W Ray workers, one engine each (one GPU each where there are GPUs; "
    "the CPU cores split between them otherwise). Needs pip install 'presto-tui[ray]'.")]
RayAddress = Annotated[str | None, typer.Option(
    "--ray-address", rich_help_panel=SCALE, show_default=False,
    help="Join this Ray cluster (host:port of its head, or auto) [default: a local Ray instance that "
    "starts and stops with the command].")]

# -- output ---------------------------------------------------------------------
TracePath = Annotated[Path | None, typer.Option(
    "--trace", rich_help_panel=OUTPUT, show_default=False,
    help="Write the session trace here [default: sessions/<time>-<command>.jsonl].")]
NoTrace = Annotated[bool, typer.Option("--no-trace", rich_help_panel=OUTPUT, help="Do not write a trace.")]
JsonOut = Annotated[bool, typer.Option("--json", rich_help_panel=OUTPUT, help="Print JSON instead of tables.")]
DIAGNOSTICS = "Diagnostics (--chains)"
BurnIn = Annotated[int, typer.Option(
    "--burn-in", metavar="B", rich_help_panel=DIAGNOSTICS,
    help=f"Drop the first B transitions of each block from the chains' diagnostics (warm-up), B "
    f"{CLI_LIMITS['burn_in'].where} and below K; the output says the choice [default: 0, none dropped].")]
Thin = Annotated[int, typer.Option(
    "--thin", metavar="T", rich_help_panel=DIAGNOSTICS,
    help=f"Keep every T-th transition after the burn-in for the chains' diagnostics, T "
    f"{CLI_LIMITS['thin'].where} [default: 1, every one].")]


def selection(burn_in: int, thin: int, steps: int | None = None, where: str | None = None):
    """--burn-in and --thin, checked (the burn-in below K where K is known: `where` says whose K, the
    command line's -K by default), as the diagnostics read them."""
    from presto_tui.api.diagnostics import Selection

    CLI_LIMITS["burn_in"].check("--burn-in", burn_in)
    CLI_LIMITS["thin"].check("--thin", thin)
    if steps is not None and burn_in >= steps:
        raise InputError(f"--burn-in must be below K ({where or f'-K {steps}'}): it drops transitions of each block, "
                         f"and K would leave none, got {burn_in}")
    return Selection(burn_in, thin)


Draws = Annotated[list[Path] | None, typer.Option(
    "--draws", metavar="PATH.csv|PATH.nc", rich_help_panel=OUTPUT, show_default=False,
    help="Write every MH chain's draws here, in one file for all prompts (give it twice for both): .csv a tidy "
    "table (prompt, group, chain, block, transition, accepted, log-target, log-likelihood, confidence, state "
    "id, kept by --burn-in/--thin), .nc the NetCDF file ArviZ writes for its DataTree (posterior, "
    "warmup_posterior, sample_stats), readable by ArviZ alone.")]


def draws_paths(paths: list[Path] | None) -> list[Path]:
    """--draws, checked before any work (format, path, what .nc needs)."""
    if not paths:
        return []
    from presto_tui.logs.draws import check_paths

    return check_paths(paths)


def write_draws(paths: list[Path], chains, selection) -> None:
    """Write the chains' draws (logs/draws.py) to every --draws path and say where."""
    if not paths:
        return
    from presto_tui.logs.draws import grouped, write

    written = write(paths, grouped(chains), selection)
    if written:
        print(f"presto-tui: draws written to {', '.join(visible(str(p), keep_newlines=False) for p in written)}",
              file=term())
    else:
        print("presto-tui: warning: no MH transitions to write (--draws): nothing written", file=term())


OnBadLines = Annotated[str, typer.Option(
    "--on-bad-lines", metavar="error|warn|skip",
    help="A trace line that cannot be read (cut short, damaged): error stops there (the default); warn and "
    "skip read the trace anyway, skipping each bad line with a warning that names it (warn: one per line, "
    "saying what is wrong; skip: one for all), and the session it broke is marked damaged, never silently "
    "shortened [default: error].")]

def sampler_params(flags: dict[str, Any], preset: dict[str, Any] | None = None, *, one_sampler: bool = True):
    """SamplerParams from a command's options (text as typed; None: not given), over `preset` (the
    command's own sizes) and the spec's defaults, on the one validation path.  `one_sampler`: the flags
    are one method's (run, chat, serve), so each given must apply to it; bench and eval share theirs among
    several methods."""
    from presto_tui.api.params import params_from

    return params_from(flags, preset, paper=bool(flags.get("paper_settings")), strict=one_sampler)


def budget_given(flags: dict[str, Any]) -> bool:
    """Whether the command's -N was chosen (given, or by --paper-settings): else each method's PreSTO rule
    runs its own default budget, as `--budget`'s help says (the method language's `budget_given`)."""
    return flags.get("budget") is not None or bool(flags.get("paper_settings"))


def chain_count(value: int | None) -> int:
    """--chains M, checked, and for M >= 2 the package its diagnostics need (before any engine starts)."""
    if value is None:
        return 1
    CLI_LIMITS["chains"].check("--chains", value)
    if value > 1:
        from presto_tui.api.diagnostics import require

        require()
    return value


def engine_options(flags: dict[str, Any]):
    """The engine the options name and its options, checked (no engine starts here)."""
    from presto_tui.api.engine import engine_options as checked

    return checked(flags)


def start_cluster(flags: dict[str, Any], name: str, options, concurrency: int):
    """The Ray workers `--workers`/`--ray-address` ask for, started with a spinner (or None)."""
    workers, address = flags.get("workers"), flags.get("ray_address")
    if workers is None and address is None:
        return None
    if workers is not None:
        CLI_LIMITS["workers"].check("--workers", workers)
    from rich.console import Console

    from presto_tui.api.sessions import Cluster, check_address, require_ray

    require_ray()  # one line if Ray is missing, before anything starts
    if address:
        check_address(address)
    divert_engine_output()
    with Console(file=term()).status(f"starting {workers or 1} Ray worker(s) with {name}..."):
        return Cluster(workers or 1, name, options, address=address, concurrency=concurrency)


def start_engine(name: str, options):
    """Start an engine with a spinner on stderr (failures raise with one line)."""
    from rich.console import Console

    from presto_tui.api.engine import start_engine as start
    from presto_tui.api.params import BackendName

    builtin = BackendName.of(name).builtin_model
    what = f"the {name} model" if builtin else (options.model or "the embedded SmolLM2-135M")
    if not builtin:
        divert_engine_output()
    with Console(file=term()).status(f"starting {name} on {visible(what, keep_newlines=False)}..."):
        return start(name, options)


def trace_path(flags: dict[str, Any], command: str) -> Path | None:
    """Where this command's trace goes (checked), or None with --no-trace."""
    return writer.trace_path(flags.get("trace"), bool(flags.get("no_trace")), command)


def read_prompts(prompt: str | None, prompts_file: Path | None) -> list[str]:
    """Prompts from the argument and/or a file with one prompt per line ('#' comments)."""
    prompts = []
    if prompt is not None:
        if not prompt.strip():
            raise InputError("the prompt is empty")
        prompts.append(prompt)
    if prompts_file is not None:
        readable_file(prompts_file, "prompts file", pipes=True)
        try:
            text = prompts_file.read_text(encoding="utf-8-sig")  # -sig: a BOM is not part of a prompt
        except OSError as e:
            raise InputError(f"{visible(str(prompts_file))}: cannot read prompts file ({e.strerror})") from None
        except UnicodeDecodeError:
            raise InputError(f"{visible(str(prompts_file))}: prompts file is not UTF-8 text") from None
        prompts += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if not prompts:
            raise InputError(f"{visible(str(prompts_file))}: no prompts in file (one per line, '#' starts a comment)")
    if not prompts:
        raise InputError("give a prompt, e.g. presto-tui run \"What is 7 * 8?\", or --prompts-file FILE")
    return prompts


def load_traces(paths: list[Path], on_bad_lines: str = "error"):
    """Read traces (each one validated, bad lines as --on-bad-lines says); warnings go to stderr."""
    from presto_tui.api.params import unknown_choice
    from presto_tui.logs.reader import ON_BAD_LINES, read_trace

    if on_bad_lines not in ON_BAD_LINES:
        raise InputError(unknown_choice("--on-bad-lines", on_bad_lines, ON_BAD_LINES))
    traces = []
    for p in paths:
        t = read_trace(p, on_bad_lines)
        for w in t.warnings:
            print(f"presto-tui: warning: {visible(w, keep_newlines=False)}", file=term())
        traces.append(t)
    return traces


# -- the terminal and the engine's own output (presto_tui/console.py) ---------------------

def divert_engine_output() -> None:
    """Send the engine libraries' own output to its log file, unless --verbose."""
    console.divert_engine_output(verbose=VERBOSE["on"])


# -- one error handler per surface ------------------------------------------------

DEBUG = {"on": False}  # set by the root callback's --debug
VERBOSE = {"on": False}  # --verbose: engine logs on the terminal


def print_error(message: str) -> None:
    """The one line every failure ends in (text from outside shown, never interpreted)."""
    print(f"presto-tui: error: {visible(message, keep_newlines=False)}", file=term())


def fail(message: str, code: int) -> None:
    if console.diverted():
        message += f" (engine log: {console.engine_log_path()})"
    print_error(message)
    raise typer.Exit(code)


def reflow(doc: str | None) -> str | None:
    """A docstring as --help shows it: prose paragraphs become one line each (Typer's rich help
    keeps line breaks and wraps again at the terminal's width); indented lines (examples) stay."""
    if not doc:
        return doc
    import inspect

    paragraphs = inspect.cleandoc(doc).split("\n\n")
    out = []
    for p in paragraphs:
        lines = p.splitlines()
        out.append(p if all(ln.startswith("  ") for ln in lines) else " ".join(ln.strip() for ln in lines))
    return "\n\n".join(out)


def run_app(app: Any, **kwargs: Any) -> int:
    """Run a Textual app to its end; its return code, non-zero where it failed inside (Textual has
    printed what happened), which the command exits with (`exit_with`): never 0 after a failure."""
    app.run(**kwargs)
    return app.return_code or 0


def exit_with(code: int) -> None:
    if code:
        raise typer.Exit(code)


def _plugin_tracebacks() -> None:
    """Under --debug: the traceback of each plugin method that failed to load (where the methods were looked
    up at all: the registry is read, never loaded, here)."""
    registry = sys.modules.get("presto_tui.runtime.core.registry")
    for p in getattr(registry, "_problems", ()):
        print(f"{p}\n{p.traceback}", file=term())


def handled(fn: Callable) -> Callable:
    """Every command ends the same way: one line and the error kind's exit code, 130 on Ctrl-C,
    a traceback only under --debug."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:
            print("presto-tui: interrupted", file=term())
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except PrestoError as e:
            if DEBUG["on"]:
                traceback.print_exc(file=term())
                _plugin_tracebacks()
            fail(e.line, e.exit_code)
        except Exception as e:
            if DEBUG["on"]:
                traceback.print_exc(file=term())
            kind, message = describe(e)
            print(f"presto-tui: internal error: {visible(message, keep_newlines=False)} "
                  "(run with --debug for the traceback)", file=term())
            raise typer.Exit(1) from None
        finally:
            console.restore_terminal()  # the engine's output went to its log; the terminal is the terminal again

    wrapper.__doc__ = reflow(fn.__doc__)
    return wrapper


def table_console() -> Console:
    """stdout for the tables.  A terminal narrower than the table gets the main columns (the rest
    are in the results file); a file or a pipe gets every column, whatever COLUMNS says."""
    from rich.console import Console

    out = Console(highlight=False)
    return out if out.is_terminal else Console(highlight=False, width=PIPE_WIDTH)


PIPE_WIDTH = 1000  # wider than any table here: nothing is cut or dropped


def write_results(path: Path, data: bytes) -> None:
    """A command's results file, its folder made if missing (files.py's rule); one line if it cannot be
    written."""
    make_folders(path.parent, "results", error=OutputError)
    try:
        path.write_bytes(data)
    except OSError as e:
        raise OutputError(f"{visible(str(path), keep_newlines=False)}: cannot write results "
                          f"({e.strerror or e})") from None


def publish(res: dict, out_path: Path, json_out: bool, show: Callable[[Any, dict], None],
            plots: Callable[..., list[str]], figures: list[str], trace) -> None:
    """How a results command ends (eval, its frontier): the results JSON written, then printed, or shown
    (`show(console, res)`) with its terminal plots; one line names every file written."""
    import orjson

    write_results(out_path, orjson.dumps(res, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    if json_out:
        sys.stdout.write(orjson.dumps(res, option=orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    else:
        console = table_console()
        show(console, res)
        for plot in plots(res, width=min(console.width, 120)):
            sys.stdout.write(plot + "\n")
    shown = lambda p: visible(str(p), keep_newlines=False)
    print(f"presto-tui: results written to {shown(out_path)}"
          + (f", figure{'s' if len(figures) > 1 else ''} to {', '.join(shown(f) for f in figures)}" if figures else "")
          + (f", trace to {shown(trace.path)}" if trace is not None and not trace.broken else ""), file=term())
