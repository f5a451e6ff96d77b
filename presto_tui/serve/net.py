"""Listening: a socket bound before anything slow starts, and uvicorn on it (also in a thread)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from presto_tui.errors import InputError
from presto_tui.safetext import visible

GRACE_S = 3  # on Ctrl-C, after every chain has ended (Server.drain), answers get this long to finish


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
    for each answer it has to cut)."""
    import uvicorn

    class Draining(uvicorn.Server):
        async def shutdown(self, sockets=None) -> None:
            presto = getattr(app.state, "presto", None)
            if presto is not None:
                await presto.drain()
            await super().shutdown(sockets)

    return Draining(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=int(grace_s)))


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
