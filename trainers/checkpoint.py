"""The trainable policy: a GGUF's float checkpoint (`engine.hf_checkpoint`), a local checkpoint or a hub id,
with or without a LoRA adapter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from engine.hf_checkpoint import float_checkpoint

log = structlog.get_logger()


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
