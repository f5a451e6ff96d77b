"""The Textual app: `presto-tui chat` (live) and `presto-tui replay` (from a trace).

Both modes fold events into one `AppState` and draw the same widgets.  In
chat mode a thread worker runs the sampler and only posts events to the app
(`SessionEvent`); it polls a cancel flag after every round and blocks there
while paused, so cancel and pause take effect within one round.
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Header, Input, Static
from textual.worker import Worker, WorkerState

from presto_tui.runtime.events import Event, RoundDone, SessionEnd, SessionError, SessionStart
from presto_tui.runtime.params import SamplerParams
from presto_tui.safetext import visible
from presto_tui.views.screens import HelpScreen, SettingsScreen
from presto_tui.views.state import AppState, Pieces
from presto_tui.views.widgets import Inspector, RoundTreeView, StatsPanel, TreeTitle

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # replay rounds per second


class SessionEvent(Message):
    """A runtime event, posted from the sampler's thread."""

    def __init__(self, event: Event) -> None:
        self.event = event
        super().__init__()


class PrestoApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "presto-tui"

    BINDINGS = [  # tree navigation keys: RoundTreeView.BINDINGS
        Binding("left_square_bracket", "round(-1)", "prev round"),
        Binding("right_square_bracket", "round(1)", "next round"),
        Binding("f", "toggle_view", "full/rounded"),
        Binding("plus,equals_sign", "reach(0.1)", "more", show=False),
        Binding("minus", "reach(10)", "fewer", show=False),
        Binding("question_mark,f1", "help", "help"),
        Binding("ctrl+q", "quit", "quit"),
    ]

    def __init__(self, *, mode: str, pieces: Pieces, events: Sequence[Event] = (),
                 params: SamplerParams | None = None, backend_factory: Callable | None = None,
                 model: str | None = None, classifier=None, trace_opener: Callable | None = None,
                 title: str = "", autoplay: bool = False, warnings: Sequence[str] = ()) -> None:
        super().__init__()
        self.startup_warnings = list(warnings)  # e.g. the reader's "truncated final line ignored"
        self.mode = mode  # "chat" or "replay"
        self.pieces = pieces
        self.state = AppState()
        self.cursor: tuple[int, int] | None = None  # (session, round) on screen
        self.follow = True  # chat: jump to each new round
        self.params = params or SamplerParams()
        self.backend_factory = backend_factory
        self.model = model
        self.classifier = classifier
        self.trace_opener = trace_opener
        self.trace = None
        self.backend = None
        self.history: list[tuple[str, str]] = []
        self._cancel = threading.Event()
        self._resume = threading.Event()
        self._resume.set()
        self._backend_lock = threading.Lock()
        self.running = False
        self.playing = autoplay
        self.speed_i = 2
        self._timer = None
        self.sub_title = title
        self._inspected: tuple | None = None  # (round, node) the inspector shows
        for ev in events:
            self.state.apply(ev)

    # -- layout ----------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield TreeTitle(id="tree-title")
                yield RoundTreeView(id="tree")
            with VerticalScroll(id="right"):
                yield StatsPanel(id="stats")
                yield Inspector(id="inspector")
        with VerticalScroll(id="output"):
            yield Static(id="output-text")
        if self.mode == "chat":
            yield Input(placeholder="Type a prompt and press Enter (? for help)", id="prompt")
        else:
            yield Static(id="timeline")
        yield Footer()

    def on_mount(self) -> None:
        if self.mode == "chat":
            self.bind("ctrl+s", "settings", description="settings")
            self.bind("escape", "cancel", description="cancel")
            self.bind("p", "pause", description="pause")
            self.bind("i,slash", "focus_prompt", description="prompt", show=False)
            self.query_one("#prompt", Input).focus()
            # start the engine now, so that it is warm by the time the first prompt is typed
            self.run_worker(self._ensure_backend, thread=True, exit_on_error=False, group="engine")
        else:
            self.bind("space", "play", description="play/pause")
            self.bind("less_than_sign", "speed(-1)", description="slower")
            self.bind("greater_than_sign", "speed(1)", description="faster")
            self.query_one("#tree", RoundTreeView).focus()
            if self.state.all_rounds():
                self.cursor = self.state.all_rounds()[0]
            if self.playing:
                self._start_timer()
        for w in self.startup_warnings:
            self.notify(visible(w, keep_newlines=False), severity="warning", timeout=10)
        self.redraw()

    # -- drawing ---------------------------------------------------------------
    def current_round(self) -> RoundDone | None:
        if self.cursor is None:
            return None
        s, r = self.cursor
        return self.state.sessions[s].rounds[r]

    def redraw(self, keep_selection: bool = False) -> None:
        tree_view = self.query_one("#tree", RoundTreeView)
        rd = self.current_round()
        with self.batch_update():  # one screen update for the tree and every panel
            tree_view.show(rd.tree if rd else None, keep_selection=keep_selection)
            self._draw_panels()
            self._draw_inspector()

    def _draw_panels(self) -> None:
        tree_view = self.query_one("#tree", RoundTreeView)
        live = self.mode == "chat" and self.follow
        session = self.state.current if live or not self.cursor else self.state.sessions[self.cursor[0]]
        # replay shows the numbers as they stood at the round on screen; chat shows them live
        upto = None if live or not self.cursor else self.cursor[1]
        self.query_one("#stats", StatsPanel).show(session, upto)
        self.query_one("#tree-title", TreeTitle).show(self._where(), tree_view)
        self.query_one("#output-text", Static).update(self._output_text(session))
        if self.mode == "replay":
            self.query_one("#timeline", Static).update(self._timeline(), layout=False)  # one fixed line

    def _where(self) -> str:
        timeline = self.state.all_rounds()
        if self.cursor is None:
            return "no rounds yet"
        idx = timeline.index(self.cursor) + 1
        rd = self.current_round()
        return (f"round {idx}/{len(timeline)} (session {self.cursor[0] + 1}, block {rd.block + 1}, "
                f"k {rd.k_before}->{rd.k_after}, {rd.tree.rule}/{rd.tree.inputs})")

    def _output_text(self, session) -> Text:
        if session is None:
            return Text("the chain's current state appears here", style="dim")
        t = Text()
        t.append("> " + visible(session.start.prompt) + "\n", style="bold")
        tokens = list(session.tokens)
        rd = self.current_round()
        if self.mode == "replay" and rd is not None:
            tokens = list(rd.tree.final_state.tokens)
        # the chain always runs to the horizon; people read the answer up to its first EOS
        eos = session.start.backend_info.get("eos_id")
        after = 0
        if eos is not None and eos in tokens:
            after = len(tokens) - tokens.index(eos)
            tokens = tokens[: tokens.index(eos)]
        t.append(visible("".join(self.pieces(tokens))))
        if after:
            t.append(f"  [EOS; {after} more tokens in the state]", style="dim")
        return t

    def _timeline(self) -> Text:
        timeline = self.state.all_rounds()
        if not timeline or self.cursor is None:
            return Text("empty trace")
        width = max(10, self.size.width - 40)
        pos = timeline.index(self.cursor)
        filled = int(width * (pos + 1) / len(timeline))
        t = Text("▶ " if self.playing else "⏸ ")
        t.append("█" * filled, style="bold")
        t.append("░" * (width - filled), style="dim")
        t.append(f" {pos + 1}/{len(timeline)}  {SPEEDS[self.speed_i]:g} rounds/s")
        return t

    def on_round_tree_view_node_selected(self, message: RoundTreeView.NodeSelected) -> None:
        self._draw_inspector()

    def _draw_inspector(self) -> None:
        tv = self._tree()
        rd = self.current_round()
        node = rd.tree.node(tv.selected) if rd else None
        shown = (id(rd), tv.selected)
        if self._inspected == shown:
            return  # already drawn (redraw draws at once; the message arrives after)
        self._inspected = shown
        self.query_one("#inspector", Inspector).show(rd.tree if rd else None, node, self.pieces)

    # -- navigation --------------------------------------------------------------
    def _tree(self) -> RoundTreeView:
        return self.query_one("#tree", RoundTreeView)

    def action_parent(self) -> None:
        tv = self._tree()
        if tv.selected > 0:
            tv.select((tv.selected - 1) // 2)

    def action_child(self, accept: bool) -> None:
        tv = self._tree()
        tv.select(2 * tv.selected + (1 if accept else 2))

    def action_path_child(self) -> None:
        tv = self._tree()
        for child in (2 * tv.selected + 1, 2 * tv.selected + 2):
            if tv.round_tree and tv.round_tree.node(child) and tv.round_tree.node(child).on_path:
                tv.select(child)
                return
        self.action_child(True)

    def action_round(self, step: int) -> None:
        timeline = self.state.all_rounds()
        if not timeline or self.cursor is None:
            return
        i = max(0, min(len(timeline) - 1, timeline.index(self.cursor) + step))
        self.cursor = timeline[i]
        self.follow = i == len(timeline) - 1
        self.redraw()

    def action_round_to(self, index: int) -> None:
        timeline = self.state.all_rounds()
        if timeline:
            self.cursor = timeline[index]
            self.follow = self.cursor == timeline[-1]
            self.redraw()

    def action_toggle_view(self) -> None:
        tv = self._tree()
        tv.mode = "rounded" if tv.mode == "full" else "full"
        tv.relayout()
        self._draw_panels()

    def action_reach(self, factor: float) -> None:
        tv = self._tree()
        tv.min_reach = min(1.0, max(1e-12, tv.min_reach * factor))
        tv.relayout()
        self._draw_panels()
        self.notify(f"showing nodes with reach >= {tv.min_reach:.0e}", timeout=2)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    # -- replay ------------------------------------------------------------------
    def action_play(self) -> None:
        self.playing = not self.playing
        if self.playing:
            timeline = self.state.all_rounds()
            if timeline and self.cursor == timeline[-1]:
                self.cursor = timeline[0]
            self._start_timer()
        elif self._timer is not None:
            self._timer.stop()
        self._draw_panels()

    def action_speed(self, step: int) -> None:
        self.speed_i = max(0, min(len(SPEEDS) - 1, self.speed_i + step))
        if self.playing:
            self._start_timer()
        self._draw_panels()

    def _start_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(1.0 / SPEEDS[self.speed_i], self._tick)

    def _tick(self) -> None:
        timeline = self.state.all_rounds()
        if not timeline or self.cursor == timeline[-1]:
            self.playing = False
            if self._timer is not None:
                self._timer.stop()
            self._draw_panels()
            return
        self.action_round(1)

    # -- chat ----------------------------------------------------------------------
    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        if self.mode != "chat":
            return
        yield SystemCommand("Settings", "Sampler settings for the next prompt", self.action_settings)
        for rule in ("none", "bfs", "predictive", "spine"):
            yield SystemCommand(f"Prefetch rule: {rule}", "Use this rule from the next prompt",
                                lambda r=rule: self._set_params(prefetch=r))
        for n in (8, 12, 20, 64):
            yield SystemCommand(f"Budget: {n}", "Prefetch budget N from the next prompt",
                                lambda n=n: self._set_params(budget=n))
        yield SystemCommand("Toggle full / rounded tree", "Epsilon-rounded subtree", self.action_toggle_view)

    def _set_params(self, **changes) -> None:
        try:
            self.params = self.params.with_(**changes).validate()
        except ValueError as e:
            self.notify(str(e), severity="error")
            return
        self.notify(f"next prompt: {self.params.prefetch}, N={self.params.budget}", timeout=3)

    def action_settings(self) -> None:
        def done(result) -> None:
            if result is None:
                return
            params, model = result
            self.params = params
            if model != self.model:
                self.model, self.backend = model, None  # restarted on the next prompt
            self.notify("settings apply from the next prompt", timeout=3)

        self.push_screen(SettingsScreen(self.params, self.model), done)

    def action_focus_prompt(self) -> None:
        if self.mode == "chat":
            self.query_one("#prompt", Input).focus()

    def action_cancel(self) -> None:
        if self.running:
            self._cancel.set()
            self._resume.set()
            self.notify("cancelling after the current round", timeout=3)

    def action_pause(self) -> None:
        if not self.running:
            return
        if self._resume.is_set():
            self._resume.clear()
            self.notify("paused after the current round (p resumes)", timeout=3)
        else:
            self._resume.set()
            self.notify("resumed", timeout=2)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        prompt = event.value.strip()
        if not prompt:
            return
        if self.running:
            self.notify("a run is in progress: escape cancels it", severity="warning")
            return
        event.input.value = ""
        self.running = True
        self._cancel.clear()
        self._resume.set()
        self.follow = True
        self._tree().focus()
        self.sample(prompt, self.params, list(self.history))

    def _should_stop(self) -> bool:
        self._resume.wait()
        return self._cancel.is_set()

    def _ensure_backend(self):
        with self._backend_lock:
            if self.backend is None:
                self.call_from_thread(self.notify, "starting the engine...", timeout=5)
                self.backend = self.backend_factory(self.model)
                self.pieces = self.backend.token_pieces
                self.call_from_thread(self.notify, f"{self.backend.name} on {self.backend.model} is ready",
                                      timeout=3)
            return self.backend

    @work(thread=True, exclusive=True, exit_on_error=False, group="sampler")
    def sample(self, prompt: str, params: SamplerParams, history: list) -> None:
        from presto_tui.runtime.session import run_session

        backend = self._ensure_backend()
        if self.trace is None and self.trace_opener is not None:
            self.trace = self.trace_opener(backend, params)
        ids = backend.encode_prompt(prompt, history)
        for ev in run_session(backend, params, ids, prompt=prompt, classifier=self.classifier,
                              cancel=self._should_stop):
            if self.trace is not None:
                self.trace.write(ev)
            self.post_message(SessionEvent(ev))

    def on_session_event(self, message: SessionEvent) -> None:
        ev = message.event
        session = self.state.apply(ev)
        if isinstance(ev, SessionStart):
            self.follow = True
        if isinstance(ev, RoundDone) and self.follow:
            self.cursor = (len(self.state.sessions) - 1, len(session.rounds) - 1)
            self.redraw()
            return
        if isinstance(ev, SessionEnd) and ev.reason == "done" and session is not None:
            self.history.append((session.start.prompt, "".join(self.pieces(self._answer(ev.tokens)))))
        if isinstance(ev, SessionError):
            self.notify(visible(ev.message, keep_newlines=False), severity="error", timeout=8)
        self._draw_panels()

    def _answer(self, tokens: Sequence[int]) -> list[int]:
        eos = getattr(self.backend, "eos_id", None)
        toks = list(tokens)
        return toks[: toks.index(eos)] if eos is not None and eos in toks else toks

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "engine" and event.state == WorkerState.ERROR:
            err = event.worker.error
            self.notify(f"engine failed to start: {visible(str(err).splitlines()[0] if str(err) else type(err).__name__)}"
                        " (the next prompt tries again)", severity="error", timeout=15)
            return
        if event.worker.group != "sampler":
            return
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            self.running = False
            self._draw_panels()
        if event.state == WorkerState.ERROR:
            err = event.worker.error
            msg = str(err).splitlines()[0] if str(err) else type(err).__name__
            self.notify(f"run failed: {visible(msg, keep_newlines=False)}", severity="error", timeout=10)

    def on_unmount(self) -> None:
        self._cancel.set()
        self._resume.set()
        if self.trace is not None:
            self.trace.close()


def replay_app(trace, autoplay: bool = False) -> PrestoApp:
    """The replay app for a trace that the reader has already validated."""
    events = [e for s in trace.sessions for e in s.events]
    return PrestoApp(mode="replay", pieces=trace.pieces, events=events,
                     title=f"replay {trace.path.name}", autoplay=autoplay, warnings=trace.warnings)
