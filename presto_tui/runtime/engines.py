"""Choosing a backend by name (the `--backend` option)."""

from __future__ import annotations

from presto_tui.runtime.backend import Backend

BACKENDS = ("synthetic",)


class BackendError(RuntimeError):
    """A backend that cannot be started; the message is one line."""


def make_backend(name: str) -> Backend:
    if name == "synthetic":
        from presto_tui.runtime.synthetic import SyntheticBackend

        return SyntheticBackend()
    raise BackendError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
