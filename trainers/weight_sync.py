"""Getting the trainer's current weights to the server that samples rollouts.

`WeightSync` is the one interface the training loop sees. On CPU, `GGUFReloadSync` exports the policy to
a GGUF (LoRA merged) and restarts the embedded llama.cpp server on it, on the same port, so the engine's
endpoint URL stays valid; on a GPU, its twin (vLLM weight transfer or LoRA hot-load) comes with the
trainer. Either way, once `push` returns, every new request is sampled from the pushed weights.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import structlog

from engine.llama_server import EmbeddedServer
from trainers.gguf_export import ExportType, export_gguf, merged_weights

log = structlog.get_logger()


class WeightSync(Protocol):
    """Pushes a policy's weights to the sampler; returns the new weights' version (1, 2, ...)."""

    version: int

    def push(self, model: Any) -> int: ...


class GGUFReloadSync:
    """CPU weight sync: export to GGUF, then reload the embedded server on it (about 10 s for 135M)."""

    def __init__(self, server: EmbeddedServer, base: Path, workdir: Path, dtype: ExportType = "f16") -> None:
        self.server = server
        self.base = base  # the GGUF the policy came from: its metadata and tokenizer are reused
        self.workdir = workdir
        self.dtype = dtype
        self.version = 0

    def push(self, model: Any) -> int:
        started = time.perf_counter()
        version = self.version + 1
        path = self.workdir / f"policy-v{version:05d}.gguf"
        with merged_weights(model) as weights:
            export_gguf(weights, self.base, path, self.dtype)
        exported = time.perf_counter()
        previous = self.server.settings.model
        self.server.reload(path)
        if previous.parent == self.workdir and previous != path:
            previous.unlink(missing_ok=True)  # only the served version is kept on disk
        self.version = version
        log.info(
            "weights synced",
            version=version,
            export_s=round(exported - started, 2),
            reload_s=round(time.perf_counter() - exported, 2),
            file=str(path),
        )
        return version
