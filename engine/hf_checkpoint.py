"""A GGUF's weights dequantized to a plain float Hugging Face checkpoint, cached on disk: what the trainer
starts from and what vLLM serves.

transformers can load a GGUF itself, but it keeps a quantization config that makes it refuse to fine-tune,
and it takes ~22 s for the 135M model on 2 cores. Here the tensors are dequantized with the `gguf` package
(~6 s), put back in Hugging Face order, and saved once as safetensors beside the prepared tokenizer (with
the tool-aware chat template the server and the engine's `tokens` mode use). Later runs load in about a
second from `$SPADEWORK_CACHE/checkpoints/<name>-<sha>`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import structlog

from engine.gguf_llama import llama_config, to_hf
from engine.local_models import built_once, cache_root, content_key, tokenizer_dir

log = structlog.get_logger()

WEIGHTS_FILE = "model.safetensors"


def float_checkpoint(gguf: Path) -> Path:
    """A Hugging Face checkpoint directory (float32 weights, config, tokenizer) for `gguf`, built once."""

    def build(directory: Path) -> None:
        from safetensors.numpy import save_file

        log.info("dequantizing to a float checkpoint", model=str(gguf), cache=str(directory))
        config, tensors = dequantized(gguf)
        save_file(tensors, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
        (directory / "config.json").write_text(json.dumps(config, indent=2))
        for file in tokenizer_dir(gguf).iterdir():
            shutil.copy2(file, directory / file.name)

    return built_once(cache_root() / "checkpoints" / content_key(gguf), WEIGHTS_FILE, build)


def dequantized(gguf: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config and float32 Hugging Face tensors of a llama-architecture GGUF."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(gguf)
    names = {tensor.name for tensor in reader.tensors}
    config = llama_config(reader, has_output="output.weight" in names)
    tensors: dict[str, Any] = {}
    for tensor in reader.tensors:
        name, values = to_hf(tensor.name, np.asarray(dequantize(tensor.data, tensor.tensor_type), np.float32), config)
        tensors[name] = np.ascontiguousarray(values)
    return config, tensors
