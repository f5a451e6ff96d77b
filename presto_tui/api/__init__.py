"""The layer every front-end (the commands, the app, the server, eval, lm-eval, the web tab) is built
on: engines (`engine`), parameters and methods (`params`), sampling (`sampling`: `sample`, `stream`,
`stream_jobs`, `Session`), sessions that come and go on an engine (`sessions`), events and their
summaries (`events`), traces as data (`traces`), diagnostics (`diagnostics`); and, for tests and
method authors only, the session drivers themselves (`drivers`: front-ends never import it, an
import-linter contract).

These modules are internal: the public, versioned API is `presto_tui`'s `__all__` (and the
modules it names), `presto_tui.API_VERSION`.
"""

from __future__ import annotations

SUBMODULES = ("engine", "params", "events", "sampling", "traces", "sessions", "diagnostics", "drivers")
