"""The HTTP front on the engine loop: OpenAI's routes, presto-tui's event stream, health, metrics.

Routes:
- `GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions`: OpenAI's
  (protocol.py says which fields mean what);
- `GET /v1/presto/events[?request=ID]`: server-sent events, each a trace line's
  JSON object (wire.py): one request's from its first event until its chains end,
  or, without `request`, every request's from now on (the key's tenant's only, but
  for an admin key; `?tenant=NAME`: an admin's way to another tenant's request);
- `POST /v1/presto/requests/{ID}/cancel`: end a request's chains (the tenant's own);
- `GET /health`, `GET /metrics` (Prometheus text), and HEAD on them.

Every route answers 401 without a key when the server has keys (each names a
tenant: tenants.py; the connection then closes), and a body over the size limit
gets 413, before any handler runs (`Guard`); a request asking for more steps or
tokens than the server's caps, or whose chains may cost more engine requests or
tokens than its caps, keep more engine requests live at once, hold more memory or
take more of the engine's chain slots (`within_caps`), gets 400 before anything runs
(its checks in a thread, off the event loop).  Every error
is OpenAI's error object with one line: a bad value the line `presto-tui run`
prints for it (400), a full queue or a tenant's full account 429 with
Retry-After, a request past its timeout 504; never a traceback.  A client that
goes away cancels its chains.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import hashlib
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from presto_tui import API_VERSION
from presto_tui.api.engine import RuntimeEngine as Engine
from presto_tui.api.params import CertaintyClassifier, Cost, SamplerParams
from presto_tui.errors import InputError, describe
from presto_tui.safetext import visible
from presto_tui.serve import metrics
from presto_tui.serve.host import EngineHost, tenant_reserve
from presto_tui.serve.hub import KEEP_BYTES, LISTENER_BYTES, Busy, Hub, RequestRun, sse
from presto_tui.serve.limits import (
    MAX_ENGINE_REQUESTS,
    MAX_EVENT_STREAMS,
    MAX_LIVE_REQUESTS,
    MAX_REQUEST_MEMORY,
    MAX_REQUEST_TOKENS,
    MAX_TENANT_TOKENS,
    TENANT_LIVE_FACTOR,
)
from presto_tui.serve.net import BODY_LATE, body_late_line
from presto_tui.serve.protocol import (
    CHAT,
    COMPLETION,
    FieldError,
    chunk,
    error_object,
    field_naming,
    parse,
    request_schema,
    response,
    usage_chunk,
)
from presto_tui.serve.tenants import ANYONE, DEFAULT, Tenant

ROUTES = {"/v1/models": "models", "/v1/completions": "completions", "/v1/chat/completions": "chat",
          "/v1/presto/events": "events", "/health": "health", "/metrics": "metrics"}
PROGRESS_EVERY_S = 1.0  # a streamed answer's keep-alive comment (transitions so far)
KEEPALIVE_S = 15.0  # an idle event stream's comment line
SWITCH_INTERVAL_S = 0.001
CANCEL_WAIT_S = 2.0  # a cancel's answer waits at most this long for the engine thread to end the chains
STOPPING = "the server stopped before the answer was ready; its chains were cancelled"


@dataclass
class ServeConfig:
    """The server's settings (the command's flags)."""

    defaults: dict[str, Any] = field(default_factory=dict)  # sampler flags given to `serve`
    max_chains: int = 16
    max_queue: int = 64
    request_timeout: float | None = 600.0
    api_key: str | None = None  # one key, tenant "default" (as --api-key KEY)
    tenants: dict[str, Tenant] = field(default_factory=dict)  # key -> the tenant it names
    max_body: int = 1 << 20
    keep: int = 16  # finished requests whose events stay available (each holds every round's tree)
    keep_bytes: int = KEEP_BYTES  # ... and at most this many bytes of them
    listener_bytes: int = LISTENER_BYTES  # an event stream that holds more unsent is dropped
    max_steps: int = 1024  # a request may ask for at most this many steps (K) ...
    max_tokens: int = 4096  # ... and new tokens (n): what one request records is bounded
    # what its chains may cost (their method's cost times the chains): the engine's work and memory
    max_request_tokens: int = MAX_REQUEST_TOKENS
    max_engine_requests: int = MAX_ENGINE_REQUESTS
    max_tenant_tokens: int = MAX_TENANT_TOKENS  # ... and a tenant's live requests' together (429 above)
    # what its chains hold at once: engine requests live, and the bytes they hold (a tenant's together: 429 above)
    max_live_requests: int = MAX_LIVE_REQUESTS
    max_request_memory: int = MAX_REQUEST_MEMORY
    max_event_streams: int = MAX_EVENT_STREAMS  # event streams open at once (429 above), within --max-connections
    read_timeout: float = 10.0  # headers, body, and a stalled reader: net.py
    max_connections: int = 512

    def params(self) -> SamplerParams:
        from presto_tui.api.params import params_from

        return params_from(self.defaults, paper=bool(self.defaults.get("paper_settings")))

    @functools.cached_property
    def tenants_named(self) -> int:
        """How many tenants the keys name (one without keys): counted once, a request asks every time."""
        return max(1, len({t.name for t in self.tenants.values()} | ({DEFAULT} if self.api_key else set())))

    def tenant_count(self) -> int:
        return self.tenants_named

    def keys(self) -> dict[bytes, Tenant]:
        """Every key's tenant, by the key's SHA-256 (a lookup by digest takes no time that depends on
        how much of a wrong key is right)."""
        table = {_digest(k): t for k, t in self.tenants.items()}
        if self.api_key:
            table[_digest(self.api_key)] = Tenant(DEFAULT)
        return table


def _digest(key: str | bytes) -> bytes:
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).digest()


class HttpError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None,
                 headers: dict[str, str] | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.headers = status, message, kind, code, headers
        self.param = param  # the request field at fault (OpenAI's error object names it)


STATUS_OF_KIND = {"input": 400, "trace": 400, "engine": 500, "output": 500, "internal": 500}


def error_response(status: int, message: str, kind: str = "invalid_request_error", code: str | None = None,
                   headers: dict[str, str] | None = None, param: str | None = None) -> JSONResponse:
    return JSONResponse(error_object(visible(message, keep_newlines=False), kind, code, param), status,
                        headers=headers)


TENANT = "presto.tenant"  # the scope's entry for the Tenant whose key a request carries


def _tenant(header: bytes | None, keys: dict[bytes, Tenant]) -> Tenant | None:
    if not keys:
        return ANYONE
    # the scheme is case-insensitive (RFC 7235 section 2.1): bearer, BEARER and Bearer alike
    scheme, _, credentials = (header or b"").partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return keys.get(_digest(credentials.strip()))


class Guard:
    """Before any route: the API key, naming the request's tenant (401 without one), and the body's
    declared size (413); counts answers."""

    def __init__(self, app, *, config: ServeConfig, counts: collections.Counter[tuple[str, int]]):
        self.app, self.config, self.counts = app, config, counts
        self.keys = config.keys()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = ROUTES.get(scope["path"], "cancel" if scope["path"].startswith("/v1/presto/requests/") else "other")
        status = {"code": 500}

        async def counted(message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        headers = dict(scope["headers"])
        limit = self.config.max_body
        try:
            if sum(name == b"authorization" for name, _ in scope["headers"]) > 1:  # which one would count?
                if await self._drained(scope, receive, limit, status):
                    await error_response(400, "the request has more than one Authorization header; send one",
                                         code="duplicate_authorization",
                                         headers={"Connection": "close"})(scope, receive, counted)
                return
            tenant = _tenant(headers.get(b"authorization"), self.keys)
            if tenant is None:  # its body read (at most the limit, within --read-timeout), then closed: a
                # connection without a key holds no slot past its answer
                if not await self._drained(scope, receive, limit, status):
                    return
                await error_response(401, "missing or wrong API key: send the header Authorization: Bearer <key>",
                                     "authentication_error", "invalid_api_key",
                                     {"WWW-Authenticate": "Bearer", "Connection": "close"})(scope, receive, counted)
                return
            length = headers.get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > limit):
                if not await self._drained(scope, receive, 64 * max(limit, 1 << 20), status):
                    return
                await error_response(413, f"the request body is over the server's limit of {limit} bytes "
                                     "(--max-body-bytes)", code="body_too_large")(scope, receive, counted)
                return
            scope[TENANT] = tenant
            await self.app(scope, receive, counted)
        finally:
            self.counts[(route, status["code"])] += 1


    @staticmethod
    async def _drained(scope, receive, most: int, status: dict) -> bool:
        """`_drain`; False if the connection ended meanwhile: the client got net.py's 408 for a body
        that came too late (counted so), or went away (499), and nothing more is sent."""
        if await _drain(receive, most):
            return True
        status["code"] = 408 if scope.get(BODY_LATE) else 499
        return False


async def _drain(receive, most: int) -> bool:
    """Read (and drop) what the client is still sending, up to `most` bytes, so that it reads the
    answer (401, 413) instead of a connection reset in the middle of its upload; False if the
    connection ended first.  A body that does not come in time ends the connection (net.py: 408)."""
    seen = 0
    while seen <= most:
        message = await receive()
        if message["type"] != "http.request":
            return False
        seen += len(message.get("body", b""))
        if not message.get("more_body"):
            return True
    return True


async def read_json(request: Request, limit: int, timeout: float | None = None) -> tuple[Any, int]:
    """The body's JSON value, and its size in bytes."""
    data = bytearray()
    try:
        async with asyncio.timeout(timeout):  # a client that trickles its body holds a connection and a task
            async for part in request.stream():  # a body sent in chunks has no length to check up front
                data += part
                if len(data) > limit:
                    raise HttpError(413, f"the request body is over the server's limit of {limit} bytes "
                                    "(--max-body-bytes)", code="body_too_large")
    except TimeoutError:
        raise HttpError(408, body_late_line(timeout or 0), code="request_timeout",
                        headers={"Connection": "close"}) from None
    try:
        return orjson.loads(bytes(data)), len(data)
    except orjson.JSONDecodeError as e:
        raise HttpError(400, f"the request body is not valid JSON ({e})") from None


