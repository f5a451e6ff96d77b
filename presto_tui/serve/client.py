"""The app's worker side on a remote `presto-tui serve` (`presto-tui chat --connect URL`).

`RemoteChatSession` has `ChatSession`'s interface (runtime/session/chat.py), so
the app drives it the same way: each prompt goes to the server as a chat
completion (the chat so far, the prompt, the sampler's parameters as extra
fields, a request id of its own), and what the app draws comes from the
server's event stream for that request, decoded through the trace's gate,
token text first.  The session is recorded in a local trace as well, from the
same events.  A connection lost midway ends the session with one `error` line
(in the app and the local trace) and keeps everything received before it.

The chain runs on the server: Escape asks the server to cancel it; pausing is
not available.  A server stopped midway (Ctrl-C) cancels the chains and says so
in the answer's stream: the session ends `cancelled` and one notice says that the
server stopped.  Every prompt asks the server for its defaults anew: where a
restarted server has others, the parameters the app took from the old defaults
take the new ones (those the person chose stay), with one notice, and the app holds
and shows them from then on (`ParamsChanged`).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

import orjson

from presto_tui.api.diagnostics import vote
from presto_tui.api.events import Event, SessionEnd, SessionError, SessionStart
from presto_tui.api.params import SAMPLER_PARAMS, SamplerParams, budget_text
from presto_tui.api.sessions import EngineReady, Notice, ParamsChanged, VocabUpdate, deliver
from presto_tui.errors import EngineError, InputError, describe
from presto_tui.logs.schema import SchemaError
from presto_tui.safetext import visible
from presto_tui.serve.protocol import methods_read
from presto_tui.serve.wire import DROPPED, VOCAB, decode_event, decode_vocab

Emit = Callable[[object], None]
CONNECT_S, READ_S = 10.0, 60.0  # the event stream sends a keep-alive line every 15 s: 60 s of silence is a loss
def check_url(url: str) -> str:
    """The server's base URL (scheme, host, port), or one line saying what is wrong with it."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"--connect takes the server's URL, e.g. http://127.0.0.1:8000, got {visible(url)!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):  # the OpenAI clients' base URL names /v1 too
        path = path[:-3]
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass
class RemoteEngine:
    """What the trace writer needs of an engine, for an engine on the server."""

    name: str
    model: str
    info: dict
    pieces: dict[int, str] = field(default_factory=dict)

    def token_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.pieces.get(i, "") for i in ids]


def body_for(prompt: str, history: Sequence[tuple[str, str]], params: SamplerParams, rid: str,
             chains: int = 1) -> dict:
    """The chat completion a prompt becomes: the same chains `presto-tui chat` would run locally
    (choice j of n runs on the seed of chain j)."""
    messages: list[dict[str, str]] = []
    for user, assistant in history:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    messages.append({"role": "user", "content": prompt})
    return {"messages": messages, **request_fields(params), "n": chains, "stream": True, "request_id": rid}


def request_fields(params: SamplerParams) -> dict[str, Any]:
    """Every sampler parameter as its request field (the specification's names), as typed on the
    command line: the budget as -N writes it (auto, a cap, fill:N)."""
    ours = methods_read(params)  # (another method's field is refused)
    out = {p.request_field: getattr(params, p.name) for p in SAMPLER_PARAMS
           if p.request_field and getattr(params, p.name) is not None and (p.samplers is None or p.samplers & ours)}
    out["budget"] = budget_text(params.to_dict())
    return out


