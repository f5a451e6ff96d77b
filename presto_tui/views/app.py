"""The Textual app: a thin shell that pushes the chat or the replay screen.

Both screens share `RoundScreen` (tree, stats, inspector, text); the app only
holds what is global: the style sheet, help, quitting.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import App
from textual.binding import Binding
from textual.screen import Screen

from presto_tui.api.params import SamplerParams
from presto_tui.errors import InputError
from presto_tui.logs.reader import Trace
from presto_tui.safetext import visible
from presto_tui.views.dialogs.help import HelpScreen
from presto_tui.views.dialogs.quit import ConfirmQuitScreen
from presto_tui.views.palette import theme_variables
from presto_tui.views.screens.chat import ChatScreen, ChatWorker, engine_title
from presto_tui.views.screens.member_rounds import MemberRoundsScreen
from presto_tui.views.screens.members import MemberScreen
from presto_tui.views.screens.replay import ReplayScreen
from presto_tui.views.state.reducer import AppState


class PrestoApp(App):
    CSS_PATH = ["widgets/widgets.tcss", "dialogs/dialogs.tcss", "screens/screens.tcss"]  # relative to this file
    TITLE = "presto-tui"
    BINDINGS = [
        # ? and q in a text field type themselves (Input consumes printable keys): the footer
        # names the keys that work everywhere.  Quitting with a prompt running asks first.
        Binding("f1", "help", "help"),
        Binding("question_mark", "help", "help", show=False),
        Binding("ctrl+q", "quit", "quit"),
        Binding("q", "quit", "quit", show=False),
    ]

    def __init__(self, screen: Screen, *, subtitle: str = "", warnings: tuple[str, ...] = ()) -> None:
        super().__init__()
        self._first = screen
        self.sub_title = subtitle
        self.startup_warnings = warnings  # e.g. the reader's "truncated final line ignored"
        self.quitting = False

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """The MH class and path colours (`$mh-*`), in their dark or light variant (palette.py)."""
        return theme_variables(self.current_theme.dark)

    def on_mount(self) -> None:
        self.push_screen(self._first)
        for w in self.startup_warnings:
            self.notify(visible(w, keep_newlines=False), severity="warning", timeout=10, markup=False)

    def on_member_screen_open_rounds(self, message: MemberScreen.OpenRounds) -> None:
        self.push_screen(MemberRoundsScreen(message.state, message.session, message.member, message.label))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Quit at once when nothing would be lost (a replay, a chat between prompts); with a prompt
        running, ask first, then stop it, so that its session ends `cancelled` in the trace.
        Asked again while it stops, quit without waiting."""
        screen = self._first
        if not isinstance(screen, ChatScreen) or not screen.running or self.quitting:
            self.exit()
        elif isinstance(self.screen, ConfirmQuitScreen):
            self.screen.dismiss(True)  # ctrl+q on the question: asked twice, yes
        else:
            self.push_screen(ConfirmQuitScreen(), self._quit_confirmed)

    def _quit_confirmed(self, yes: bool | None) -> None:
        screen = self._first
        if not yes:
            return
        if isinstance(screen, ChatScreen) and screen.stop_for_quit():
            self.quitting = True  # ChatScreen exits the app once its worker has stopped
            return
        self.exit()  # it finished while the question was on screen

    def get_system_commands(self, screen: Screen):
        yield from super().get_system_commands(screen)
        if isinstance(screen, ChatScreen):
            yield from screen.system_commands()


def chat_app(session: ChatWorker, params: SamplerParams, *, backend: str, model: str | None, chains: int = 1,
             subtitle: str | None = None) -> PrestoApp:
    return PrestoApp(ChatScreen(session, params, backend=backend, model=model, chains=chains),
                     subtitle=subtitle or engine_title(backend, model) + " (starting)")


def replay_app(traces: Trace | Sequence[Trace], autoplay: bool = False,
               compare: tuple[int, int] | None = None) -> PrestoApp:
    """The replay app for one trace or several (one timeline, sessions in order) that the reader
    has already validated; `compare`: two sessions to open side by side at once."""
    loaded = [traces] if isinstance(traces, Trace) else list(traces)
    state = AppState(vocab=merged_vocab(loaded))
    for trace in loaded:
        for s in trace.sessions:
            for e in s.events:
                state.apply(e)
    names = " + ".join(visible(t.path.name, keep_newlines=False) for t in loaded)
    return PrestoApp(ReplayScreen(state, autoplay=autoplay, compare=compare), subtitle=f"replay {names}",
                     warnings=tuple(w for t in loaded for w in t.warnings))


def merged_vocab(traces: Sequence[Trace]) -> dict[int, str]:
    """One token table for traces replayed together; traces whose tables give one id two texts come
    from different tokenizers, and their sessions cannot share one table."""
    vocab: dict[int, str] = {}
    first: dict[int, Trace] = {}
    for t in traces:
        for i, piece in t.vocab.items():
            if vocab.setdefault(i, piece) != piece:
                shown = lambda tr: visible(str(tr.path), keep_newlines=False)
                raise InputError(f"{shown(first[i])} and {shown(t)} give token {i} different texts (traces of "
                                 "different tokenizers): replay them one at a time")
            first.setdefault(i, t)
    return vocab
