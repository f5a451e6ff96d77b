"""One error base for every surface: a kind, a one-line message, an exit code.

- input: a value, file or option the person gave is wrong (exit 2)
- trace: a trace file cannot be read (exit 2); the message starts `file:line:`
- engine: the model or engine failed or refused (exit 1)
- output: a file could not be written (full disk, permissions) (exit 1)
- internal: a bug (exit 1); shown with its traceback only under --debug

Every command prints `presto-tui: error: <message>` and exits with the kind's
code; the app shows one toast; a session ends its trace with an `error` event
of the same kind.
"""

from __future__ import annotations

EXIT_CODES = {"input": 2, "trace": 2, "engine": 1, "output": 1, "internal": 1}
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


class PrestoError(Exception):
    kind = "internal"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.kind]

    @property
    def line(self) -> str:
        """The message as one line (multi-line messages from libraries keep their first line)."""
        text = str(self).strip()
        return text.splitlines()[0] if text else type(self).__name__


class InputError(PrestoError, ValueError):
    kind = "input"


class TraceError(PrestoError, ValueError):
    kind = "trace"


class EngineError(PrestoError, RuntimeError):
    kind = "engine"


class OutputError(PrestoError, OSError):
    kind = "output"


def describe(exc: BaseException) -> tuple[str, str]:
    """(kind, one-line message) of any exception: ours keep their kind, others are internal."""
    if isinstance(exc, PrestoError):
        return exc.kind, exc.line
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return "internal", f"{type(exc).__name__}: {first}" if first else type(exc).__name__