class Gone(Exception):
    """The client went away."""


class Watch:
    """Notices a client that went away while its answer is being made (non-streaming: the
    streaming response has Starlette's own watch)."""

    def __init__(self, request: Request):
        self.task = asyncio.ensure_future(self._watch(request))

    @staticmethod
    async def _watch(request: Request) -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    def stop(self) -> None:
        self.task.cancel()


class EngineStopped(Exception):
    """The engine thread is gone (a bug stopped it): nothing will answer."""


ALIVE_CHECK_S = 1.0  # how often a waiting answer checks that the engine thread still runs


async def until(run: RequestRun, ready, deadline: float | None, watch: Watch | None = None,
                host: Any = None) -> None:
    """Wait until `ready()`; Gone if the client went away, TimeoutError past the deadline,
    EngineStopped if `host`'s engine thread died meanwhile."""
    loop = asyncio.get_running_loop()
    while True:
        run.changed.clear()
        if ready():
            return
        if host is not None and not host.alive:
            raise EngineStopped
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            raise TimeoutError
        waiter = asyncio.ensure_future(run.changed.wait())
        waits: set[asyncio.Future] = {waiter} | ({watch.task} if watch is not None else set())
        wait_s = ALIVE_CHECK_S if left is None else min(left, ALIVE_CHECK_S)
        done, _ = await asyncio.wait(waits, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if watch is not None and watch.task in done:
            raise Gone


@dataclass
class Server:
    """What the routes share: the engine (owned by the host's thread once it runs) and the settings."""

    engine: Engine  # (with `pool`: its PoolEngine, what the workers' engines are)
    config: ServeConfig
    trace: Any = None  # logs.writer.TraceWriter, written by the engine thread (or the pool's readers) only
    classifier: CertaintyClassifier | None = None
    pool: Any = None  # serve --workers: pool.Pool, which stands for the host
    host: Any = None  # EngineHost, or the pool
    hub: Hub | None = None
    started: int = field(default_factory=lambda: int(time.time()))
    debug: bool = False
    stopping: bool = False

    @property
    def model_id(self) -> str:
        return self.engine.model

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        def deliver(batch, _pieces) -> None:  # (the token text is in the host's `pieces` already)
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting any more
                loop.call_soon_threadsafe(hub.take, batch)

        c = self.config
        # the engine thread's Python work (its chains' bookkeeping) and the event loop share the GIL: handing it
        # over every millisecond rather than every 5 keeps /health and the other tenants' answers prompt
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        if self.pool is not None:
            self.host = self.pool.bind(deliver, self.trace)
        else:
            self.host = EngineHost(self.engine, max_chains=c.max_chains, deliver=deliver, trace=self.trace,
                                   classifier=self.classifier, shared=c.tenant_count() > 1)
        workers = len(self.pool.workers) if self.pool is not None else 1
        hub = self.hub = Hub(self.host, max_chains=c.max_chains, max_queue=c.max_queue, keep=c.keep,
                             keep_bytes=c.keep_bytes, listener_bytes=c.listener_bytes, workers=workers,
                             max_tenant_tokens=c.max_tenant_tokens, max_listeners=c.max_event_streams,
                             tenants=c.tenant_count(), max_tenant_live=TENANT_LIVE_FACTOR * c.max_live_requests,
                             max_tenant_memory=c.max_request_memory)
        self.host.start()

    def stop(self) -> None:
        if self.host is not None:
            self.host.stop(timeout=60)

    async def drain(self) -> None:
        """The server is stopping: end every chain (sessions end `cancelled` in the trace), so that
        every open answer and event stream ends on its own before the connections close."""
        self.stopping = True
        await asyncio.to_thread(self.stop)
        await asyncio.sleep(0)  # the chains' last events, scheduled by the engine thread, go first
        if self.hub is not None:
            self.hub.close_listeners()


def create_app(server: Server) -> FastAPI:
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    config = server.config
    defaults = config.params()  # checked once here: a body only changes what it names
    # the sampler flags `serve` was given, as a client would send them (chat --connect starts from them)
    flags = {k: v.value if isinstance(v, Enum) else v for k, v in config.defaults.items()}

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        server.start(asyncio.get_running_loop())
        _app.state.registry = metrics.registry(server.host, server.hub, counts)  # type: ignore[arg-type]
        try:
            yield
        finally:
            await asyncio.to_thread(server.stop)

    # no slash redirects: Starlette builds their Location from the client's Host header
    app = FastAPI(title="presto-tui", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json", version=API_VERSION, redirect_slashes=False)
    app.state.presto = server
    app.add_middleware(Guard, config=config, counts=counts)
    schema = app.openapi

    def openapi() -> dict:
        # GET and HEAD share a route (so that a 405 names both in Allow), and FastAPI warns that the two
        # operations share its id: the schema is right (HEAD answers as GET), the warning is not news
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Duplicate Operation ID")
            return schema()

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(HttpError)
    async def _http_error(_request: Request, e: HttpError) -> JSONResponse:
        return error_response(e.status, e.message, e.kind, e.code, e.headers, e.param)

    @app.exception_handler(StarletteHTTPException)
    async def _no_route(request: Request, e: StarletteHTTPException) -> JSONResponse:
        if e.status_code == 404:
            return error_response(404, f"no route {request.method} {request.url.path} (see presto-tui serve --help)",
                                  code="not_found")
        return error_response(e.status_code, f"{request.method} {request.url.path}: {e.detail}",
                              headers=dict(e.headers or {}))  # a 405's Allow

    @app.exception_handler(Exception)
    async def _bug(_request: Request, e: Exception) -> JSONResponse:
        if server.debug:
            traceback.print_exc()
        return error_response(500, f"internal error: {describe(e)[1]}", "server_error")

    def hub() -> Hub:
        assert server.hub is not None
        return server.hub

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health() -> JSONResponse:
        host = server.host
        ok = host is not None and host.alive
        workers = host.worker_numbers() if host is not None else []
        status = "failed" if not ok else "degraded" if any(w["status"] != "ok" for w in workers) else "ok"
        return JSONResponse({
            "status": status, "backend": server.engine.name, "model": server.model_id,
            "chains_live": host.chains_live if host else 0, "queue": host.chains_waiting if host else 0,
            "engine_faults": host.faults if host else 0, "last_fault": host.last_fault if host else "",
            **({"workers": workers} if workers else {}),
            # the file's name only: where the server keeps its files is no client's business
            "trace": server.trace.path.name if server.trace is not None else None,
            "trace_error": host.trace_error if host else ""}, 200 if ok else 503)

    @app.api_route("/metrics", methods=["GET", "HEAD"])
    async def prometheus(request: Request) -> Response:
        return Response(metrics.render(request.app.state.registry), media_type="text/plain; version=0.0.4")

    @app.api_route("/v1/models", methods=["GET", "HEAD"])
    async def models() -> dict:
        e = server.engine
        return {"object": "list", "data": [{
            "id": server.model_id, "object": "model", "created": server.started, "owned_by": "presto-tui",
            "presto": {"backend": e.name, "engine": dict(e.info), "defaults": defaults.to_dict(), "flags": flags,
                       "max_chains": config.max_chains, "max_queue": config.max_queue}}]}

    @app.post("/v1/completions", openapi_extra=request_schema(COMPLETION))
    async def completions(request: Request) -> Response:
        return await answer(request, COMPLETION)

    @app.post("/v1/chat/completions", openapi_extra=request_schema(CHAT))
    async def chat_completions(request: Request) -> Response:
        return await answer(request, CHAT)

    async def answer(request: Request, kind: str) -> Response:
        if server.stopping:
            raise HttpError(503, STOPPING, "server_error", "server_stopping")
        try:
            body, _ = await read_json(request, config.max_body, config.read_timeout)
        except ClientDisconnect:  # gone in the middle of its upload: nobody to answer, and no bug
            return Response(status_code=499)

        def check() -> tuple[Any, Spend]:
            ask = parse(body, kind, config.defaults)
            return ask, within_caps(ask, config)

        try:  # (off the event loop: a long body's checks, and a large population's cost, take a while)
            ask, spend = await asyncio.to_thread(check)
        except InputError as e:
            raise HttpError(400, e.line, param=getattr(e, "field", None)) from None
        if ask.model is not None and ask.model != server.model_id:
            raise HttpError(404, f"model {ask.model!r} is not served here; this server serves {server.model_id!r}",
                            code="model_not_found")
        host = server.host
        if host is None or not host.alive:  # (a bug stopped it, or every worker died: /health says so too)
            raise HttpError(503, host.stopped_line if host is not None else STOPPING, "server_error")
        try:
            run = hub().reserve(ask, tenant_of(request), spend.tokens, live=spend.live, memory=spend.memory,
                                slots=spend.slots)
        except InputError as e:
            raise HttpError(400, e.line) from None
        except Busy as e:
            raise HttpError(429, str(e), "rate_limit_error", "queue_full", {"Retry-After": str(e.retry_after)}) \
                from None
        loop = asyncio.get_running_loop()
        deadline = None if config.request_timeout is None else loop.time() + config.request_timeout
        # a streaming response watches the client itself (Starlette), and a second reader of the
        # connection would take the disconnect from it: only the plain answer has a watch of its own
        watch = None if ask.stream else Watch(request)
        try:
            await until(run, lambda: run.admitted, deadline, watch, host)
            _raise_failure(run)
            if ask.stream:
                return StreamingResponse(stream(run, deadline), media_type="text/event-stream",
                                         headers={"X-Request-Id": run.id})
            await until(run, lambda: run.finished, deadline, watch, host)
            _raise_failure(run)
        except Gone:
            hub().cancel(run)
            return Response(status_code=499)  # nobody reads it; the access log shows why
        except TimeoutError:
            hub().cancel(run)
            raise HttpError(504, _timeout_line(config), "timeout", "request_timeout") from None
        except EngineStopped:
            raise HttpError(503, host.stopped_line, "server_error") from None
        except BaseException:
            hub().cancel(run)
            raise
        finally:
            if watch is not None:
                watch.stop()
        eos = server.engine.eos_id
        return JSONResponse(response(ask, run.id, server.model_id, run.created,
                                     [run.choice(c, eos) for c in run.chains], run.prompt_tokens),
                            headers={"X-Request-Id": run.id})

    def _raise_failure(run: RequestRun) -> None:
        failure = run.failure()
        if failure is not None:
            kind, message = failure
            raise HttpError(STATUS_OF_KIND.get(kind, 500), message,
                            "invalid_request_error" if kind == "input" else f"{kind}_error")
        if server.stopping and any(c.status == "cancelled" for c in run.chains):
            raise HttpError(503, STOPPING, "server_error", "server_stopping")

    async def stream(run: RequestRun, deadline: float | None):
        ask, model, created = run.ask, server.model_id, run.created
        eos = server.engine.eos_id
        sent: set[int] = set()
        completion_tokens = 0
        try:
            if ask.kind == CHAT:
                for c in run.chains:
                    yield _sse(chunk(ask, run.id, model, created, c.index, first=True))
            else:
                yield b": admitted\n\n"
            noted = time.monotonic()
            while True:
                for c in run.chains:
                    if c.end is not None and c.index not in sent:
                        sent.add(c.index)
                        ch = run.choice(c, eos)
                        if ch.finish_reason == "error":
                            kind, message = run.failure() or ("internal", "the chain failed")
                            yield _sse(error_object(visible(message, keep_newlines=False), f"{kind}_error"))
                            continue
                        completion_tokens += ch.completion_tokens
                        yield _sse(chunk(ask, run.id, model, created, c.index, text=ch.text,
                                         finish_reason=ch.finish_reason, presto={"session_id": c.session_id,
                                                                                  **ch.presto}))
                if run.finished:
                    if server.stopping and any(c.status == "cancelled" for c in run.chains):
                        yield _sse(error_object(STOPPING, "server_error", "server_stopping"))
                    break
                try:
                    left = None if deadline is None else deadline - asyncio.get_running_loop().time()
                    await until(run, lambda: run.finished or any(
                        c.end is not None and c.index not in sent for c in run.chains),
                        None if left is None else asyncio.get_running_loop().time() + min(left, PROGRESS_EVERY_S))
                except TimeoutError:
                    if deadline is not None and asyncio.get_running_loop().time() >= deadline:
                        hub().cancel(run)
                        yield _sse(error_object(_timeout_line(config), "timeout", "request_timeout"))
                        break
                if time.monotonic() - noted >= PROGRESS_EVERY_S:  # keeps proxies from closing a quiet stream
                    noted = time.monotonic()
                    yield f": {run.transitions} transitions\n\n".encode()
            if ask.include_usage:
                yield _sse(usage_chunk(ask, run.id, model, created, run.prompt_tokens, completion_tokens))
            yield b"data: [DONE]\n\n"
        finally:
            if not run.finished:
                hub().cancel(run)  # the client went away (or the server stops): its chains end

    @app.get("/v1/presto/events")
    async def events(request: Request) -> StreamingResponse:
        rid = request.query_params.get("request")
        tenant = tenant_of(request)
        try:
            listener = hub().listen(rid, tenant, request.query_params.get("tenant"))
        except KeyError:
            raise HttpError(404, f"no request {shown_id(rid)} on this server (finished requests are kept "
                            f"for a while: the last {config.keep})", code="not_found") from None
        except Busy as e:
            raise HttpError(429, str(e), "rate_limit_error", "too_many_event_streams",
                            {"Retry-After": str(e.retry_after)}) from None

        async def lines():
            try:
                yield b": presto-tui events\n\n"
                while (data := await listener.next(KEEPALIVE_S)) is not None:
                    yield data or b": keep-alive\n\n"
            finally:
                hub().unlisten(listener)

        return StreamingResponse(lines(), media_type="text/event-stream")

    @app.post("/v1/presto/requests/{rid}/cancel")
    async def cancel(request: Request, rid: str) -> dict:
        tenant = tenant_of(request)
        of = request.query_params.get("tenant") if tenant.admin else None
        run = hub().find(rid, of if of is not None else tenant.name)
        if run is None:  # (another tenant's request is not there, as far as this key can tell)
            raise HttpError(404, f"no request {shown_id(rid)} on this server", code="not_found")
        open_chains = [c for c in run.chains if c.end is None]
        hub().cancel(run)
        # the answer says what the cancel stopped: it waits (a bounded while) for the engine thread to end the
        # chains, so that a chain that finished meanwhile is not reported cancelled
        loop = asyncio.get_running_loop()
        with contextlib.suppress(TimeoutError):
            await until(run, lambda: all(c.end is not None for c in open_chains), loop.time() + CANCEL_WAIT_S)
        return {"id": rid,
                "cancelled": [c.index for c in open_chains if c.end is not None and c.status == "cancelled"],
                "finished": [c.index for c in run.chains if c.end is not None and c.status != "cancelled"],
                "running": [c.index for c in open_chains if c.end is None]}

    return app


_sse = sse


def shown_id(rid: str | None) -> str:
    """A request id as a message quotes it: its repr, control characters escaped once (a %00 reads '\\x00')."""
    return visible(repr(str(rid)[:80]), keep_newlines=False)


def tenant_of(request: Request) -> Tenant:
    return request.scope.get(TENANT, ANYONE)


@dataclass(frozen=True)
class Spend:
    """What one request may take of the server, bounded before anything runs (`within_caps`): the engine
    requests and tokens its chains may issue in all (`cost`), the engine requests they keep live at once, and
    the bytes those hold."""

    cost: Cost
    live: int
    memory: int
    slots: int = 1  # engine slots each of its chains takes: a population's members (tempering's replicas)

    @property
    def tokens(self) -> int:
        return self.cost.tokens


# What a live engine request holds, per token: a prompt token once in its context (a list of ids, 8 bytes a
# slot, twice for the engine's copy), a new token its id and its three numbers (log p0, log q, entropy: a
# Python float and a list slot each) in the request and again in the proposal it ends as, and the chain's
# state.  Measured on the synthetic engine (about 150 bytes a new token); the margin covers the driver's
# bookkeeping.
BYTES_PER_PROMPT_TOKEN = 16
BYTES_PER_NEW_TOKEN = 256
PROMPT_OVERHEAD_TOKENS = 64  # a chat template's own tokens, about


def prompt_tokens_bound(prompt) -> int:
    """At most how many tokens a prompt encodes to, before it is tokenized: its token ids, or a byte of its
    text (and of its earlier turns) per token, as a byte-level tokenizer's every token holds at least one."""
    if prompt.ids is not None:
        return len(prompt.ids)
    text = len(prompt.text.encode()) + sum(len(u.encode()) + len(a.encode()) for u, a in prompt.history)
    return text + PROMPT_OVERHEAD_TOKENS * (1 + len(prompt.history))


def memory_bound(ask, live_each: int) -> int:
    """The bytes a request's live engine requests hold at most: each chain's `live_each` requests (and its
    own state) hold its prompt and up to max_tokens new tokens."""
    new = ask.params.max_new_tokens * BYTES_PER_NEW_TOKEN
    return sum((live_each + 1) * (prompt_tokens_bound(p) * BYTES_PER_PROMPT_TOKEN + new) * ask.n
               for p in ask.prompts)


def within_caps(ask, config: ServeConfig) -> Spend:
    """What one request may ask for: its steps and new tokens bound what it records and holds; the
    engine requests and tokens its chains may cost (its method's `cost` times its chains:
    rollouts x candidates x draws, particles, samples, a rule's budget) bound the engine's work; the
    requests they keep live at once (its method's `width` times its chains) and the memory those hold
    (`memory_bound`: its prompt and new tokens in every one) bound the engine's batch and the server's
    memory.  What it may spend, for its tenant's account."""
    p = ask.params
    for value, cap, name, flag in ((p.steps, config.max_steps, "steps", "--max-steps"),
                                   (p.max_new_tokens, config.max_tokens, "max_tokens", "--max-tokens")):
        if value > cap:
            raise InputError(f"{name} {value} is over this server's limit of {cap} (presto-tui serve {flag})")
    method = p.method
    slots = method.member_count(p) if method.population else 1
    most = config.max_chains - (tenant_reserve(config.max_chains) if config.tenant_count() > 1 else 0)
    if slots > most:  # each member is an MH chain on the engine, as a chain of --max-chains is
        raise FieldError(f"this request runs {slots} chains on the engine at once ({sampler_of(p)}'s members), over "
                         f"the {most} one request may run (presto-tui serve --max-chains {config.max_chains}"
                         f"{', less the share left to other tenants' if most < config.max_chains else ''}); ask "
                         "for fewer", _axis_field(p))
    cost = method.cost(p) * ask.chains
    chains = f"{ask.chains} chains" if ask.chains > 1 else "one chain"
    for value, cap, what, flag in ((cost.tokens, config.max_request_tokens, "tokens", "--max-request-tokens"),
                                   (cost.tokens, config.max_tenant_tokens, "tokens", "--max-tenant-tokens"),
                                   (cost.requests, config.max_engine_requests, "engine requests",
                                    "--max-engine-requests")):
        if value > cap:
            raise InputError(f"this request may cost up to {value} {what} ({chains} of its sampler's parameters), "
                             f"over this server's limit of {cap} (presto-tui serve {flag}); ask for fewer steps, "
                             "tokens, chains or a smaller sampler")
    each = max(1, method.width(p))  # (a population's: its members')
    live = each * ask.chains
    sampler, field = sampler_of(p), _axis_field(p)
    if live > config.max_live_requests:
        raise FieldError(f"this request keeps up to {live} engine requests live at once ({chains} of {sampler}), "
                         f"over this server's limit of {config.max_live_requests} (presto-tui serve "
                         f"--max-live-requests); ask for fewer chains or a smaller {field}", field)
    memory = memory_bound(ask, each)
    if memory > config.max_request_memory:
        raise FieldError(f"this request's live engine requests may hold up to {_mib(memory)} ({live} of them, each "
                         f"with its prompt of up to {max(map(prompt_tokens_bound, ask.prompts))} tokens and "
                         f"max_tokens {p.max_new_tokens} new ones), over this server's limit of "
                         f"{_mib(config.max_request_memory)} (presto-tui serve --max-request-memory); send a shorter "
                         f"prompt, or ask for fewer tokens, chains or a smaller {field}",
                         "prompt" if 2 * _prompt_share(ask, each) > memory else field)
    return Spend(cost, live, memory, slots)


def sampler_of(p) -> str:
    return p.method.describe(p.to_dict())


def _axis_field(p) -> str:
    """The field of a request's method that sizes it most (SPS's rollouts, best-of-N's samples, tempering's
    replicas), where a message says what to lower."""
    method = p.method
    for name in (*(m for m in ("pt_replicas", "particles") if m in method.own),
                 *((method.axis.param,) if method.axis is not None and method.axis.param in method.own else ())):
        return field_naming(name)
    return "n"


def _prompt_share(ask, live_each: int) -> int:
    return sum((live_each + 1) * prompt_tokens_bound(p) * BYTES_PER_PROMPT_TOKEN * ask.n for p in ask.prompts)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"


def _timeout_line(config: ServeConfig) -> str:
    return (f"the request ran past the server's timeout of {config.request_timeout:g} s (--request-timeout); "
            "its chains were cancelled")


__all__ = ["HttpError", "ServeConfig", "Server", "create_app"]
