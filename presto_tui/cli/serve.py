"""`presto-tui serve`: an OpenAI-compatible HTTP server, every request a chain on one engine loop."""

from __future__ import annotations

from typing import Annotated

import typer

from presto_tui.cli import command
from presto_tui.cli import options as o
from presto_tui.errors import InputError
from presto_tui.safetext import visible

SERVER = "Server"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@command()
@o.handled
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(
        "--host", metavar="ADDRESS", rich_help_panel=SERVER,
        help="Address to listen on; 0.0.0.0 listens on every interface (then set --api-key).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", rich_help_panel=SERVER, help="Port to listen on (0: any free one).")]
    = 8000,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", metavar="KEY", envvar="PRESTO_TUI_API_KEY", rich_help_panel=SERVER, show_default=False,
        help="Require the header Authorization: Bearer KEY on every route (also $PRESTO_TUI_API_KEY) "
        "[default: none, fine on 127.0.0.1].")] = None,
    max_chains: Annotated[int | None, typer.Option(
        "--max-chains", "-C", rich_help_panel=SERVER, show_default=False,
        help=f"Chains on the engine at once, sharing its batch, {o.CLI_LIMITS['max_chains'].where}; a request "
        "that arrives while they run joins the next engine step [default: enough for about 64 live requests: "
        "64/N, 8 under -N auto, whose cost policy keeps about 8 live].")] = None,
    max_queue: Annotated[int, typer.Option(
        "--max-queue", rich_help_panel=SERVER,
        help=f"Chains that may wait for a slot beyond --max-chains, {o.CLI_LIMITS['max_queue'].where}; past "
        "them a request gets 429 with Retry-After.")] = 64,
    request_timeout: Annotated[float, typer.Option(
        "--request-timeout", rich_help_panel=SERVER,
        help="Seconds a request may take, queue included, before its chains are cancelled and it gets 504 "
        f"(0: no limit), {o.CLI_LIMITS['request_timeout'].where}.")] = 600.0,
    max_body_bytes: Annotated[int, typer.Option(
        "--max-body-bytes", rich_help_panel=SERVER,
        help=f"Largest request body; a larger one gets 413, {o.CLI_LIMITS['max_body_bytes'].where}.")] = 1 << 20,
    sampler: o.Sampler = None, prefetch: o.Prefetch = None, inputs: o.Inputs = None, alpha: o.Alpha = None,
    tau: o.Tau = None, max_new_tokens: o.NewTokens = None, block_size: o.BlockSize = None,
    steps: o.Steps = None, budget: o.Budget = None, epsilon: o.Epsilon = None, seed: o.Seed = None,
    beta: o.Beta = None, cut_mix: o.CutMix = None, tries: o.Tries = None,
    speculate: o.Speculate = None, samples: o.Samples = None, rank: o.Rank = None, particles: o.Particles = None,
    smc_block: o.SmcBlock = None, smc_ramp: o.SmcRamp = None,
    paper_settings: o.PaperSettings = False, classifier: o.Classifier = None,
    backend: o.Backend = None, model: o.Model = None, chat_template: o.ChatTemplate = True, dtype: o.Dtype = None,
    max_model_len: o.MaxModelLen = None, gpu_memory_utilization: o.GpuMem = None,
    tensor_parallel_size: o.TensorParallel = 1, pipeline_parallel_size: o.PipelineParallel = 1,
    distributed_executor_backend: o.Executor = None, enforce_eager: o.Eager = None, threads: o.Threads = None,
    kv_cache_gib: o.KvCache = None,
    trace: o.TracePath = None, no_trace: o.NoTrace = False,
) -> None:
    """Serve power sampling over OpenAI's HTTP API: every request is a chain on one engine.

    Routes: GET /v1/models, POST /v1/completions and /v1/chat/completions (OpenAI's fields:
    model, prompt or messages, max_tokens = n, seed, n, stop, stream), GET
    /v1/presto/events?request=ID (a request's presto-tui events as they happen, each a
    trace line; without ?request=, every request's), POST /v1/presto/requests/ID/cancel,
    GET /health and GET /metrics (Prometheus). The sampler's own parameters are extra body
    fields named as the flags below with underscores (sampler, prefetch, inputs, alpha, tau,
    block_size, steps, budget, epsilon, beta, cut_mix, tries, paper_settings); the flags
    given here are their defaults. A bad value gets HTTP 400 with the line presto-tui run
    prints for it. An answer equals presto-tui run's for the same prompt, parameters and
    seed (seed defaults to --seed, so the same request gets the same answer); choice j of
    n runs on the seed of chain j, as --chains does. temperature, top_p and penalties are
    ignored (alpha and tau set the law), the text is cut at a stop sequence after the chain
    ends, and a streamed answer's text comes in one chunk when its chain ends. A client that
    disconnects cancels its chains. Every session goes to the trace, as with run.

    Examples:

      presto-tui serve                                  # vLLM, port 8000

      presto-tui serve --backend synthetic --port 8001  # no model needed

      presto-tui serve --host 0.0.0.0 --api-key "$KEY" -C 16 --prefetch stream

      curl -s localhost:8000/v1/completions -H 'Content-Type: application/json' \\
        -d '{"prompt": "What is 7 * 8?", "max_tokens": 32, "steps": 8, "seed": 1}'

      presto-tui chat --connect http://127.0.0.1:8000   # the app, on the server
    """
    flags = ctx.params
    params = o.sampler_params(flags)
    for name in ("port", "max_queue", "request_timeout", "max_body_bytes"):
        o.CLI_LIMITS[name].check("--" + name.replace("_", "-"), flags[name])
    if max_chains is not None:
        o.CLI_LIMITS["max_chains"].check("--max-chains", max_chains)
    if api_key is not None and not api_key.strip():
        raise InputError("--api-key is empty (unset PRESTO_TUI_API_KEY, or give a key)")
    from presto_tui.runtime.session.loop import default_concurrency

    chains = max_chains or default_concurrency(256, params)
    clf = o.load_classifier(classifier)
    name, engine_opts = o.engine_options(flags)
    path = o.trace_path(flags, "serve")
    from presto_tui.serve.net import listen, uvicorn_server

    sock = listen(host, port)  # a taken port is known before the engine starts
    with sock:
        try:
            from presto_tui.serve.app import ServeConfig, Server, create_app
        except ImportError as e:
            raise InputError(f"presto-tui serve needs its extra: pip install 'presto-tui[serve]' ({e.name} is "
                             "missing)") from None
        engine = o.start_engine(name, engine_opts)
        writer = o.open_trace(path, "serve", engine, params)
        defaults = {k: flags[k] for k in (*o.SAMPLER_FLAGS, "budget", "rank", "paper_settings")
                    if flags.get(k) is not None and flags.get(k) is not False}  # 0 is a value
        config = ServeConfig(defaults=defaults, max_chains=chains, max_queue=max_queue,
                             request_timeout=request_timeout or None, api_key=api_key, max_body=max_body_bytes)
        server = Server(engine, config, trace=writer, classifier=clf, debug=o.DEBUG["on"])
        app = create_app(server)
        bound = sock.getsockname()
        where = f"http://{_host_text(bound[0])}:{bound[1]}"
        out = o.term()
        print(f"presto-tui: serving {visible(engine.model, keep_newlines=False)} ({engine.name}) at {where}/v1, "
              f"{chains} chains at once, {max_queue} more queued; Ctrl-C stops", file=out)
        if host not in LOOPBACK and not api_key:
            print(f"presto-tui: warning: listening on {visible(host)} without --api-key: anyone who reaches this "
                  "port can sample", file=out)
        uv = uvicorn_server(app)
        try:
            uv.run(sockets=[sock])
        finally:
            if writer is not None:
                writer.close()
                if not writer.broken:
                    print(f"presto-tui: trace written to {visible(str(writer.path), keep_newlines=False)}", file=out)


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host
