"""Markers: `engine` (needs torch, transformers and vLLM: the README's set-up) and `slow`.

Engine tests skip where the engines are not installed, except in CI (CI=true)
or under PRESTO_TUI_REQUIRE_ENGINES=1, where a missing engine fails them.
A quick loop while editing: pytest -m "not engine and not slow".

Fixtures shared by the test modules live here; plain helper functions and classes
(synthetic engines, the error-line check, waiting) in tests/helpers.py.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

ENGINE_PACKAGES = ("torch", "transformers", "gguf", "vllm")
REQUIRE_ENGINES = os.environ.get("PRESTO_TUI_REQUIRE_ENGINES") == "1" or os.environ.get("CI") == "true"

# Under pytest-xdist (scripts/check.sh runs two workers on two cores) the engine tests share one
# worker (the embedded model's vLLM engine starts once) and the engines run on one thread: two
# threads on a core another worker keeps busy spin (oneDNN) and run many times slower.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups (after it: none)
def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):  # (`-p no:xdist`: the marker is xdist's)
        return
    for item in items:
        # A Ray start waits 30 s for its node, which vLLM's multiprocess workers (they busy-loop) can
        # starve on two cores: the tests that start Ray run beside no engine test, on the same worker.
        if item.get_closest_marker("engine") is not None or item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("engine"))


def pytest_runtest_setup(item):
    """Before any fixture starts an engine."""
    if item.get_closest_marker("engine") is None:
        return
    missing = [m for m in ENGINE_PACKAGES if importlib.util.find_spec(m) is None]
    if missing:
        if REQUIRE_ENGINES:
            pytest.fail(f"engine packages missing: {missing}")
        pytest.skip(f"needs {missing} (the README's set-up)")


@pytest.fixture(autouse=True)
def _synthetic_backend_for_cli(monkeypatch):
    """CLI tests run on the synthetic model; engine tests start real backends explicitly."""
    monkeypatch.setenv("PRESTO_TUI_BACKEND", "synthetic")


@pytest.fixture
def no_engine(monkeypatch):
    """Fail the test if anything starts an engine: input is checked before any engine starts.  The public
    API's module binds `start_engine` when it is imported: imported here first, so that a first import
    under the patch does not keep the refusal for the tests after this one (it did, in a `-k` subset)."""
    from presto_tui.api import engine as api_engine
    from presto_tui.runtime.engines import registry

    def refuse(*a, **k):
        raise AssertionError("an engine was started before the input was checked")

    monkeypatch.setattr(registry, "start_engine", refuse)
    monkeypatch.setattr(api_engine, "start_engine", refuse)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run the test in its own empty folder, `tmp_path`: commands write traces (./sessions), results and
    exports into the current folder by default. A module whose every test needs it says
    `pytestmark = pytest.mark.usefixtures("in_tmp")`."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- the embedded model on the real engines ------------------------------------------------------

@pytest.fixture(scope="session")
def model_dir():
    from presto_tui.runtime.engines.models import resolve
    from presto_tui.runtime.engines.registry import _prepare_environment

    _prepare_environment(None)
    return resolve(None, quiet=True)


@pytest.fixture(scope="session")
def vllm(model_dir):
    """The embedded model on vLLM, started once for every module's engine tests (they share one
    xdist worker): a vLLM start is the longest set-up in the suite."""
    from presto_tui.runtime.engines.registry import EngineOptions, start_engine

    return start_engine("vllm", EngineOptions(max_model_len=512))


# -- the suite's time per module, printed at its end (so that growth shows where it happens) -------

_MODULE_S: dict[str, float] = {}
_WORKER_S: dict[str, float] = {}  # under xdist: which worker the wall time waits for


def pytest_runtest_logreport(report):
    """Every phase's time, by test module (the controller gets every worker's reports under xdist)."""
    _MODULE_S[report.nodeid.split("::")[0]] = _MODULE_S.get(report.nodeid.split("::")[0], 0.0) + report.duration
    worker = getattr(getattr(report, "node", None), "gateway", None)
    if worker is not None:
        _WORKER_S[worker.id] = _WORKER_S.get(worker.id, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _MODULE_S:
        return
    total = sum(_MODULE_S.values())
    terminalreporter.section("time per test module (setup, call and teardown; the workers' time summed)")
    for module, seconds in sorted(_MODULE_S.items(), key=lambda kv: -kv[1])[:20]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:5.1f}%  {module}")
    terminalreporter.write_line(f"{total:8.1f} s  in all, {len(_MODULE_S)} modules")
    if _WORKER_S:
        terminalreporter.write_line("by worker: " + ", ".join(f"{w} {s:.1f} s" for w, s in sorted(_WORKER_S.items())))
