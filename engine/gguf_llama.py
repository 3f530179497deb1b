"""llama-architecture GGUF ⇄ Hugging Face: tensor names, the rotary permutation, and the config.

llama.cpp stores `attn_q` / `attn_k` rows in an order that suits its rotary kernel; Hugging Face's llama
expects the halves split differently. Loading must undo that permutation and exporting must redo it: get
either wrong and the server produces fluent nonsense (the weight-sync test's greedy/logprob comparison is
what catches it). This covers SmolLM2, Llama 2/3, TinyLlama, Mistral-style dense models.
"""

from __future__ import annotations

import re
from typing import Any

from numpy.typing import NDArray

LLAMA = "llama"

_GLOBAL = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_PER_LAYER = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_GGUF_LAYER = re.compile(r"blk\.(\d+)\.(\w+)\.weight")


class UnsupportedModelError(ValueError):
    """The model is not one this module can map (another architecture, or an unknown tensor)."""


def hf_name(gguf_name: str) -> str:
    """`blk.3.attn_q.weight` → `model.layers.3.self_attn.q_proj.weight`."""
    if gguf_name in _GLOBAL:
        return _GLOBAL[gguf_name]
    match = _GGUF_LAYER.fullmatch(gguf_name)
    if match is None or match.group(2) not in _PER_LAYER:
        raise UnsupportedModelError(f"no Hugging Face name for GGUF tensor {gguf_name!r}")
    return f"model.layers.{match.group(1)}.{_PER_LAYER[match.group(2)]}.weight"


def rotary_heads(gguf_name: str, heads: int, kv_heads: int) -> int | None:
    """How many heads a tensor's rows are permuted over (q: heads, k: kv heads), or None if not permuted."""
    if gguf_name.endswith(".attn_q.weight"):
        return heads
    if gguf_name.endswith(".attn_k.weight"):
        return kv_heads
    return None


def to_llama_cpp_order(rows: NDArray[Any], heads: int) -> NDArray[Any]:
    """Hugging Face q/k rows → llama.cpp's: within each head, interleave the two rotary halves."""
    return rows.reshape(heads, 2, rows.shape[0] // heads // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def to_hf_order(rows: NDArray[Any], heads: int) -> NDArray[Any]:
    """llama.cpp q/k rows → Hugging Face's (the inverse of `to_llama_cpp_order`)."""
    return rows.reshape(heads, rows.shape[0] // heads // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def to_hf(gguf_name: str, values: NDArray[Any], config: dict[str, Any]) -> tuple[str, NDArray[Any]]:
    """A GGUF tensor as Hugging Face has it: its name, and q/k rows in Hugging Face's rotary order."""
    heads = rotary_heads(gguf_name, config["num_attention_heads"], config["num_key_value_heads"])
    return hf_name(gguf_name), values if heads is None else to_hf_order(values, heads)


def to_gguf(gguf_name: str, values: NDArray[Any], config: dict[str, Any]) -> NDArray[Any]:
    """A Hugging Face tensor's values for GGUF tensor `gguf_name`: q/k rows back in llama.cpp's order."""
    heads = rotary_heads(gguf_name, config["num_attention_heads"], config["num_key_value_heads"])
    return values if heads is None else to_llama_cpp_order(values, heads)


def field_value(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def llama_config(reader: Any, has_output: bool) -> dict[str, Any]:
    """A transformers `LlamaConfig` dict from a GGUF's metadata."""
    architecture = field_value(reader, "general.architecture")
    if architecture != LLAMA:
        raise UnsupportedModelError(f"only llama-architecture GGUFs can be trained here, not {architecture!r}")

    def meta(name: str, default: Any = None) -> Any:
        return field_value(reader, f"{LLAMA}.{name}", default)

    heads = int(meta("attention.head_count"))
    hidden = int(meta("embedding_length"))
    vocab = meta("vocab_size")
    if vocab is None:  # older files: count the vocabulary (slow: ~4 s for 49k entries)
        vocab = len(field_value(reader, "tokenizer.ggml.tokens") or [])
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(meta("feed_forward_length")),
        "num_hidden_layers": int(meta("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(meta("attention.head_count_kv", heads)),
        "head_dim": int(meta("rope.dimension_count", hidden // heads)),
        "rms_norm_eps": float(meta("attention.layer_norm_rms_epsilon", 1e-5)),
        "rope_theta": float(meta("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(meta("context_length", 2048)),
        "vocab_size": int(vocab),
        "tie_word_embeddings": not has_output,
        "bos_token_id": field_value(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": field_value(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": field_value(reader, "tokenizer.ggml.padding_token_id"),
        "hidden_act": "silu",
        "torch_dtype": "float32",
    }
