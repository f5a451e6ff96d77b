"""The server's memory allocator: the C library's, so that what a request freed can go back to the system.

CPython's own allocator (pymalloc) keeps small objects in 1 MiB arenas and returns an arena only once
every object in it is free.  A long request (a tempering run of 4,096-token replicas) spreads its
objects over hundreds of arenas; the few that outlive it (an event kept for a late listener, an
entry of a cache) keep each of those arenas resident.  Measured with `sys._debugmallocstats()` on the
synthetic engine: after one such request the server held 114 arenas for 35 MB of live small objects
(33 arenas for 33 MB before it).  glibc's allocator places the same objects in pages of 4 KiB, and
`malloc_trim` hands every wholly free page back (`host.give_back_memory`, after a full collection):
for that request, from 87 MiB, 147 MiB after it with glibc's, 189 with pymalloc's.

So `presto-tui serve` runs its Python with `PYTHONMALLOC=malloc` (and `MALLOC_ARENA_MAX=2`: two glibc
arenas for the engine thread and the event loop rather than eight a core): the command starts itself
again with them set, once, before anything else has run.  A `PYTHONMALLOC` already set (to anything,
`pymalloc` included) is left as it is.  The restarted server takes the variables it added out of its
environment again (`forget_added`), so that the processes it starts (vLLM's engine) do not inherit them.
The cost: none measured above the noise (engine steps per CPU
second of six tempering replicas on the synthetic engine: 686 and 770 with pymalloc, 781 and 738 with
glibc's).
"""

from __future__ import annotations

import os
import sys

ENV = {"PYTHONMALLOC": "malloc", "MALLOC_ARENA_MAX": "2"}
ADDED = "PRESTO_TUI_SERVE_ALLOCATOR"  # the variables the restart added (comma-separated): the server's own


def command_of(argv: list[str]) -> str | None:
    """The command a `presto-tui` command line runs (the first word that is not an option): the root's
    options are flags, so nothing before the command takes a value."""
    return next((a for a in argv if not a.startswith("-")), None)


def wanted(argv: list[str], environ: os._Environ[str] | dict[str, str]) -> dict[str, str] | None:
    """The environment to start the command again with, or None to run it as it is: only `serve`, only on
    Linux (glibc's `malloc_trim` is what gives the pages back), only where `PYTHONMALLOC` is unset."""
    if command_of(argv) != "serve" or sys.platform != "linux" or "PYTHONMALLOC" in environ or ADDED in environ:
        return None
    added = {k: v for k, v in ENV.items() if k not in environ}
    return {**environ, **added, ADDED: ",".join(added)}


def forget_added(environ: os._Environ[str] | dict[str, str]) -> None:
    """In the restarted server: take the variables the restart added out of its environment again (the
    process read them as it started; `ADDED` stays, so that it does not start again), so that what it
    starts (vLLM's engine processes and their threads) runs on the settings the user gave, not on two
    arenas."""
    for k in filter(None, environ.get(ADDED, "").split(",")):
        environ.pop(k, None)


def restart_for_serving() -> None:
    """Start this process again on the C allocator if it runs `serve` (see the module docstring).  Called
    by the command line's `main` only: its `sys.argv` is this process's own (`sys.orig_argv`, the
    interpreter's command line, is what is started again: `-c ...`, `-m presto_tui` and the script alike)."""
    forget_added(os.environ)
    env = wanted(sys.argv[1:], os.environ)
    if env is None or not getattr(sys, "orig_argv", None) or not sys.executable:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