def error_line(response: Any) -> str:
    """The one line of an error answer (OpenAI's error object), or its status."""
    try:
        message = orjson.loads(response.read())["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except Exception:
        pass
    return f"HTTP {response.status_code}"


class RemoteChatSession:
    def __init__(self, url: str, *, api_key: str | None = None,
                 trace_opener: Callable[[Any, SamplerParams], Any] | None = None, transport: Any = None):
        import httpx

        self.url = check_url(url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, transport=transport,
                                  timeout=httpx.Timeout(CONNECT_S, read=READ_S))
        self._opener = trace_opener
        self.trace: Any = None
        self.history: list[tuple[str, str]] = []
        self.engine: RemoteEngine | None = None
        self._flags: dict[str, Any] | None = None
        self._base: dict[str, Any] | None = None  # the defaults the app's parameters were built from
        self._announced = False
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._rid: str | None = None
        self._emit: Emit = lambda item: None

    # -- the UI thread ------------------------------------------------------------------------
    def cancel(self) -> None:
        """Ask the server to end the running prompt (its session ends `cancelled`, as locally)."""
        self._cancel.set()
        rid = self._rid
        if rid is not None:  # off the UI thread: a slow server must not freeze the screen
            threading.Thread(target=self._post_cancel, args=(rid,), daemon=True).start()

    def pause(self) -> None:
        self._emit(Notice("input", "pausing is not available with --connect: the chain runs on the server"))

    def resume(self) -> None:
        pass

    @property
    def paused(self) -> bool:
        return False

    # -- the worker thread ----------------------------------------------------------------------
    def start_engine(self, model: str | None, emit: Emit) -> RemoteEngine | None:
        with self._lock:
            return self._connect(model, emit)

    def server_flags(self) -> dict[str, Any]:
        """The sampler flags the server was started with (its defaults), asking the server once;
        EngineError (one line) if it cannot be asked."""
        if self._flags is None:
            self.engine, self._flags = self._ask_models()
            self._base = self._flags
        return self._flags

    def _ask_models(self) -> tuple[RemoteEngine, dict[str, Any]]:
        """The server's engine and sampler flags, from GET /v1/models; EngineError (one line)."""
        try:
            r = self._http.get("/v1/models")
        except Exception as e:
            raise EngineError(f"cannot reach the server at {self.url} ({_reason(e)})") from None
        if r.status_code != 200:
            raise EngineError(f"{self.url}: {error_line(r)}")
        try:
            entry = r.json()["data"][0]
            presto = entry.get("presto", {})
            engine = RemoteEngine(str(presto.get("backend", "remote")), str(entry["id"]),
                                  {**presto.get("engine", {}), "server": self.url})
            return engine, dict(presto.get("flags", {}))
        except Exception:
            raise EngineError(f"{self.url} does not answer as a presto-tui serve (GET /v1/models)") from None

    def _current(self, params: SamplerParams, emit: Emit) -> SamplerParams | None:
        """`params` under the server's defaults as they are now (asked anew: a server restarted since
        may have others); None, with a notice, where the server cannot be asked or runs another model."""
        assert self.engine is not None
        try:
            engine, flags = self._ask_models()
        except EngineError as e:
            emit(Notice("engine", e.line))
            return None
        if engine.model != self.engine.model:
            emit(Notice("input", f"the server at {self.url} now runs {engine.model}; this chat's trace records "
                                 f"{self.engine.model}: start a new chat to sample it"))
            return None
        moved = rebased(params, self._base, flags) if self._base is not None else params
        if flags != self._flags:  # said once, when the server's defaults change
            self._flags = flags
            self._base = flags  # the app takes the moved parameters (ParamsChanged): they rest on these now
            if moved != params:
                said = ", ".join(f"{f.name.replace('_', ' ')} {getattr(params, f.name)} -> {getattr(moved, f.name)}"
                                 for f in fields(params) if getattr(params, f.name) != getattr(moved, f.name))
                emit(Notice("input", f"the server at {self.url} has other defaults now ({said}); the prompts "
                                     "take them where this chat had taken the old ones"))
                emit(ParamsChanged(moved))
        return moved

    def _connect(self, model: str | None, emit: Emit) -> RemoteEngine | None:
        """The server's engine (asked once); `model`: None, or the one the server runs."""
        self._emit = emit
        if self.engine is None:
            try:
                self.server_flags()
            except EngineError as e:
                emit(Notice("engine", e.line))
                return None
        assert self.engine is not None
        if not self._announced:  # the title reads "<backend> backend · model <model> at <host:port>"
            self._announced = True
            emit(EngineReady(self.engine.name, f"{self.engine.model} at {urlsplit(self.url).netloc}"))
        if model is not None and model != self.engine.model:
            emit(Notice("input", f"the server at {self.url} runs {self.engine.model}; its model is chosen where "
                                 "it starts (leave the model empty)"))
            return None
        return self.engine

    def run(self, prompt: str, params: SamplerParams, model: str | None, emit: Emit, chains: int = 1) -> None:
        """Sample one prompt on the server with `chains` chains (the completion's n); never raises
        (as `ChatSession.run`, whose events, ChainEvents where there are several chains, it emits)."""
        with self._lock:
            self._cancel.clear()
            engine = self._connect(model, emit)
            if engine is None:
                return
            current = self._current(params, emit)
            if current is None:
                return
            params = current
            if self.trace is None and self._opener is not None:
                try:
                    self.trace = self._opener(engine, params)
                except Exception as e:
                    emit(Notice(*describe(e)))
                    return
            rid = f"chat-{uuid.uuid4().hex[:20]}"
            answer = _Answer(self._http, body_for(prompt, self.history, params, rid, chains))
            answer.start()
            if not answer.admitted.wait(READ_S) or answer.error is not None:
                if answer.error is None:  # it may still be admitted: nobody would watch its chains
                    self._post_cancel(rid)
                emit(Notice(*(answer.error or ("engine", f"{self.url} did not answer within {READ_S:g} s"))))
                return
            self._rid = rid
            if self._cancel.is_set():  # Escape before the server knew the request
                self._post_cancel(rid)
            try:
                texts = self._follow(rid, chains, engine, emit)
            finally:
                self._rid = None
                answer.join(2.0)
            if answer.stopped and not self._cancel.is_set():
                # its chains ended `cancelled` without Escape: say why, once
                emit(Notice("engine", f"the server at {self.url} stopped before the answer was ready (its chains were "
                                      "cancelled); kept what was received"))
            majority = vote([texts[m] for m in sorted(texts)]).majority
            if majority is not None:  # the conversation goes on from the answer most chains agree on
                self.history.append((prompt, majority.answer))

    def _follow(self, rid: str, chains: int, engine: RemoteEngine, emit: Emit) -> dict[int, str]:
        """Every event of the request, as the server sends them, until its sessions end; the texts of
        the chains that finished, by chain."""
        sids: dict[int, str] = {}  # chains that started
        ended: set[int] = set()
        texts: dict[int, str] = {}
        reason: str | None = None  # None: the server closed the event stream
        try:
            with self._http.stream("GET", "/v1/presto/events", params={"request": rid}) as r:
                if r.status_code != 200:
                    emit(Notice("engine", f"{self.url}: {error_line(r)}"))
                    return texts
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue  # keep-alive comments and blank separators
                    obj = orjson.loads(line[6:])
                    if isinstance(obj, dict) and obj.get("type") == DROPPED:  # the server's last word
                        reason = visible(str(obj.get("reason", "dropped by the server")), keep_newlines=False)
                        break
                    if isinstance(obj, dict) and obj.get("type") == VOCAB:
                        new = decode_vocab(obj)
                        engine.pieces.update(new)
                        emit(VocabUpdate(new))
                        continue
                    ev = decode_event(obj)
                    m = obj.get("choice", 0) if isinstance(obj.get("choice"), int) else 0
                    if isinstance(ev, SessionStart):
                        sids[m] = ev.session_id
                    self._record(ev, emit, m if chains > 1 else None, sids.get(m))
                    if isinstance(ev, SessionEnd) and ev.reason == "done":
                        texts[m] = ev.text
                    if isinstance(ev, (SessionEnd, SessionError)):
                        ended.add(m)
                        if len(ended) == chains:
                            return texts
        except SchemaError as e:
            reason = f"the server sent an event this presto-tui cannot read: {e}"
        except Exception as e:
            reason = _reason(e)
        open_chains = [m for m in sorted(sids) if m not in ended]
        if reason is None and self._cancel.is_set() and not open_chains:
            return texts  # cancelled while it waited for a slot: the server withdrew it, nothing was lost
        self._post_cancel(rid)  # the chains would run on with nobody watching (if the server can hear us)
        lost = (f"lost the connection to {self.url} ({reason or 'the server closed the event stream'}); kept what "
                "was received")
        for m in open_chains:
            self._record(SessionError(lost, "engine"), emit, m if chains > 1 else None, sids[m])
        if not open_chains:
            emit(Notice("engine", lost))
        return texts

    def _record(self, ev: Event, emit: Emit, chain: int | None = None, sid: str | None = None) -> None:
        self.trace = deliver(self.trace, ev, emit, chain, sid)  # (the writer skips transient events)

    def _post_cancel(self, rid: str) -> None:
        with contextlib.suppress(Exception):  # the event stream says what happened to the session
            self._http.post(f"/v1/presto/requests/{rid}/cancel")

    def close(self) -> None:
        """After the worker has stopped: close the local trace (ending a session left open)."""
        with self._lock:
            if self.trace is not None:
                engine = self.engine
                self.trace.end_open_session("cancelled", lambda ids: "".join(engine.token_pieces(ids)) if engine
                                            else "")
                self.trace.close()
            self._http.close()


class _Answer(threading.Thread):
    """The completion request that keeps the chain alive on the server; read to its end.  `admitted`
    is set once the server has taken the request (or refused it: `error`)."""

    def __init__(self, http: Any, body: dict):
        super().__init__(daemon=True, name="presto-answer")
        self.http, self.body = http, body
        self.admitted = threading.Event()
        self.error: tuple[str, str] | None = None
        self.stopped = False  # the server said it stopped before the answer was ready

    def run(self) -> None:
        try:
            with self.http.stream("POST", "/v1/chat/completions", json=self.body) as r:
                if r.status_code != 200:
                    self.error = ("input" if r.status_code == 400 else "engine", f"server: {error_line(r)}")
                    return
                self.admitted.set()
                for line in r.iter_lines():
                    if line.startswith("data: {") and '"server_stopping"' in line:  # its error object's code
                        self.stopped = True
        except Exception as e:
            if not self.admitted.is_set():
                self.error = ("engine", f"cannot reach the server ({_reason(e)})")
        finally:
            self.admitted.set()


def rebased(params: SamplerParams, old: dict[str, Any], new: dict[str, Any]) -> SamplerParams:
    """`params`, built over the server defaults `old`, with every value it took from them replaced by
    the default in `new` (a value that differs from the old default was chosen here, and stays)."""
    from presto_tui.serve.protocol import CHAT, parse

    body = {"messages": [{"role": "user", "content": "-"}]}
    try:
        was, now = parse(body, CHAT, old).params, parse(body, CHAT, new).params
    except InputError:
        return params  # defaults this presto-tui cannot read: keep what the app has
    changes = {f.name: getattr(now, f.name) for f in fields(params)
               if getattr(params, f.name) == getattr(was, f.name) != getattr(now, f.name)}
    return params.with_(**changes).validate() if changes else params


def _reason(e: BaseException) -> str:
    return describe(e)[1]
