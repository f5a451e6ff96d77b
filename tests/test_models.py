"""The embedded model's conversion: once, however many processes start on a fresh cache at once; a cache
it cannot write is one line; an interrupted conversion leaves nothing half-written behind."""

from __future__ import annotations

import io
import sys
import threading
from pathlib import Path

import pytest
from helpers import wait_for

from presto_tui.errors import EngineError


class Tokenizer:
    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        return cls()

    def save_pretrained(self, folder: str) -> None:
        (Path(folder) / "tokenizer.json").write_text("{}")


def model_class(on_load, on_save):
    """A stand-in for transformers' model class whose load calls `on_load()` (the real one reads the GGUF
    file for seconds) and whose save writes what the conversion's check looks for, then calls `on_save()`."""

    class Model:
        config = type("Config", (), {})()

        @classmethod
        def from_pretrained(cls, *args, **kwargs):
            on_load()
            return cls()

        def save_pretrained(self, folder: str) -> None:
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / "config.json").write_text("{}")
            on_save()

    return Model


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.setenv("PRESTO_TUI_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tiny.Q4_1.gguf"
    path.write_bytes(b"GGUF")
    return path


def stand_in(monkeypatch, on_load=lambda: None, on_save=lambda: None) -> None:
    import transformers

    monkeypatch.setattr(transformers, "AutoModelForCausalLM", model_class(on_load, on_save))
    monkeypatch.setattr(transformers, "AutoTokenizer", Tokenizer)


def test_processes_starting_at_once_on_a_fresh_cache_convert_the_model_once(gguf, monkeypatch):
    """Ray's workers on one node (or a test run beside the CI's warm-up) reach an unconverted model at
    once: the second waits for the first one's folder, saying so, instead of converting it again."""
    from presto_tui.runtime.engines import models

    said = io.StringIO()
    monkeypatch.setattr(sys, "stderr", said)
    loads: list[str] = []
    ends: dict[str, Path] = {}

    def convert(name: str) -> None:
        ends[name] = models.convert_gguf(gguf)

    second = threading.Thread(target=convert, args=("second",))

    def load() -> None:
        loads.append(threading.current_thread().name)
        second.start()  # it finds no folder yet and waits for this conversion
        wait_for(lambda: "waiting for another process converting tiny.Q4_1.gguf" in said.getvalue(),
                 "the second conversion to wait", timeout=30)

    stand_in(monkeypatch, load)
    first = threading.Thread(target=convert, args=("first",), name="first")
    first.start()
    first.join()
    second.join()
    assert loads == ["first"]  # one conversion
    assert ends["first"] == ends["second"] == models.converted_dir(gguf)
    assert (ends["first"] / ".complete").is_file() and (ends["first"] / "tokenizer.json").is_file()
    assert "converting tiny.Q4_1.gguf to float32 safetensors" in said.getvalue()


def test_a_cache_that_cannot_be_written_is_the_conversions_one_line(gguf, tmp_path, monkeypatch):
    from presto_tui.runtime.engines import models

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("PRESTO_TUI_CACHE", str(blocker))
    stand_in(monkeypatch)
    with pytest.raises(EngineError, match=r"could not convert tiny\.Q4_1\.gguf: (NotADirectoryError|FileExistsError)"):
        models.convert_gguf(gguf, quiet=True)


def test_an_interrupted_conversion_leaves_no_half_written_folder(gguf, monkeypatch):
    """Ctrl-C during a first run's conversion (or CI stopping its warm-up): the temporary folder, about
    0.5 GB for the embedded model, goes with it, and the next start converts afresh."""
    from presto_tui.runtime.engines import models

    def interrupted() -> None:
        raise KeyboardInterrupt

    stand_in(monkeypatch, on_save=interrupted)  # the weights half written
    with pytest.raises(KeyboardInterrupt):
        models.convert_gguf(gguf, quiet=True)
    folders = models.converted_dir(gguf).parent
    assert not [p.name for p in folders.iterdir() if p.is_dir()]  # neither the model nor a .tmp folder
    stand_in(monkeypatch)
    assert (models.convert_gguf(gguf, quiet=True) / ".complete").is_file()


def test_a_cpu_engine_keeps_every_prefill_in_one_step(tmp_path):
    """On a CPU, vLLM rewinds the generator of a seeded request whose prefill was cut across steps, which a CPU
    generator refuses: the engine turns chunked prefill off, with a step budget that holds the model's context
    (or the max_model_len given); a model whose context is unknown keeps vLLM's defaults."""
    from presto_tui.runtime.engines.vllm_engine import _whole_prefills

    (tmp_path / "config.json").write_text('{"max_position_embeddings": 8192}')
    assert _whole_prefills(tmp_path, None) == {"enable_chunked_prefill": False, "max_num_batched_tokens": 8192}
    assert _whole_prefills(tmp_path, 1024) == {"enable_chunked_prefill": False, "max_num_batched_tokens": 4096}
    assert _whole_prefills(tmp_path / "elsewhere", None) == {}
