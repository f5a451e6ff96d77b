import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _synthetic_backend_for_cli(monkeypatch):
    """CLI tests run on the synthetic model; engine tests start real backends explicitly."""
    monkeypatch.setenv("PRESTO_TUI_BACKEND", "synthetic")
