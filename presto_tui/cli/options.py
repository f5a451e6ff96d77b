"""Options shared by the commands, declared once, and the one place that turns them into objects.

Every sampler flag defaults to None ("not given"); `sampler_params` fills in
`SamplerParams`' own defaults (or a preset such as the paper's sizes) and
validates, so `run`, `chat` and `bench` can never disagree on a default.
`engine_options` does the same for the engine flags.  Everything a person can
get wrong is checked here, before any engine starts.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from presto_tui.errors import EXIT_INTERRUPTED, InputError, OutputError, PrestoError, describe
from presto_tui.files import make_folders, output_path, readable_file
from presto_tui.runtime.core.names import Choice, InputMode, PrefetchRule, SamplerName
from presto_tui.runtime.core.params import AUTO_BUDGET, BENCH_SIZES, LIMITS, Limit, SamplerParams, number_text
from presto_tui.runtime.session.chains import CHAINS
from presto_tui.safetext import visible

if TYPE_CHECKING:
    from rich.console import Console

SAMPLER, ENGINE, OUTPUT = "Sampler", "Engine", "Output"

# The CLI's own numbers (the sampler's are `params.LIMITS`); `limit_of` finds either.
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
}


def limit_of(name: str) -> Limit | None:
    """The documented range of the parameter `name` (a command's argument name), if it has one."""
    return LIMITS.get(name) or CLI_LIMITS.get(name)


# -- help text, built from the registry and the parameters' own defaults and ranges --------
# Help is plain text: the command line escapes it for Rich (cli/usage.py), so brackets such as
# [default: 4] or 'presto-tui[ray]' are written as they should read.

def choices_help(choices: type[Choice]) -> str:
    """'a (what a is), b (...) or c (...)' for every name of a registry list."""
    items = [f"{c.value} ({c.help})" for c in choices]
    return ", ".join(items[:-1]) + f" or {items[-1]}"


def number_help(name: str, text: str, default: object = None) -> str:
    """`text`, the parameter's range and its default (SamplerParams' own unless given)."""
    shown = number_text(getattr(SamplerParams(), name)) if default is None else default
    return f"{text}, {LIMITS[name].where} [default: {shown}]."


# -- the sampler ----------------------------------------------------------------
Sampler = Annotated[SamplerName | None, typer.Option(
    "--sampler", metavar="NAME", rich_help_panel=SAMPLER, show_default=False,
    help=f"The method that draws the response: {choices_help(SamplerName)} "
    f"[default: {SamplerParams().sampler}].")]
Prefetch = Annotated[PrefetchRule | None, typer.Option(
    "--prefetch", metavar="NAME", rich_help_panel=SAMPLER, show_default=False,
    help=f"{choices_help(PrefetchRule)}. With decision inputs bfs and predictive plan the same requests "
    f"as each other; their allocations differ only with --inputs node [default: {SamplerParams().prefetch}].")]
Inputs = Annotated[InputMode | None, typer.Option(
    "--inputs", metavar="NAME", rich_help_panel=SAMPLER, show_default=False,
    help=f"The decisions' random inputs: {choices_help(InputMode)} [default: {SamplerParams().inputs}].")]
Alpha = Annotated[float | None, typer.Option(
    "--alpha", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("alpha", "Power exponent: the target is p0^alpha"))]
Tau = Annotated[float | None, typer.Option(
    "--tau", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("tau", "Proposal temperature", default="1/alpha"))]
NewTokens = Annotated[int | None, typer.Option(
    "--max-new-tokens", "-n", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("max_new_tokens", "Response length n (fixed; EOS does not stop it)"))]
BlockSize = Annotated[int | None, typer.Option(
    "--block-size", "-B", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("block_size", "Block size B, must divide n", default="n, one block"))]
Steps = Annotated[int | None, typer.Option(
    "--steps", "-K", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("steps", "MH transitions per block K"))]
Budget = Annotated[str | None, typer.Option(
    "--budget", "-N", metavar="N|auto|fill:N", rich_help_panel=SAMPLER, show_default=False,
    help=f"Prefetch budget: distinct requests per model call for the round rules. For stream, the most "
    f"requests kept live, each only while its chance of being used pays for what it adds to every engine "
    f"step (the engine's step cost is learned as it runs); auto is that with up to {AUTO_BUDGET}; fill:N keeps "
    f"N live whatever they cost. N {LIMITS['budget'].where} [default: auto for stream, "
    f"{SamplerParams().budget} for the round rules].")]
Speculate = Annotated[str | None, typer.Option(
    "--speculate", metavar="LIST", rich_help_panel=SAMPLER, show_default=False,
    help=f"Stream: what to speculate beyond the chain's state, a comma list of proposal (requests cut inside "
    f"a proposal still decoding) and block (the next block's extension), or none "
    f"[default: {SamplerParams().speculate}].")]
Epsilon = Annotated[float | None, typer.Option(
    "--epsilon", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("epsilon", "Epsilon of epsilon-certainty: certain accept if A >= 1-eps, certain reject "
                     "if A <= eps"))]
Seed = Annotated[int | None, typer.Option(
    "--seed", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("seed", "Session seed; the same seed gives the same chain"))]
Beta = Annotated[float | None, typer.Option(
    "--beta", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("beta", "EntropyCut: exponent of the entropy-jump cut law"))]
CutMix = Annotated[float | None, typer.Option(
    "--cut-mix", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("cut_mix", "EntropyCut: share of cuts drawn uniformly over every position; > 0 lets the "
                     "chain resample the first token (the published law, 0, never does)"))]
Tries = Annotated[int | None, typer.Option(
    "--tries", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("tries", "MultiTryMH: candidates per transition"))]
Chains = Annotated[int | None, typer.Option(
    "--chains", rich_help_panel=SAMPLER, show_default=False,
    help=f"Chains per prompt M, {CLI_LIMITS['chains'].where}, run at once on one engine, each with its own seed "
    "derived from --seed (chain 0 keeps it). With M >= 2: split R-hat, bulk and tail ESS and MCSE of the "
    "log-target and the log-likelihood across the chains (a warning where R-hat > 1.01 or bulk ESS < 100: "
    "K was too short), and the answer most chains agree on [default: 1].")]
Samples = Annotated[int | None, typer.Option(
    "--samples", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("samples", "Best-of-N: samples N, each at temperature 1/alpha"))]
Rank = Annotated[str | None, typer.Option(
    "--rank", metavar="logq|logp", rich_help_panel=SAMPLER, show_default=False,
    help="Best-of-N keeps the sample with the highest sum of log q_tau (its own sampling distribution, the "
    "paper's choice) or of log p0 [default: logq].")]
Particles = Annotated[int | None, typer.Option(
    "--particles", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("particles", "PowerSMC: particles P"))]
SmcBlock = Annotated[int | None, typer.Option(
    "--smc-block", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("smc_block", "PowerSMC: tokens a particle grows between resampling steps"))]
SmcRamp = Annotated[int | None, typer.Option(
    "--smc-ramp", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("smc_ramp", "PowerSMC: the exponent rises from 1 to alpha over this many tokens (at most n)"))]
# bench's sizes default to BENCH_SIZES
BenchNewTokens = Annotated[int | None, typer.Option(
    "--max-new-tokens", "-n", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("max_new_tokens", "Response length n", default=BENCH_SIZES["max_new_tokens"]))]
BenchSteps = Annotated[int | None, typer.Option(
    "--steps", "-K", rich_help_panel=SAMPLER, show_default=False,
    help=number_help("steps", "MH transitions per block (one block unless -B)", default=BENCH_SIZES["steps"]))]
PaperSettings = Annotated[bool, typer.Option(
    "--paper-settings", rich_help_panel=SAMPLER,
    help="The paper's sizes: n=1024, one block, K=100, N=20 (explicit flags still win).")]
Classifier = Annotated[Path | None, typer.Option(
    "--classifier", rich_help_panel=SAMPLER, show_default=False,
    help="JSON epsilon-class model for --prefetch predictive (from presto-tui fit-classifier).")]

# -- the engine -----------------------------------------------------------------
Backend = Annotated[str | None, typer.Option(
    "--backend", envvar="PRESTO_TUI_BACKEND", rich_help_panel=ENGINE, show_default=False,
    help="Engine: vllm (default where installed), transformers (exact float32 reference), "
    "synthetic (tiny deterministic model for tests and demos).")]
Model = Annotated[str | None, typer.Option(
    "--model", rich_help_panel=ENGINE, show_default=False,
    help="smollm2-135m (the embedded default), a local Hugging Face folder, or a .gguf file.")]
ChatTemplate = Annotated[bool, typer.Option(
    "--chat-template/--no-chat-template", rich_help_panel=ENGINE, help="Wrap prompts in the model's chat template.")]
Dtype = Annotated[str | None, typer.Option(
    "--dtype", rich_help_panel=ENGINE, show_default=False,
    help="auto, float32, bfloat16 or float16 [default: float32 on CPU, the model's on GPU].")]
MaxModelLen = Annotated[int | None, typer.Option(
    "--max-model-len", rich_help_panel=ENGINE, show_default=False,
    help="vLLM: context length to reserve.")]
GpuMem = Annotated[float | None, typer.Option(
    "--gpu-memory-utilization", rich_help_panel=ENGINE, show_default=False,
    help="vLLM on GPU: memory fraction.")]
TensorParallel = Annotated[int, typer.Option(
    "--tensor-parallel-size", rich_help_panel=ENGINE, help="vLLM: GPUs to shard the model over.")]
PipelineParallel = Annotated[int, typer.Option(
    "--pipeline-parallel-size", rich_help_panel=ENGINE,
    help="vLLM: pipeline stages (GPUs or nodes) to split the model over.")]
Executor = Annotated[str | None, typer.Option(
    "--distributed-executor-backend", rich_help_panel=ENGINE, show_default=False,
    help="vLLM: uni (one process), mp (worker processes) or ray (a Ray cluster, several nodes) "
    "[default: uni, mp with tensor or pipeline parallelism].")]
Eager = Annotated[bool | None, typer.Option(
    "--enforce-eager/--no-enforce-eager", rich_help_panel=ENGINE, show_default=False,
    help="vLLM: skip graph capture [default: eager on CPU].")]
Threads = Annotated[int | None, typer.Option(
    "--threads", rich_help_panel=ENGINE, show_default=False,
    help="CPU threads for the engine [default: all cores; 1 is faster on a busy machine].")]
KvCache = Annotated[float | None, typer.Option(
    "--kv-cache-gib", rich_help_panel=ENGINE, show_default=False,
    help="vLLM on CPU: KV-cache size in GiB [default: 1].")]
SyntheticCost = Annotated[float | None, typer.Option(
    "--synthetic-cost", rich_help_panel=ENGINE, show_default=False,
    help="Synthetic engine: a step with n live requests costs 1 + this x (n - 1) one-request steps; 0.05 is "
    "what a 2-core CPU measured, about 0.004 a GPU [default: 0.05].")]

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


def selection(burn_in: int, thin: int, steps: int | None = None):
    """--burn-in and --thin, checked (the burn-in below K where K is known), as the diagnostics read them."""
    from presto_tui.runtime.session.diagnostics import Selection

    CLI_LIMITS["burn_in"].check("--burn-in", burn_in)
    CLI_LIMITS["thin"].check("--thin", thin)
    if steps is not None and burn_in >= steps:
        raise InputError(f"--burn-in must be below K (-K {steps}): it drops transitions of each block, and K would "
                         f"leave none, got {burn_in}")
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

SAMPLER_FLAGS = ("sampler", "prefetch", "inputs", "alpha", "tau", "max_new_tokens", "block_size", "steps",
                 "epsilon", "seed", "beta", "cut_mix", "tries", "speculate", "samples", "particles", "smc_block",
                 "smc_ramp")
ENGINE_FLAGS = ("model", "chat_template", "dtype", "max_model_len", "gpu_memory_utilization",
                "tensor_parallel_size", "pipeline_parallel_size", "distributed_executor_backend", "enforce_eager",
                "threads", "kv_cache_gib", "synthetic_cost")


def sampler_params(flags: dict[str, Any], preset: dict[str, Any] | None = None):
    """SamplerParams from the flags given (None: not given), over `preset` and the defaults."""
    from presto_tui.runtime.core.params import PAPER_SETTINGS

    values = dict(preset or {})
    if flags.get("paper_settings"):
        values.update(PAPER_SETTINGS)
        if flags.get("max_new_tokens") is not None and flags.get("block_size") is None:
            values["block_size"] = None  # one block of the n the person chose
    # a name from the registry (an Enum member) is kept as its plain name
    values.update({k: v.value if isinstance(v, Choice) else v for k in SAMPLER_FLAGS
                   if (v := flags.get(k)) is not None})
    if flags.get("rank") is not None:
        values["bon_rank"] = flags["rank"]
    sampler = values.get("sampler")
    if sampler in SamplerName.names() and not SamplerName.of(sampler).chain and flags.get("prefetch") is None:
        values["prefetch"] = PrefetchRule.NONE.value  # a baseline has no prefetch rule to default to
    if flags.get("budget") is not None:
        values.update(parse_budget(str(flags["budget"])))
    elif "budget" not in values and values.get("prefetch", SamplerParams().prefetch) == PrefetchRule.STREAM:
        values.update(parse_budget("auto"))  # the streaming rule's default: what pays, up to AUTO_BUDGET
    return SamplerParams(**values).validate()


def chain_count(value: int | None) -> int:
    """--chains M, checked, and for M >= 2 the package its diagnostics need (before any engine starts)."""
    if value is None:
        return 1
    CLI_LIMITS["chains"].check("--chains", value)
    if value > 1:
        from presto_tui.runtime.session.diagnostics import require

        require()
    return value


def parse_budget(text: str, flag: str = "--budget") -> dict[str, Any]:
    """`-N`: N (the cost policy, N at most), auto (the cost policy up to AUTO_BUDGET) or fill:N."""
    raw = text.strip()
    policy = "cost"
    if raw == "auto":
        return {"budget": AUTO_BUDGET, "budget_policy": policy}
    if raw.startswith("fill:"):
        raw, policy = raw[5:], "fill"
    if not raw.isascii() or not raw.isdigit():
        raise InputError(f"{flag} must be a whole number {LIMITS['budget'].where}, auto or fill:N, got {text!r}")
    return {"budget": int(raw), "budget_policy": policy}


def engine_options(flags: dict[str, Any]):
    """The engine the flags name and its options, checked (no engine starts here)."""
    from presto_tui.runtime.engines.registry import EngineOptions, default_backend

    name = flags.get("backend") or default_backend()
    return name, EngineOptions(**{k: flags[k] for k in ENGINE_FLAGS if k in flags}).check(name)


def start_cluster(flags: dict[str, Any], name: str, options, concurrency: int):
    """The Ray workers `--workers`/`--ray-address` ask for, started with a spinner (or None)."""
    workers, address = flags.get("workers"), flags.get("ray_address")
    if workers is None and address is None:
        return None
    if workers is not None:
        CLI_LIMITS["workers"].check("--workers", workers)
    from rich.console import Console

    from presto_tui.runtime.session.cluster import Cluster, _ray, check_address

    _ray()  # one line if Ray is missing, before anything starts
    if address:
        check_address(address)
    divert_engine_output()
    with Console(file=term()).status(f"starting {workers or 1} Ray worker(s) with {name}..."):
        return Cluster(workers or 1, name, options, address=address, concurrency=concurrency)


def start_engine(name: str, options):
    """Start an engine with a spinner on stderr (failures raise with one line)."""
    from rich.console import Console

    from presto_tui.runtime.engines.registry import start_engine as start

    what = "the synthetic model" if name == "synthetic" else (options.model or "the embedded SmolLM2-135M")
    if name != "synthetic":
        divert_engine_output()
    with Console(file=term()).status(f"starting {name} on {visible(what, keep_newlines=False)}..."):
        return start(name, options)


def check_output_path(path: Path, what: str = "trace", overwrite: bool = False) -> Path:
    """The one rule for output paths (files.py): checked with the real reason before any work."""
    return output_path(path, what, overwrite)


def trace_path(flags: dict[str, Any], command: str) -> Path | None:
    """Where this command's trace goes (checked), or None with --no-trace."""
    if flags.get("no_trace"):
        if flags.get("trace") is not None:
            raise InputError("--trace and --no-trace contradict each other")
        return None
    return check_output_path(flags.get("trace") or default_trace_path(command))


def default_trace_path(command: str) -> Path:
    from presto_tui.logs.writer import default_trace_path as default

    return default(command)


def open_trace(path: Path | None, command: str, engine, params):
    if path is None:
        return None
    from presto_tui.logs.writer import TraceWriter

    try:
        return TraceWriter(path, command=command, backend=engine.name, model=engine.model,
                           params=params.to_dict(), pieces=engine.token_pieces, engine=dict(engine.info))
    except FileExistsError:  # (the writer reports any other failure as an OutputError itself)
        raise InputError(f"{visible(str(path), keep_newlines=False)}: trace file exists already; "
                         "choose another --trace path") from None


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


def load_classifier(path: Path | None):
    if path is None:
        return None
    from presto_tui.runtime.core.classifier import CertaintyClassifier

    return CertaintyClassifier.load(readable_file(path, "classifier file", pipes=True))


def load_traces(paths: list[Path], on_bad_lines: str = "error"):
    """Read traces (each one validated, bad lines as --on-bad-lines says); warnings go to stderr."""
    from presto_tui.logs.reader import ON_BAD_LINES, read_trace
    from presto_tui.runtime.core.names import unknown_choice

    if on_bad_lines not in ON_BAD_LINES:
        raise InputError(unknown_choice("--on-bad-lines", on_bad_lines, ON_BAD_LINES))
    traces = []
    for p in paths:
        t = read_trace(p, on_bad_lines)
        for w in t.warnings:
            print(f"presto-tui: warning: {visible(w, keep_newlines=False)}", file=term())
        traces.append(t)
    return traces


# -- the terminal and the engine's own output ---------------------------------------

_TERMINAL: dict[str, Any] = {"stream": None, "saved_fd": None, "log": None}


def term():
    """Where presto-tui's own messages and progress go (the terminal's stderr), also while the
    engine's own output is diverted to its log file."""
    return _TERMINAL["stream"] or sys.stderr


def engine_log_path() -> Path:
    from presto_tui.runtime.engines.models import cache_dir

    return cache_dir() / "engine.log"


def divert_engine_output() -> None:
    """Send what vLLM, torch and transformers print (warnings, progress bars, C++ notices) to a log
    file instead of the terminal, unless --verbose.  It goes to file descriptor 2 and Python's
    stderr alike, so both are pointed at the log; presto-tui writes to `term()`."""
    if VERBOSE["on"] or _TERMINAL["saved_fd"] is not None:
        return
    path = engine_log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = open(path, "a", buffering=1)  # noqa: SIM115 - open until the command ends
    except OSError:
        return  # nowhere to put it: leave the terminal as it is
    import time as _time

    log.write(f"\n--- presto-tui {' '.join(sys.argv[1:2])} at {_time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    sys.stderr.flush()
    saved = os.dup(2)
    # presto-tui's own messages keep going where sys.stderr goes: the terminal, or whatever
    # captured it (a test harness) when that is not file descriptor 2 itself
    on_fd2 = _fileno(sys.stderr) == 2
    stream = os.fdopen(os.dup(saved), "w", buffering=1) if on_fd2 else sys.stderr
    _TERMINAL.update(stream=stream, saved_fd=saved, log=log, own=on_fd2)
    os.dup2(log.fileno(), 2)


def restore_terminal() -> None:
    saved = _TERMINAL["saved_fd"]
    if saved is None:
        return
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    for key in ("stream", "log") if _TERMINAL.get("own") else ("log",):
        with contextlib.suppress(OSError):
            _TERMINAL[key].close()
    _TERMINAL.update(stream=None, saved_fd=None, log=None, own=False)


def _fileno(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


# -- one error handler per surface ------------------------------------------------

DEBUG = {"on": False}  # set by the root callback's --debug
VERBOSE = {"on": False}  # --verbose: engine logs on the terminal


def print_error(message: str) -> None:
    """The one line every failure ends in (text from outside shown, never interpreted)."""
    print(f"presto-tui: error: {visible(message, keep_newlines=False)}", file=term())


def fail(message: str, code: int) -> None:
    if _TERMINAL["log"] is not None:
        message += f" (engine log: {engine_log_path()})"
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
            fail(e.line, e.exit_code)
        except Exception as e:
            if DEBUG["on"]:
                traceback.print_exc(file=term())
            kind, message = describe(e)
            print(f"presto-tui: internal error: {visible(message, keep_newlines=False)} "
                  "(run with --debug for the traceback)", file=term())
            raise typer.Exit(1) from None
        finally:
            restore_terminal()  # the engine's output went to its log; the terminal is the terminal again

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
