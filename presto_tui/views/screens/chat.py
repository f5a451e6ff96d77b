"""`presto-tui chat`: prompts run by a `ChatSession` on a worker thread, drawn live.

The worker only runs `ChatSession` methods and posts what they emit
(`FromWorker`, safe from any thread); this screen folds the events into its
state and draws.  It never touches the engine or the trace: it asks the session
to cancel or pause, and the app closes the session after the worker stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from textual import on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from presto_tui.api.events import InFlight, LiveTree, RoundDone, SessionEnd, SessionError, SessionStart
from presto_tui.api.params import BackendName, PrefetchRule, SamplerParams, budget_text
from presto_tui.api.sessions import ChainEvent, EngineReady, Notice, ParamsChanged, VocabUpdate
from presto_tui.safetext import visible
from presto_tui.views.dialogs.settings import SettingsScreen
from presto_tui.views.screens.round import RoundScreen
from presto_tui.views.state import baseline_text as bt
from presto_tui.views.state.reducer import SessionView
from presto_tui.views.widgets.inputs import PromptInput
from presto_tui.views.widgets.stats import StatsPanel


class ChatWorker(Protocol):
    """What the screen asks of its worker side: a `ChatSession` on a local engine, or a remote one on
    a presto-tui serve (serve/client.py)."""

    def cancel(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    @property
    def paused(self) -> bool: ...

    def start_engine(self, model: str | None, emit: Callable[[object], None]) -> object: ...

    def run(self, prompt: str, params: SamplerParams, model: str | None, emit: Callable[[object], None],
            chains: int = 1) -> None: ...


class FromWorker(Message):
    """The chat session emitted something on the worker thread: drain the inbox."""


# fits an 80-column terminal; F1, not ?: a ? typed here is part of the prompt
PLACEHOLDER = "Enter runs the prompt · Tab moves to the tree, where keys act · F1 help"
FRAME_S = 0.1  # at most ten screen updates a second, however fast events arrive


def engine_title(backend: str, model: str | None) -> str:
    """The header's subtitle: the backend and the model it runs (the synthetic backend is its own model)."""
    shown = lambda s: visible(s, keep_newlines=False)
    if backend in BackendName.names() and BackendName.of(backend).builtin_model:
        return f"{backend} backend · {'model ' + shown(model) if model else 'its own tiny model'}"
    return f"{shown(backend)} backend · model {shown(model or 'smollm2-135m')}"


