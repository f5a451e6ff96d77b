"""`presto-tui web`: its checks before serving, the tabs' stdout, quitting from outside, and the
chat served to a real headless Chromium (typed into with the keyboard, checked in the trace)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import ScriptedEngine, error_line, wait_for, wait_until
from typer.testing import CliRunner

from presto_tui.cli import app as cli
from presto_tui.logs.reader import read_trace
from presto_tui.runtime.session.events import SessionEnd
from presto_tui.webtab import own_trace

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def web(*args: str):
    return runner.invoke(cli, ["web", *args])


def lines_of(path: Path) -> list[dict]:
    """The complete lines of a trace being written."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(ln) for ln in text[: text.rfind("\n") + 1].splitlines()]


# -- checked before the server starts -------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["--port", "0"], "--port must be a whole number in [1, 65535], got 0"),
    (["--port", "65536"], "got 65536"),
    (["--port", "eighty"], "--port must be a whole number, got 'eighty'"),
    (["--host", "no-such-host.invalid"], "--host 'no-such-host.invalid' does not resolve"),
    (["--public-url", "example.org"], "--public-url must start with http:// or https://"),
    (["--replay", "missing.jsonl"], "missing.jsonl: no such trace file"),
    (["--", "--alpha", "0"], "--alpha must lie in (0, 1000], got 0"),
    (["--", "--alpah", "2"], "unknown option --alpah for presto-tui chat; did you mean --alpha?"),
    (["--", "--backend", "nope"], "unknown --backend 'nope'"),
    (["--backend", "synthetic"], "--backend is an option of the served app: put it after --"),
    (["--prot", "8080"], "unknown option --prot for presto-tui web; did you mean --port?"),
])
def test_bad_input_is_one_line_and_exit_2_before_serving(args, needle):
    assert needle in error_line(web(*args))


