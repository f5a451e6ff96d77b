"""The embedded model's conversion: once, however many processes start on a fresh cache at once."""

from __future__ import annotations

import io
import sys
import threading
from pathlib import Path

import pytest
from helpers import wait_for


def test_processes_starting_at_once_on_a_fresh_cache_convert_the_model_once(tmp_path, monkeypatch):
    """Ray's workers on one node (or a test run beside the CI's warm-up) reach an unconverted model at
    once: the second waits for the first one's folder, saying so, instead of converting it again."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from presto_tui.runtime.engines import models

    monkeypatch.setenv("PRESTO_TUI_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    said = io.StringIO()
    monkeypatch.setattr(sys, "stderr", said)
    loads: list[str] = []
    ends: dict[str, Path] = {}

    def convert(name: str) -> None:
        ends[name] = models.convert_gguf(gguf)

    second = threading.Thread(target=convert, args=("second",))

    class Model:
        config = type("Config", (), {})()

        @classmethod
        def from_pretrained(cls, *args, **kwargs):
            loads.append(threading.current_thread().name)
            second.start()  # it finds no folder yet and waits for this conversion
            wait_for(lambda: "waiting for another process converting tiny.Q4_1.gguf" in said.getvalue(),
                     "the second conversion to wait", timeout=30)
            return cls()

        def save_pretrained(self, folder: str) -> None:
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / "config.json").write_text("{}")

    class Tokenizer:
        @classmethod
        def from_pretrained(cls, *args, **kwargs):
            return cls()

        def save_pretrained(self, folder: str) -> None:
            (Path(folder) / "tokenizer.json").write_text("{}")

    monkeypatch.setattr(transformers, "AutoModelForCausalLM", Model)
    monkeypatch.setattr(transformers, "AutoTokenizer", Tokenizer)
    first = threading.Thread(target=convert, args=("first",), name="first")
    first.start()
    first.join()
    second.join()
    assert loads == ["first"]  # one conversion
    assert ends["first"] == ends["second"] == models.converted_dir(gguf)
    assert (ends["first"] / ".complete").is_file() and (ends["first"] / "tokenizer.json").is_file()
    assert "converting tiny.Q4_1.gguf to float32 safetensors" in said.getvalue()
