"""The app in a browser: `presto-tui web` serves `chat` or `replay` through textual-serve.

textual-serve runs one app process per browser tab (a shell command it starts) and relays
its screen and keys over a websocket.  This module is the server's end: `serve`, started by
the `web` command once every option has been checked.  Each tab's process runs
`python -m presto_tui.webtab <command> ...` (webtab.py: the command line, drawn for the
browser).  textual-serve is an optional extra (`pip install 'presto-tui[web]'`), imported
only when a server starts.
"""

from __future__ import annotations

import errno
import shlex
import socket
import sys
from collections.abc import Sequence
from typing import Any

from presto_tui.errors import InputError
from presto_tui.safetext import visible

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def tab_command(argv: Sequence[str]) -> str:
    """The shell command each browser tab runs: this interpreter, this package, the checked arguments."""
    return shlex.join([sys.executable, "-m", "presto_tui.webtab", *argv])


def check_address(host: str, port: int) -> None:
    """Refuse a port outside 1..65535, a host that does not resolve, or an address that cannot
    be bound (in use, a privileged port), before the server starts."""
    if not 1 <= port <= 65535:
        raise InputError(f"--port must be a whole number in [1, 65535], got {port}")
    shown = visible(host, keep_newlines=False)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise InputError(f"--host {shown!r} does not resolve to an address ({_reason(e)})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        # the server binds with SO_REUSEADDR too: a port a closed server left in TIME_WAIT is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as e:
            what = "is in use" if e.errno == errno.EADDRINUSE else f"cannot be bound ({_reason(e)})"
            raise InputError(f"port {port} on {shown} {what}; choose another --port") from None


def check_public_url(url: str) -> str:
    """The URL the browser reaches the server at, without a trailing slash (textual-serve appends
    its paths, /ws and /static, to it)."""
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1].strip("/")) == 0:
        raise InputError(f"--public-url must start with http:// or https:// and name a host, got {url!r}")
    return url.rstrip("/")


def _reason(e: OSError | UnicodeError) -> str:
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


def serve(argv: Sequence[str], *, host: str, port: int, public_url: str | None, title: str,
          debug: bool = False) -> None:
    """Serve `presto-tui <argv>` (checked already) until Ctrl-C or SIGTERM."""
    import asyncio  # (here: `presto-tui --help` imports this module, and should stay instant)
    import contextlib
    import logging

    try:
        from aiohttp import web
        from textual_serve.app_service import AppService
        from textual_serve.server import Server, to_int
    except ImportError:
        raise InputError("presto-tui web needs textual-serve: pip install 'presto-tui[web]'") from None

    class TabService(AppService):
        """textual-serve's app process, read to its end after its browser tab has gone.

        textual-serve stops reading a tab's process at the first frame it cannot send to a closed
        tab, which a running app sends at once: the process's last lines (where its trace went)
        then never reach the server's output, and a process with more to write blocks on a full
        pipe.  Here a frame for a closed tab is dropped, and the process is read until it ends."""

        async def on_data(self, payload: bytes) -> None:
            with contextlib.suppress(ConnectionResetError):
                await super().on_data(payload)

        async def on_meta(self, data: bytes) -> None:
            with contextlib.suppress(ConnectionResetError):
                await super().on_meta(data)

        async def stop(self) -> None:
            await super().stop()
            sys.stdout.flush()  # (the process's stderr, relayed by textual-serve, without a flush)

    class WebServer(Server):
        """textual-serve's server with presto-tui's own start-up line and quiet logs."""

        def initialize_logging(self) -> None:
            # warnings and errors only (an app that failed to start); not a line per request
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("presto-tui web: %(message)s"))
            for name in ("textual-serve", "aiohttp"):
                logger = logging.getLogger(name)
                logger.handlers[:] = [handler]
                logger.setLevel(logging.DEBUG if debug else logging.WARNING)
                logger.propagate = False

        tabs: set[asyncio.Task] = set()

        async def handle_websocket(self, request: Any) -> Any:
            # textual-serve 1.1.3's handler, with a TabService for its AppService (and the tab's
            # task kept, for on_shutdown)
            task = asyncio.current_task()
            assert task is not None
            self.tabs.add(task)
            websocket = web.WebSocketResponse(heartbeat=15)
            width, height = (to_int(request.query.get(k, str(d)), d) for k, d in (("width", 80), ("height", 24)))
            tab: TabService | None = None
            try:
                await websocket.prepare(request)
                tab = TabService(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                 close=websocket.close,  # type: ignore[arg-type]  # (its bool is unread)
                                 download_manager=self.download_manager, debug=self.debug)
                await tab.start(width, height)
                await self._process_messages(websocket, tab)
            except asyncio.CancelledError:
                await websocket.close()
            except Exception as error:
                logging.getLogger("textual-serve").exception(error)
            finally:
                if tab is not None:
                    await tab.stop()
                self.tabs.discard(task)
            return websocket

        async def on_shutdown(self, app: Any) -> None:
            # Stop every tab before the server lets go of its connections: cancelled, a tab's handler
            # asks its app to quit and waits for the process to end, so a running session ends
            # `cancelled` in its trace instead of dying with the server.
            for task in self.tabs:
                task.cancel()
            await asyncio.gather(*self.tabs, return_exceptions=True)

        async def on_startup(self, app: Any) -> None:
            print(f"presto-tui: serving {title} at {self.public_url}", flush=True)
            print("presto-tui: open it in a browser (each tab runs its own app); Ctrl-C stops the server",
                  file=sys.stderr, flush=True)

    server = WebServer(tab_command(argv), host=host, port=port, title=title, public_url=public_url)
    # textual-serve takes the current event loop; give it a fresh one (there is none in the main
    # thread on newer Pythons, and a previous one may be closed)
    asyncio.set_event_loop(asyncio.new_event_loop())
    try:
        server.serve(debug=False)
    finally:
        asyncio.get_event_loop().close()