def test_an_existing_trace_or_a_port_in_use_is_refused(tmp_path):
    taken = tmp_path / "taken.jsonl"
    taken.write_text("")
    assert "trace file exists already" in error_line(web("--", "--trace", str(taken)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert f"port {port} on 127.0.0.1 is in use; choose another --port" in error_line(
            web("--port", str(port), "--", "--backend", "synthetic"))


def test_replay_of_a_bad_trace_is_reported_as_replay_reports_it(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"not": "a header"}\n')
    assert error_line(web("--replay", str(bad))).startswith(f"{bad}:1:")


def test_without_textual_serve_it_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # None in sys.modules: the import fails
    monkeypatch.setitem(sys.modules, "textual_serve.server", None)
    line = error_line(web("--port", str(free_port()), "--replay", str(DATA / "replay.jsonl")))
    assert "needs textual-serve: pip install 'presto-tui[web]'" in line


def test_a_tab_records_beside_a_trace_an_earlier_tab_wrote(tmp_path):
    first = tmp_path / "my chat.jsonl"
    argv = ["--debug", "chat", "-n", "8", "--trace", str(first)]
    assert own_trace(argv) == argv  # the first tab: the trace as named
    first.write_text("")
    assert own_trace(argv) == [*argv[:-1], str(tmp_path / "my chat-2.jsonl")]
    (tmp_path / "my chat-2.jsonl").write_text("")
    assert own_trace(["chat", f"--trace={first}"]) == ["chat", f"--trace={tmp_path / 'my chat-3.jsonl'}"]
    assert own_trace(["chat", "--no-trace"]) == ["chat", "--no-trace"]


def test_a_tab_keeps_stdout_for_the_screen_and_sends_stray_output_to_stderr():
    code = ("import os, sys; from presto_tui.webtab import keep_stdout_for_the_browser as keep; keep(); "
            "print('stray line from a library'); sys.stdout.flush(); "
            "sys.__stdout__.write('screen'); sys.__stdout__.flush()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "screen"
    assert "stray line from a library" in done.stderr


async def test_the_app_told_to_quit_from_outside_ends_a_running_session_cancelled(tmp_path):
    """What a closed tab or a stopping server does: the web driver posts ExitApp (no ctrl+q)."""
    from textual.messages import ExitApp

    from presto_tui.logs.writer import TraceWriter
    from presto_tui.runtime.core.params import SamplerParams
    from presto_tui.runtime.session.chat import ChatSession
    from presto_tui.views.app import chat_app

    engine = ScriptedEngine(delay=0.05)
    path = tmp_path / "chat.jsonl"
    session = ChatSession(engine_factory=lambda model: engine, trace_opener=lambda e, p: TraceWriter(
        path, command="chat", backend=e.name, model=e.model, params=p.to_dict(), pieces=e.token_pieces))
    app = chat_app(session, SamplerParams(max_new_tokens=16, steps=10**6, prefetch="none"),
                   backend="synthetic", model=None)
    async with app.run_test(size=(100, 30)) as pilot:
        scr = app.screen
        scr.query_one("#prompt").focus()
        await pilot.press(*"the cat", "enter")
        await wait_until(pilot, lambda: scr.state.current and scr.state.current.rounds, timeout=30)
        assert scr.running
        app.post_message(ExitApp())
    # the app has closed; closing the session waits for its prompt to stop
    closing = threading.Thread(target=session.close, daemon=True)
    closing.start()
    closing.join(timeout=30)
    stopped = not closing.is_alive()
    session.cancel()  # (so that a failure below leaves nothing running)
    closing.join()
    assert stopped, "the app closed and its prompt ran on"
    (sess,) = read_trace(path).sessions
    assert isinstance(sess.events[-1], SessionEnd) and sess.events[-1].reason == "cancelled"


class Tab:
    """A browser tab's process as textual-serve starts it, its screen read from the framed packets
    on its stdout (b"D" + length + bytes), keys written to its stdin the same way."""

    def __init__(self, args: list[str]):
        # as textual-serve starts it (the driver it names is the one Textual ships)
        env = {**os.environ, "COLUMNS": "100", "ROWS": "30", "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver"}
        self.proc = subprocess.Popen([sys.executable, "-m", "presto_tui.webtab", *args], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.screen = b""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        if out.readline() != b"__GANGLION__\n":  # what a served app writes first
            return
        while header := out.read(5):
            payload = out.read(int.from_bytes(header[1:], "big"))
            if header[:1] == b"D":
                self.screen += payload

    def keys(self, text: str) -> None:
        data = text.encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"D" + len(data).to_bytes(4, "big") + data)
        self.proc.stdin.flush()


def test_a_tab_whose_server_is_gone_quits_and_ends_its_running_session(tmp_path):
    trace = tmp_path / "chat.jsonl"
    tab = Tab(["chat", "--backend", "synthetic", "-n", "16", "-K", "1000000", "--trace", str(trace)])
    try:
        wait_for(lambda: b"type a prompt below" in tab.screen, "the chat app")
        tab.keys("the cat\r")
        wait_for(lambda: any(e["type"] == "round" for e in lines_of(trace)), "the first round")
        assert tab.proc.stdin is not None
        tab.proc.stdin.close()  # the server went away without a word
        assert tab.proc.wait(timeout=120) == 0
    finally:
        if tab.proc.poll() is None:
            tab.proc.kill()
    (sess,) = read_trace(trace).sessions
    assert isinstance(sess.events[-1], SessionEnd) and sess.events[-1].reason == "cancelled"


# -- in a real browser ----------------------------------------------------------------------------------

SERVE_MISSING = (None if importlib.util.find_spec("textual_serve") else
                 "needs textual-serve: pip install -e '.[web]' (scripts/setup.sh --test installs it)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Chromium headless in a container without a network: no sandbox (root), no GPU, and none of the
# background connections (updates, sync, QUIC), whose failures otherwise come many at a time.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def browser_missing() -> str | None:
    if SERVE_MISSING:
        return SERVE_MISSING
    if importlib.util.find_spec("playwright") is None:
        return "needs the playwright Python package (scripts/setup.sh --test installs it)"
    if CHROMIUM is None:
        return ("needs Chromium: Debian's chromium package (scripts/setup.sh --test installs it when run as "
                "root with apt-get)")
    return None


needs_browser = pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")

# The page's terminal draws on a canvas: what the app wrote is read from the websocket instead,
# every byte the server relays, decoded, in window.__screen (the last 256 KiB).
RECORD_SCREEN = """
window.__screen = "";
const NativeWebSocket = window.WebSocket;
window.WebSocket = class extends NativeWebSocket {
  constructor(...args) {
    super(...args);
    const decoder = new TextDecoder();
    this.addEventListener("message", (e) => {
      if (typeof e.data !== "string") {
        window.__screen = (window.__screen + decoder.decode(e.data, {stream: true})).slice(-262144);
      }
    });
  }
};
"""


class Served:
    """`presto-tui web` in a process of its own, its output collected as it comes."""

    def __init__(self, args: list[str], cwd: Path):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "presto_tui", "web", "--port", str(self.port), *args], cwd=cwd,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, ls=lines: ls.extend(iter(s.readline, "")), daemon=True).start()
        self.url = wait_for(self._url, "the server's URL")

    def _url(self) -> str | None:
        for line in self.out:
            if line.startswith("presto-tui: serving ") and " at " in line:
                return line.rsplit(" at ", 1)[1].strip()
        assert self.proc.poll() is None, f"the server exited: {''.join(self.out + self.err)}"
        return None

    def stop(self) -> int:
        """Ctrl-C, as a person stops it; the exit code."""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own process group: the server and its tabs
            raise AssertionError(f"the server did not stop on Ctrl-C: {''.join(self.out + self.err)}") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)


needs_textual_serve = pytest.mark.skipif(SERVE_MISSING is not None, reason=SERVE_MISSING or "")


@needs_textual_serve
def test_a_tab_closed_mid_session_ends_it_cancelled_and_the_server_says_where_its_trace_went(tmp_path):
    """A tab closed while its app draws: textual-serve stopped reading the process at the first frame
    it could not send, so the tab's last line (where its trace went) never reached the server's output."""
    import aiohttp

    trace = tmp_path / "chat.jsonl"
    served = Served(["--", "--backend", "synthetic", "-n", "16", "-K", "1000000", "--trace", str(trace)], tmp_path)

    async def tab() -> None:  # what the page does: frames in, keys out as ["stdin", ...]
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(served.url.replace("http", "ws", 1) + "/ws?width=100&height=30")
            screen, typed = b"", False
            while sum(e["type"] == "round" for e in lines_of(trace)) < 20:
                msg = await asyncio.wait_for(ws.receive(), timeout=120)
                assert msg.type == aiohttp.WSMsgType.BINARY, f"the tab ended: {msg}"
                screen += msg.data
                if not typed and b"type a prompt below" in screen:
                    await ws.send_json(["stdin", "the cat\r"])
                    typed = True
            await ws.close()  # the tab closes while its app is drawing rounds

    try:
        asyncio.run(tab())
        wait_for(lambda: f"trace written to {trace}" in "".join(served.out), "the server to say where the trace went")
        assert served.stop() == 0
    finally:
        served.close()
    (sess,) = read_trace(trace).sessions
    assert isinstance(sess.events[-1], SessionEnd) and sess.events[-1].reason == "cancelled"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # a launch gets a new, empty profile (user data dir) of its own
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(RECORD_SCREEN)
    yield context.new_page()
    context.close()


def screen_shows(page, text: str) -> bool:
    return page.evaluate("(t) => window.__screen.includes(t)", text)


def type_prompt(page, served: Served, prompt: str) -> None:
    """Open the page, wait for the chat to draw its prompt, type `prompt` and Enter as a person would."""
    page.goto(served.url)
    wait_for(lambda: screen_shows(page, "type a prompt below"), "the chat app in the page")
    page.focus("textarea.xterm-helper-textarea")  # the terminal's keyboard input
    page.keyboard.type(prompt)
    page.keyboard.press("Enter")


@pytest.mark.slow
@needs_browser
def test_chat_in_a_browser_runs_the_typed_prompt_and_draws_its_tree(page, tmp_path):
    trace = tmp_path / "my traces" / "chat 1.jsonl"  # spaces: the tab's command line quotes it
    trace.parent.mkdir()
    served = Served(["--", "--backend", "synthetic", "-n", "48", "-K", "16", "--trace", str(trace)], tmp_path)
    try:
        type_prompt(page, served, "the cat sat")
        ended = wait_for(lambda: [e for e in lines_of(trace) if e["type"] == "session_end"], "session_end")
        events = lines_of(trace)
        (start,) = [e for e in events if e["type"] == "session_start"]
        assert start["prompt"] == "the cat sat" and ended[0]["sid"] == start["session_id"]
        assert ended[0]["reason"] == "done"
        rounds = [e for e in events if e["type"] == "round"]
        unit = "epoch" if start["params"]["prefetch"] == "stream" else "round"
        # the browser shows the session's last round: its tree, the realized path from the root
        wait_for(lambda: screen_shows(page, f"{unit} {len(rounds)}/{len(rounds)}"), "the last round on the page")
        wait_for(lambda: screen_shows(page, "#0 k"), "the tree's root")
        page.wait_for_timeout(300)  # (the picture only: the last frame painted on the canvas)
        shot = tmp_path / "web-chat.png"
        page.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
        if os.environ.get("PRESTO_TUI_WEB_SCREENSHOT"):  # to refresh the picture in docs/
            shutil.copy(shot, os.environ["PRESTO_TUI_WEB_SCREENSHOT"])
        page.close()  # the tab closes: its app quits, its process ends with its own last line
        wait_for(lambda: f"trace written to {trace}" in "".join(served.out), "the tab's process to end")
        # another tab, another app: the trace named is written, so it records beside it
        second = page.context.new_page()
        type_prompt(second, served, "a dog")
        beside = trace.with_name("chat 1-2.jsonl")
        wait_for(lambda: any(e["type"] == "session_end" for e in lines_of(beside)), "the second tab's session")
        assert [e["prompt"] for e in lines_of(beside) if e["type"] == "session_start"] == ["a dog"]
        assert served.stop() == 0
        assert "presto-tui: server stopped" in "".join(served.err)
    finally:
        served.close()
    (sess,) = read_trace(trace).sessions  # and the trace reads back whole
    assert sess.summary().status == "done" and len(sess.rounds) == len(rounds)


@pytest.mark.slow
@needs_browser
def test_ctrl_c_on_the_server_ends_a_running_session_cancelled(page, tmp_path):
    trace = tmp_path / "chat.jsonl"
    served = Served(["--", "--backend", "synthetic", "-n", "16", "-K", "1000000", "--trace", str(trace)], tmp_path)
    try:
        type_prompt(page, served, "a dog")
        wait_for(lambda: any(e["type"] == "round" for e in lines_of(trace)), "the first round")
        assert served.stop() == 0
    finally:
        served.close()
    (sess,) = read_trace(trace).sessions
    assert isinstance(sess.events[-1], SessionEnd) and sess.events[-1].reason == "cancelled"
    assert sess.rounds


@pytest.mark.slow
@needs_browser
def test_replay_in_a_browser_steps_rounds_with_the_keyboard(page, tmp_path):
    trace = read_trace(DATA / "replay.jsonl")
    n = len(trace.sessions[0].rounds)
    served = Served(["--replay", str(DATA / "replay.jsonl")], tmp_path)
    try:
        page.goto(served.url)
        wait_for(lambda: screen_shows(page, f"round 1/{n}"), "the replay's first round")
        page.focus("textarea.xterm-helper-textarea")
        page.keyboard.press("]")
        wait_for(lambda: screen_shows(page, f"round 2/{n}"), "the next round after ]")
        assert served.stop() == 0
    finally:
        served.close()


def test_listening_beyond_loopback_warns_that_anyone_can_run_the_app(tmp_path):
    served = Served(["--host", "0.0.0.0", "--replay", str(DATA / "replay.jsonl")], tmp_path)
    try:
        wait_for(lambda: any("warning: listening on 0.0.0.0" in ln for ln in served.err), "the warning", timeout=30)
        assert served.stop() == 0
    finally:
        served.close()
    local = Served(["--replay", str(DATA / "replay.jsonl")], tmp_path)
    try:
        assert local.stop() == 0
    finally:
        local.close()
    assert not any("warning" in ln for ln in local.err)
