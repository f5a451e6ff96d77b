"""Listening: a socket bound before anything slow starts, and uvicorn on it (also in a thread).

uvicorn bounds neither the time a connection may take to send its headers nor the
number of connections held open: its `timeout_keep_alive` runs only between
requests (and any byte cancels it), and `limit_concurrency` answers 503 only once
a request's headers are complete, so a client that sends half a header line and
waits holds its connection for ever; nor the time a body may take once the answer
went out without reading it (a 401, a 413, `GET /health` with a body): uvicorn
reads and drops what comes for as long as it comes.  `guarded_protocol` is
uvicorn's own h11 protocol with the bounds a server open to strangers needs:

- the headers of a request within `read_timeout` of its first byte (or of the
  connection), else 408 and closed;
- its body, every byte the request declared, within `read_timeout` of its headers,
  whether the app reads it or the answer went out without it: else 408 (if no
  answer started) and closed;
- at most `max_connections` open: a connection beyond gets 503 and is closed at once;
- a client that reads less than STALL_BYTES of what the server writes in
  `read_timeout` is cut.  A slow reader that does read is not: the server's
  writes are counted as the kernel takes them, so a dropped event stream's
  last event (hub.py) reaches it whole.

h11's limit on an incomplete request's size (16 KiB) bounds what a half-sent
header holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator

from presto_tui.errors import InputError
from presto_tui.safetext import visible

GRACE_S = 3  # on Ctrl-C, after every chain has ended (Server.drain), answers get this long to finish
STALL_BYTES = 4096  # a client must take at least this much of what the server writes in --read-timeout


BODY_LATE = "presto.body_late"  # the scope's mark of a request answered 408 here, its body late


def _raw_error(status: str, message: str, extra: str = "", code: str | None = None) -> bytes:
    import orjson

    body = orjson.dumps({"error": {"message": message, "type": "server_error", "param": None, "code": code}})
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n{extra}"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


def body_late_line(read_timeout: float) -> str:
    return f"the request body did not arrive within {read_timeout:g} s (--read-timeout)"


def _unsent(sock) -> int:
    """Bytes the kernel holds for the socket that the client has not taken (0 where it cannot say)."""
    try:
        import fcntl
        import termios

        return int.from_bytes(fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4), sys.byteorder)
    except (ImportError, AttributeError, OSError, ValueError):
        return 0


def guarded_protocol(read_timeout: float | None, max_connections: int | None):
    """uvicorn's h11 protocol class with a deadline for headers, a cap on connections and a cut for
    clients that stop reading (see the module's text)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    full = _raw_error("503 Service Unavailable", f"the server holds {max_connections} connections already "
                      "(--max-connections); try again later", "retry-after: 1\r\n")
    late = _raw_error("408 Request Timeout", f"the request's headers did not arrive within {read_timeout:g} s "
                      "(--read-timeout)") if read_timeout else b""
    body_late = _raw_error("408 Request Timeout", body_late_line(read_timeout), code="request_timeout") \
        if read_timeout else b""

    class Guarded(H11Protocol):
        stopping = False  # set when the server stops: a client that does not read is cut at once

        def connection_made(self, transport) -> None:
            self._headers_due: asyncio.TimerHandle | None = None
            self._body_due: asyncio.TimerHandle | None = None
            self._stalled: asyncio.TimerHandle | None = None
            self._pending = 0  # what the client had not taken when the stall check was last armed
            super().connection_made(transport)
            if max_connections is not None and len(self.connections) > max_connections:
                transport.write(full)
                transport.close()
                return
            self._expect_headers()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.transport.is_closing():
                return
            state = self.conn.their_state
            if state is h11.IDLE:  # a request begun (or none yet): its headers are due
                self._expect_headers()
                return
            self._cancel("_headers_due")
            if state is h11.SEND_BODY:  # the headers are in: the body is due, read or not
                self._expect_body()
            else:
                self._cancel("_body_due")

        def connection_lost(self, exc: Exception | None) -> None:
            for timer in ("_headers_due", "_body_due", "_stalled"):
                self._cancel(timer)
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            super().pause_writing()
            if Guarded.stopping:
                self.transport.abort()
            elif read_timeout and self._stalled is None:
                self._arm_stall()

        def resume_writing(self) -> None:
            super().resume_writing()
            self._cancel("_stalled")

        def _pending_bytes(self) -> int:
            return self.transport.get_write_buffer_size() + _unsent(self.transport.get_extra_info("socket"))

        def _arm_stall(self) -> None:
            self._pending = self._pending_bytes()
            self._stalled = self.loop.call_later(read_timeout or 0, self._check_stall)

        def _check_stall(self) -> None:
            """Paused writing for read_timeout: a client that took less than STALL_BYTES meanwhile is cut;
            one that reads, however slowly, has its next read_timeout."""
            self._stalled = None
            if self.transport.is_closing():
                return
            if self._pending - self._pending_bytes() < STALL_BYTES:
                self.transport.abort()
            elif self.flow.write_paused:
                self._arm_stall()

        def _expect_headers(self) -> None:
            if read_timeout and self._headers_due is None:
                self._headers_due = self.loop.call_later(read_timeout, self._headers_late)

        def _headers_late(self) -> None:
            self._headers_due = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.write(late)
                self.transport.close()

        def _expect_body(self) -> None:
            if read_timeout and self._body_due is None:
                self._body_due = self.loop.call_later(read_timeout, self._body_late)

        def _body_late(self) -> None:
            """The body is not all there in time: 408 if no answer started, and the connection closes (the
            app's `receive` says the client is gone; what it writes then goes nowhere)."""
            self._body_due = None
            if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                if not cycle.response_started:
                    self.transport.write(body_late)
                    cycle.scope[BODY_LATE] = True  # type: ignore[literal-required]  # (what the app counts it as)
                cycle.disconnected = True
                cycle.message_event.set()
            self.transport.close()

        def _cancel(self, name: str) -> None:
            timer = getattr(self, name, None)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

    return Guarded


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free one), or one line saying why not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as e:
        raise InputError(f"--host {visible(host)!r} is not an address this machine can listen on ({e.strerror})") \
            from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise InputError(f"cannot listen on {visible(host)}:{port} ({e.strerror})") from None
    return sock