class ChatScreen(RoundScreen):
    BINDINGS = [
        Binding("ctrl+s", "settings", "settings"),
        Binding("escape", "cancel", "cancel"),
        Binding("p", "pause", "pause"),
        Binding("i", "focus_prompt", "prompt", show=False),
    ]

    def __init__(self, session: ChatWorker, params: SamplerParams, *, backend: str, model: str | None,
                 chains: int = 1) -> None:
        super().__init__()
        self.session = session
        self.params = params
        self.chains = chains  # per prompt, run at once
        self.backend = backend
        self.model = model
        self.running = False
        self.in_flight: InFlight | None = None
        self.live_tree: LiveTree | None = None
        self._inbox: list[object] = []  # filled by the worker thread, drained by this one
        self._inbox_lock = threading.Lock()
        self._posted = False
        self._dirty = False
        self._said: set[str] = set()  # the errors shown for the running prompt (its chains share failures)

    def compose_bottom(self) -> ComposeResult:
        yield PromptInput(placeholder=PLACEHOLDER, id="prompt")

    def on_mount(self) -> None:
        self.query_one("#prompt", Input).focus()
        # start the engine now, so that it is warm by the time the first prompt is typed
        self.run_worker(lambda: self.session.start_engine(self.model, self._emit), thread=True,
                        exit_on_error=False, group="engine")
        self.set_interval(FRAME_S, self._frame)
        self.redraw()

    def on_unmount(self) -> None:
        # The app closes with a prompt still running when it is told to from outside rather than by
        # ctrl+q (a browser tab closed, the web server stopping): stop the prompt within one engine
        # step, or closing would wait for the worker forever and the session would not end in the trace.
        # Unconditionally: by now the closing app may have marked the worker cancelled (`running` is
        # False) while its thread runs on; with no prompt running this does nothing.
        self.session.cancel()

    def _emit(self, item: object) -> None:  # the worker thread: queue, and wake the UI once
        with self._inbox_lock:
            self._inbox.append(item)
            if self._posted:
                return
            self._posted = True
        self.post_message(FromWorker())

    # -- what the worker sends ------------------------------------------------------
    def on_from_worker(self, _message: FromWorker) -> None:
        with self._inbox_lock:
            items, self._inbox, self._posted = self._inbox, [], False
        for item in items:
            self._take(item)
        self._dirty = True

    def _take(self, item: object) -> None:
        chain = None
        if isinstance(item, ChainEvent):  # one of the prompt's chains: the view follows one of them
            chain, item = item.chain, item.event
            if isinstance(item, (InFlight, LiveTree)) and chain != self.state.followed:
                return
        if isinstance(item, VocabUpdate):
            self.state.vocab.update(item.pieces)
        elif isinstance(item, Notice):
            self.notify(visible(item.message, keep_newlines=False), severity="error", timeout=10, markup=False)
        elif isinstance(item, ParamsChanged):  # (its worker said why, in a notice)
            self.params = item.params
        elif isinstance(item, EngineReady):
            self.app.sub_title = engine_title(item.backend, item.model)
            self.notify(f"{engine_title(item.backend, item.model)}: ready", timeout=3, markup=False)
        elif isinstance(item, InFlight):
            self.in_flight = item
        elif isinstance(item, LiveTree):
            self.live_tree = item
        else:
            view = self.state.apply(item, chain)  # type: ignore[arg-type]
            followed = view is self.state.current
            if isinstance(item, SessionStart):
                self.follow = True
                if item.chain == 0:
                    self._said.clear()
                if self.state.current.method_run is not None:  # type: ignore[union-attr]
                    self.cursor = (self.state.current_index, 0)  # its view fills in as events arrive
                elif self.shown_baseline() is not None:
                    self.cursor = None  # a baseline's view must not stand for the new chain's first round
            elif isinstance(item, RoundDone) and followed:
                self.in_flight = self.live_tree = None
                if self.follow:
                    self.cursor = (self.state.current_index, len(view.rounds) - 1)  # type: ignore[union-attr]
            elif isinstance(item, SessionError) and item.message not in self._said:
                self._said.add(item.message)  # an engine failure ends every chain: one toast
                self.notify(visible(item.message, keep_newlines=False), severity="error", timeout=8, markup=False)
            elif isinstance(item, SessionEnd) and followed:
                self.in_flight = self.live_tree = None

    def _frame(self) -> None:
        if self._dirty:
            self._dirty = False
            self.redraw(keep_selection=True)

    @property
    def paused(self) -> bool:
        return self.running and self.session.paused

    def _where(self) -> str:
        where = super()._where()
        if self.follow and self.live_tree is not None:
            lt = self.live_tree
            where = f"epoch in progress (block {lt.block + 1}, k {lt.k_before}->{lt.k_now}, stream)"
        elif self.follow and self.in_flight is not None:
            f = self.in_flight
            where += f" · in flight: {f.requests} requests, {f.decoded}/{f.total} tokens decoded"
        return ("⏸ paused · " if self.paused else "") + where

    def title_steady(self) -> bool:
        return self.running  # the in-flight part comes and goes every round

    def stats_upto(self) -> int | None:
        """Browsing back: the numbers as of the round on screen (the live chain has its own line)."""
        return None if self.follow or self.cursor is None else self.cursor[1]

    def draw_stats(self, session: SessionView | None) -> None:
        upto = self.stats_upto()
        heading = live = ""
        if upto is not None and self.cursor is not None:
            s, r = self.cursor
            heading = f"as of {self.state.sessions[s].unit} {r + 1} of session {s + 1}, the one on screen (End: live)"
            live = self._live_line()
        self.query_one("#stats", StatsPanel).show(session, upto, paused=self.paused and upto is None,
                                                  heading=heading, live=live)

    def draw_baseline_stats(self, session: SessionView, **kwargs) -> None:
        live = session is not self.state.current  # browsing back: say how the running session stands
        super().draw_baseline_stats(session, paused=self.paused and not live, live=self._live_line() if live else "",
                                    heading=f"session {self.cursor[0] + 1}, the one on screen (End: live)"
                                    if live and self.cursor is not None else "")

    def _live_line(self) -> str:
        """How the newest session stands, said while an earlier one is on screen."""
        cur = self.state.current
        if cur is None:
            return ""
        m = cur.summary
        status = "paused" if self.paused else m.status
        if cur.method_run is not None:
            return f"live: session {len(self.state.sessions)}, {bt.progress(cur)}, {status}"
        return (f"live: session {len(self.state.sessions)}, {cur.unit} {len(cur.rounds)}, "
                f"{m.transitions}/{cur.total_steps} transitions, {status}")

    def shown_tree(self):
        if self.follow and self.live_tree is not None:
            return self.live_tree.tree
        return super().shown_tree()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "sampler" or event.state not in (
                WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        self.running = False
        if event.state == WorkerState.ERROR:  # the session reports its own failures: this is a bug
            err = event.worker.error
            self.notify(f"internal error: {visible(str(err).splitlines()[0] if str(err) else type(err).__name__)}",
                        severity="error", timeout=10)
        # the end is drawn now, not at the next frame: the last round and the final stats together
        self._dirty = False
        self.redraw(keep_selection=True)
        if getattr(self.app, "quitting", False):
            self.app.exit()

    # -- prompts --------------------------------------------------------------------------
    @on(Input.Submitted, "#prompt")
    def prompt_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        prompt = self.query_one("#prompt", PromptInput).prompt  # pasted line breaks restored
        if not prompt:
            return
        if self.running:
            self.notify("a run is in progress: escape cancels it", severity="warning")
            return
        event.input.value = ""
        self.running = True
        self.follow = True
        # focus stays in the prompt: a person may go on typing while this one runs, and a letter
        # typed there must never act as a key on the tree (Tab moves there)
        params, model, chains = self.params, self.model, self.chains
        self.run_worker(lambda: self.session.run(prompt, params, model, self._emit, chains), thread=True,
                        exclusive=True, exit_on_error=False, group="sampler")

    def stop_for_quit(self) -> bool:
        """Ask a running prompt to stop; True if the app must wait for it before exiting."""
        if not self.running:
            return False
        self.session.cancel()
        self.notify("stopping the running prompt, then quitting...", timeout=5)
        return True

    def action_cancel(self) -> None:
        if self.running:
            self.session.cancel()
            self.notify("cancelling (within one engine step)", timeout=3)

    def action_pause(self) -> None:
        if not self.running:
            return
        # no toast: the stats panel and the tree's title say "paused" for as long as it lasts
        if self.session.paused:
            self.session.resume()
        else:
            self.session.pause()
        self.draw_panels()

    def action_focus_prompt(self) -> None:
        self.query_one("#prompt", Input).focus()

    # -- settings ---------------------------------------------------------------------------
    def action_settings(self) -> None:
        def done(result) -> None:
            if result is None:
                return
            self.params, model, self.chains = result
            if model != self.model:
                self.model = model  # the engine restarts on the next prompt
            self.notify("settings apply from the next prompt", timeout=3)

        self.app.push_screen(SettingsScreen(self.params, self.model, self.backend, self.chains), done)

    def chain_picked(self, index: int) -> None:
        """The chains screen opened chain `index`: the live view follows it from now on."""
        self.state.follow(index)
        super().chain_picked(index)
        self.follow = self.state.current_index == index and self.running

    def set_params(self, **changes) -> None:
        try:
            self.params = self.params.with_(**changes).validate()
        except ValueError as e:
            self.notify(str(e), severity="error", markup=False)
            return
        self.notify(f"next prompt: {self.params.prefetch}, N={budget_text(self.params.to_dict())}", timeout=3)

    def system_commands(self):
        yield SystemCommand("Settings", "Sampler settings for the next prompt", self.action_settings)
        for rule in PrefetchRule.names():
            yield SystemCommand(f"Prefetch rule: {rule}", "Use this rule from the next prompt",
                                lambda r=rule: self.set_params(prefetch=r))
        for n in (8, 12, 20, 64):
            yield SystemCommand(f"Budget: {n}", "Prefetch budget N from the next prompt",
                                lambda n=n: self.set_params(budget=n))
        yield SystemCommand("Toggle full / rounded tree", "Epsilon-rounded subtree", self.action_toggle_view)
