"""The trainable policy: a GGUF's weights dequantized to a plain float checkpoint, cached on disk.

transformers can load a GGUF itself, but it keeps a quantization config that makes it refuse to fine-tune,
and it takes ~22 s for the 135M model on 2 cores. Here the tensors are dequantized with the `gguf` package
(~6 s), put back in Hugging Face order, and saved once as safetensors beside the prepared tokenizer (with
the tool-aware chat template the server and the engine's `tokens` mode use). Later runs load in about a
second from `$SPADEWORK_CACHE/checkpoints/<name>-<sha>`.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from engine.local_models import built_once, cache_root, content_key, tokenizer_dir
from trainers.gguf_llama import llama_config, to_hf

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


def load_policy(
    source: Path | str, lora: LoraSettings | None = None, checkpoint: Path | None = None
) -> tuple[Any, Any]:
    """The trainable model (eval mode) and its tokenizer.

    `source` is a GGUF (loaded through its cached float checkpoint), a local Hugging Face checkpoint
    directory or a hub id. `checkpoint` is a trainer checkpoint to continue from: full weights, or with
    `lora`, an adapter over `source`. With `lora` and no checkpoint, a fresh adapter (the base model's
    outputs unchanged until the first update) wraps the model.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = _hf_source(source)
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    if checkpoint is not None and lora is None:
        directory = str(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype)
    if lora is not None:
        model = _with_adapter(model, lora, checkpoint)
    return model.eval(), AutoTokenizer.from_pretrained(_hf_source(source))


@dataclass(frozen=True)
class LoraSettings:
    """A LoRA adapter's shape: rank, scaling (alpha / rank), dropout, and which modules it wraps."""

    rank: int
    alpha: int
    dropout: float = 0.0
    targets: str | tuple[str, ...] = "all-linear"


def _hf_source(source: Path | str) -> str:
    path = Path(source)
    if path.suffix == ".gguf":
        return str(float_checkpoint(path))
    return str(source)


def _with_adapter(model: Any, lora: LoraSettings, checkpoint: Path | None) -> Any:
    from peft import LoraConfig, PeftModel, get_peft_model

    if checkpoint is not None:
        if not (checkpoint / "adapter_config.json").exists():
            raise FileNotFoundError(f"{checkpoint} holds no LoRA adapter (adapter_config.json); was it a full run?")
        return PeftModel.from_pretrained(model, str(checkpoint), is_trainable=True)
    targets = lora.targets if isinstance(lora.targets, str) else list(lora.targets)
    config = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets,
                        task_type="CAUSAL_LM")  # fmt: skip
    return get_peft_model(model, config)