def uvicorn_server(app, grace_s: float = GRACE_S):
    """uvicorn on `app`; on shutdown the app first ends every chain (`Server.drain`), so that open
    answers and event streams end on their own instead of being cut (uvicorn logs a traceback
    for each answer it has to cut), and a client that does not read what is left is cut at once.
    SIGTERM stops it as SIGINT does; `stopped_by` says which signal did (uvicorn re-raises it
    after its shutdown: for SIGTERM that would kill the process before the trace's last line)."""
    import uvicorn

    presto = getattr(app.state, "presto", None)
    config = getattr(presto, "config", None)
    protocol = guarded_protocol(getattr(config, "read_timeout", None), getattr(config, "max_connections", None))

    class Draining(uvicorn.Server):
        stopped_by: int | None = None

        async def shutdown(self, sockets=None) -> None:
            protocol.stopping = True
            for conn in list(self.server_state.connections):  # nobody reads it: what is left cannot go
                flow = getattr(conn, "flow", None)
                if flow is not None and flow.write_paused:
                    conn.transport.abort()
            if presto is not None:
                await presto.drain()
            await super().shutdown(sockets)

        @contextlib.contextmanager
        def capture_signals(self):
            # uvicorn raises the signal it caught again once it has stopped, under the handler there was
            # before: for SIGTERM that kills the process before the trace's last line, and SIGINT inherited
            # as ignored (a script's background job) is lost, so the exit status said 0 for a Ctrl-C.  It
            # is said here instead (`stopped_by`), and the command exits as each signal means.
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, "_captured_signals", [])
                    for sig in (signal.SIGTERM, signal.SIGINT):
                        if sig in captured and self.stopped_by is None:
                            self.stopped_by = sig
                    captured[:] = [s for s in captured if s not in (signal.SIGTERM, signal.SIGINT)]

    return Draining(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=int(grace_s),
                                   http=protocol))


@contextlib.contextmanager
def in_thread(app, host: str = "127.0.0.1", port: int = 0, grace_s: float = 1) -> Iterator[tuple[str, object]]:
    """Serve `app` from a thread on a loopback port: (its base URL, the uvicorn server) (tests, benchmarks).
    Leaving the block stops it as Ctrl-C would."""
    sock = listen(host, port)
    server = uvicorn_server(app, grace_s)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="presto-http")
    thread.start()
    try:
        end = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > end:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        yield f"http://{host}:{sock.getsockname()[1]}", server
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
