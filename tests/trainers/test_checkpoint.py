"""The float checkpoint of a GGUF, and the llama GGUF ⇄ Hugging Face mapping it rests on."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.gguf_llama import UnsupportedModelError, hf_name, llama_config, to_hf_order, to_llama_cpp_order
from engine.hf_checkpoint import WEIGHTS_FILE, float_checkpoint
from engine.local_models import default_gguf
from trainers.checkpoint import load_policy
from trainers.gguf_export import export_gguf


def test_rotary_permutation_round_trips_and_moves_rows() -> None:
    rows = np.arange(2 * 3 * 8 * 4, dtype=np.float32).reshape(3 * 8, 8)  # 3 heads of 8 rows, 8 columns
    llama_cpp = to_llama_cpp_order(rows, heads=3)
    assert not np.array_equal(llama_cpp, rows)
    assert np.array_equal(to_hf_order(llama_cpp, heads=3), rows)
    # Within a head, llama.cpp interleaves the two rotary halves: row 1 is HF's row 4 (half of 8).
    assert np.array_equal(llama_cpp[1], rows[4])


def test_names_map_and_unknown_ones_are_refused() -> None:
    assert hf_name("blk.12.attn_k.weight") == "model.layers.12.self_attn.k_proj.weight"
    assert hf_name("token_embd.weight") == "model.embed_tokens.weight"
    with pytest.raises(UnsupportedModelError, match=r"blk\.0\.ssm_conv"):
        hf_name("blk.0.ssm_conv.weight")
    other = SimpleNamespace(fields={"general.architecture": SimpleNamespace(contents=lambda: "mamba")})
    with pytest.raises(UnsupportedModelError, match="'mamba'"):
        llama_config(other, has_output=True)


def test_float_checkpoint_is_built_once_and_loads_without_quantization() -> None:
    directory = float_checkpoint(default_gguf())
    built = (directory / WEIGHTS_FILE).stat().st_mtime_ns
    assert float_checkpoint(default_gguf()) == directory
    assert (directory / WEIGHTS_FILE).stat().st_mtime_ns == built  # a cache hit, not a rebuild
    model, tokenizer = load_policy(directory)  # a Hugging Face checkpoint directory loads as it is
    assert getattr(model.config, "quantization_config", None) is None
    assert model.config.tie_word_embeddings and model.config.num_hidden_layers == 30
    assert "<tool_call>" in tokenizer.chat_template  # the template the server and tokens mode use
    assert all(parameter.dtype.is_floating_point for parameter in model.parameters())


def test_export_names_a_missing_tensor(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match=r"model\.embed_tokens\.weight"):
        export_gguf({}, default_gguf(), tmp_path / "out.gguf")
    assert list(tmp_path.iterdir()) == []  # nothing half-written is left behind
