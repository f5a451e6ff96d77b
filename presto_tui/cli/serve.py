"""`presto-tui serve`: an OpenAI-compatible HTTP server, every request a chain on one engine loop."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from pathlib import Path
from typing import Annotated

import typer

from presto_tui.api.params import SAMPLER_PARAMS, Group, load_classifier
from presto_tui.cli import options as o
from presto_tui.cli.params import takes
from presto_tui.cli.root import command
from presto_tui.errors import InputError
from presto_tui.logs.writer import open_trace
from presto_tui.safetext import visible
from presto_tui.serve.limits import (
    MAX_ENGINE_REQUESTS,
    MAX_EVENT_STREAMS,
    MAX_LIVE_REQUESTS,
    MAX_REQUEST_MEMORY,
    MAX_REQUEST_TOKENS,
    MAX_TENANT_TOKENS,
)

SERVER = "Server"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@command()
@o.handled
@takes(Group.METHOD, Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE)
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(
        "--host", metavar="ADDRESS", rich_help_panel=SERVER,
        help="Address to listen on; 0.0.0.0 listens on every interface (then set --api-key).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", rich_help_panel=SERVER, help="Port to listen on (0: any free one).")]
    = 8000,
    api_key: Annotated[list[str] | None, typer.Option(
        "--api-key", metavar="KEY|NAME=KEY", envvar="PRESTO_TUI_API_KEY", rich_help_panel=SERVER,
        show_default=False,
        help="Require the header Authorization: Bearer KEY on every route (also $PRESTO_TUI_API_KEY). Repeat "
        "it for several tenants: NAME=KEY names the key's tenant (a bare KEY is tenant default); a key sees and "
        "cancels only its own tenant's requests [default: none, fine on 127.0.0.1].")] = None,
    admin_key: Annotated[list[str] | None, typer.Option(
        "--admin-key", metavar="NAME=KEY", rich_help_panel=SERVER, show_default=False,
        help="A key that also sees and cancels every tenant's requests (repeatable).")] = None,
    api_keys: Annotated[Path | None, typer.Option(
        "--api-keys", metavar="FILE", rich_help_panel=SERVER, show_default=False,
        help="Keys from a file, one a line: NAME KEY, or NAME KEY admin ('#' starts a comment).")] = None,
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
    max_steps: Annotated[int, typer.Option(
        "--max-steps", rich_help_panel=SERVER,
        help="Most steps (K) a request may ask for; above, 400. With --max-tokens it bounds what one request "
        f"holds in memory, {o.CLI_LIMITS['max_steps'].where}.")] = 1024,
    max_tokens: Annotated[int, typer.Option(
        "--max-tokens", rich_help_panel=SERVER,
        help=f"Most new tokens (max_tokens) a request may ask for; above, 400, {o.CLI_LIMITS['max_tokens'].where}.")]
    = 4096,
    read_timeout: Annotated[float, typer.Option(
        "--read-timeout", rich_help_panel=SERVER,
        help="Seconds a client has to send a request's headers, then its body; a client that leaves the "
        f"server's writes unread this long is cut too, {o.CLI_LIMITS['read_timeout'].where}.")] = 10.0,
    max_connections: Annotated[int, typer.Option(
        "--max-connections", rich_help_panel=SERVER,
        help="Connections open at once; one more gets 503 and is closed, "
        f"{o.CLI_LIMITS['max_connections'].where}.")] = 512,
    max_event_streams: Annotated[int, typer.Option(
        "--max-event-streams", rich_help_panel=SERVER,
        help="Event streams (GET /v1/presto/events) open at once, each holding a connection; one more gets 429. "
        f"Keep it below --max-connections, {o.CLI_LIMITS['max_event_streams'].where}.")] = MAX_EVENT_STREAMS,
    max_request_tokens: Annotated[int, typer.Option(
        "--max-request-tokens", rich_help_panel=SERVER,
        help="Most tokens a request's chains may decode, as their sampler bounds them before they run (steps x "
        "budget x tokens for a chain; draws, candidates x rollouts for SPS; samples, particles) times its chains; "
        f"above, 400, {o.CLI_LIMITS['max_request_tokens'].where}.")] = MAX_REQUEST_TOKENS,
    max_engine_requests: Annotated[int, typer.Option(
        "--max-engine-requests", rich_help_panel=SERVER,
        help="Most engine requests a request's chains may issue, bounded so; above, 400, "
        f"{o.CLI_LIMITS['max_engine_requests'].where}.")] = MAX_ENGINE_REQUESTS,
    max_tenant_tokens: Annotated[int, typer.Option(
        "--max-tenant-tokens", rich_help_panel=SERVER,
        help="Most tokens one tenant's running and queued requests may decode together, bounded so; a request "
        f"beyond gets 429, {o.CLI_LIMITS['max_tenant_tokens'].where}.")] = MAX_TENANT_TOKENS,
    max_live_requests: Annotated[int, typer.Option(
        "--max-live-requests", rich_help_panel=SERVER,
        help="Most engine requests a request's chains keep live at once (samples, particles, SPS's candidates x "
        "rollouts, a chain's budget) times its chains; above, 400. A tenant's requests together: twice it "
        f"(429 beyond), {o.CLI_LIMITS['max_live_requests'].where}.")] = MAX_LIVE_REQUESTS,
    max_request_memory: Annotated[int, typer.Option(
        "--max-request-memory", rich_help_panel=SERVER,
        help="Most bytes a request's live engine requests may hold, as bounded before it runs (live requests x "
        "(prompt + new tokens)); above, 400. A tenant's requests together: the same (429 beyond), "
        f"{o.CLI_LIMITS['max_request_memory'].where}.")] = MAX_REQUEST_MEMORY,
    paper_settings: o.PaperSettings = False, classifier: o.Classifier = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", "-W", rich_help_panel=o.SCALE, show_default=False,
        help="Serve from W engines, each a Ray worker (one GPU each where there are GPUs; the CPU cores split "
        "between them otherwise): each request goes to the least loaded, a chat's turns to the one that served "
        "it before; a worker that dies fails its requests (500) and the others serve on. Needs pip install "
        "'presto-tui[ray]'.")] = None,
    ray_address: o.RayAddress = None,
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
    disconnects cancels its chains. Every session goes to the trace, as with run. Keys may
    name tenants (--api-key NAME=KEY): a key follows and cancels only its tenant's requests,
    an --admin-key everyone's. --workers W serves from W engines (Ray workers). SIGTERM
    stops it as Ctrl-C does.

    Examples:

      presto-tui serve                                  # vLLM, port 8000

      presto-tui serve --backend synthetic --port 8001  # no model needed

      presto-tui serve --host 0.0.0.0 --api-key "$KEY" -C 16 --prefetch stream

      presto-tui serve --api-keys keys.txt -W 2         # tenants, 2 engines

      curl -s localhost:8000/v1/completions -H 'Content-Type: application/json' \\
        -d '{"prompt": "What is 7 * 8?", "max_tokens": 32, "steps": 8, "seed": 1}'

      presto-tui chat --connect http://127.0.0.1:8000   # the app, on the server
    """
    flags = ctx.params
    params = o.sampler_params(flags)
    for name in ("port", "max_queue", "request_timeout", "max_body_bytes", "max_steps", "max_tokens",
                 "read_timeout", "max_connections", "max_event_streams", "max_request_tokens", "max_engine_requests",
                 "max_tenant_tokens", "max_live_requests", "max_request_memory"):
        o.CLI_LIMITS[name].check("--" + name.replace("_", "-"), flags[name])
    if max_chains is not None:
        o.CLI_LIMITS["max_chains"].check("--max-chains", max_chains)
    from presto_tui.serve.tenants import key_table

    if not api_key and os.environ.get("PRESTO_TUI_API_KEY", "x").strip() == "":  # (blank: no keys at all)
        api_key = [""]
    keys = key_table(api_key, admin_key, api_keys)
    if params.steps > max_steps:
        raise InputError(f"--steps {params.steps} is over --max-steps {max_steps} (what a request may ask for)")
    if params.max_new_tokens > max_tokens:
        raise InputError(f"--max-new-tokens {params.max_new_tokens} is over --max-tokens {max_tokens} (what a "
                         "request may ask for)")
    from presto_tui.api.sessions import default_concurrency

    chains = max_chains or default_concurrency(256, params)
    clf = load_classifier(classifier)
    name, engine_opts = o.engine_options(flags)
    path = o.trace_path(flags, "serve")
    scaled = workers is not None or ray_address is not None
    if scaled:
        if workers is not None:
            o.CLI_LIMITS["workers"].check("--workers", workers)
        from presto_tui.api.sessions import check_address, require_ray

        require_ray()  # one line if Ray is missing, before anything starts
        if ray_address:
            check_address(ray_address)
    from presto_tui.serve.net import listen, uvicorn_server

    sock = listen(host, port)  # a taken port is known before the engine starts
    pool = None
    with sock, contextlib.ExitStack() as stack:
        try:
            from presto_tui.serve.app import ServeConfig, Server, create_app
        except ImportError as e:
            raise InputError(f"presto-tui serve needs its extra: pip install 'presto-tui[serve]' ({e.name} is "
                             "missing)") from None
        if scaled:
            pool = start_pool(workers or 1, name, engine_opts, ray_address, chains, clf)
            stack.callback(pool.stop, 60)  # (after the server has stopped it: nothing left to do)
            engine = pool.engine
        else:
            engine = o.start_engine(name, engine_opts)
        writer = open_trace(path, "serve", engine, params)
        defaults = {k: flags[k] for k in (*(p.name for p in SAMPLER_PARAMS), "paper_settings")
                    if flags.get(k) is not None and flags.get(k) is not False}  # as typed; a body overrides them
        config = ServeConfig(defaults=defaults, max_chains=chains, max_queue=max_queue,
                             request_timeout=request_timeout or None, tenants=keys, max_body=max_body_bytes,
                             max_steps=max_steps, max_tokens=max_tokens, read_timeout=read_timeout,
                             max_connections=max_connections, max_event_streams=max_event_streams,
                             max_request_tokens=max_request_tokens, max_engine_requests=max_engine_requests,
                             max_tenant_tokens=max_tenant_tokens, max_live_requests=max_live_requests,
                             max_request_memory=max_request_memory)
        server = Server(engine, config, trace=writer, classifier=clf, debug=o.DEBUG["on"], pool=pool)
        app = create_app(server)
        bound = sock.getsockname()
        where = f"http://{_host_text(bound[0])}:{bound[1]}"
        out = o.term()
        engines = f" on {len(pool.workers)} workers" if pool is not None else ""
        print(f"presto-tui: serving {visible(engine.model, keep_newlines=False)} ({engine.name}{engines}) at "
              f"{where}/v1, {chains} chains at once{' each' if engines else ''}, {max_queue} more queued; Ctrl-C "
              "stops", file=out)
        if host not in LOOPBACK and not keys:
            print(f"presto-tui: warning: listening on {visible(host)} without --api-key: anyone who reaches this "
                  "port can sample", file=out)
        uv = uvicorn_server(app)
        # what exists as the server starts (modules, the engine: about 80,000 objects) lives as long as it: a
        # full collection (Python's own, or the one a large request's end runs: host.give_back_memory) need not
        # walk it each time (0.1 s of the interpreter's lock on a loaded 2-core machine)
        gc.freeze()
        try:
            uv.run(sockets=[sock])
            if uv.stopped_by == signal.SIGINT:  # Ctrl-C: exit 130, even where SIGINT came in ignored (SIGTERM: 0)
                raise KeyboardInterrupt
        finally:
            if writer is not None:
                writer.close()
                if not writer.broken:
                    print(f"presto-tui: trace written to {visible(str(writer.path), keep_newlines=False)}", file=out)


def start_pool(workers: int, name: str, options, address: str | None, chains: int, classifier):
    """The Ray workers, each an engine host, started with a spinner."""
    from rich.console import Console

    from presto_tui.serve.pool import Pool

    o.divert_engine_output()
    with Console(file=o.term()).status(f"starting {workers} Ray worker(s) with {name}..."):
        return Pool(workers, name, options, max_chains=chains, address=address, classifier=classifier)


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host
