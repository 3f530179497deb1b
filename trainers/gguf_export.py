"""Trained weights back to a GGUF the embedded server can load.

spadework always starts from a GGUF, so the exporter needs none of llama.cpp's `convert_hf_to_gguf.py`: it
copies the base file's metadata (architecture, tokenizer, chat template) unchanged and writes the trainer's
tensors in the base file's names and order, as float16 or float32, with q/k put back in llama.cpp's rotary
order. A LoRA-wrapped (peft) model is merged for the export and unmerged after, so training goes on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from engine.gguf_llama import hf_name, llama_config, to_gguf

ExportType = Literal["f16", "f32"]

_VIRTUAL_KEYS = ("GGUF.", "general.architecture")  # written by GGUFWriter itself
_FILE_TYPE = "general.file_type"


@dataclass(frozen=True)
class BaseLayout:
    """What an export copies from the base GGUF: its metadata fields and tensor names, in order."""

    architecture: str
    fields: tuple[tuple[str, Any, Any, Any], ...]  # key, value, value type, array item type
    tensor_names: tuple[str, ...]
    config: dict[str, Any]


@lru_cache(maxsize=4)
def base_layout(base: Path) -> BaseLayout:
    """Parsed once per process: reading the 49k-entry vocabulary field by field takes ~7 s."""
    from gguf import GGUFReader, GGUFValueType

    reader = GGUFReader(base)
    names = tuple(tensor.name for tensor in reader.tensors)
    fields = tuple(
        (key, field.contents(), field.types[0], field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None)
        for key, field in reader.fields.items()
        if not key.startswith(_VIRTUAL_KEYS) and key != _FILE_TYPE
    )
    architecture = str(reader.fields["general.architecture"].contents())
    return BaseLayout(architecture, fields, names, llama_config(reader, has_output="output.weight" in names))


def export_gguf(weights: Mapping[str, Any], base: Path, out: Path, dtype: ExportType = "f16") -> Path:
    """Write `weights` (Hugging Face names → tensors or arrays) as a GGUF shaped like `base`."""
    layout = base_layout(base)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    try:
        _write(weights, layout, partial, dtype)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)  # the server never sees a half-written file
    return out


def _write(weights: Mapping[str, Any], layout: BaseLayout, partial: Path, dtype: ExportType) -> None:
    from gguf import GGMLQuantizationType, GGUFWriter, LlamaFileType

    writer = GGUFWriter(partial, arch=layout.architecture)
    for key, value, value_type, item_type in layout.fields:
        writer.add_key_value(key, value, value_type, sub_type=item_type)
    writer.add_file_type(LlamaFileType.MOSTLY_F16 if dtype == "f16" else LlamaFileType.ALL_F32)
    for gguf_name in layout.tensor_names:
        name = hf_name(gguf_name)
        if name not in weights:
            raise KeyError(f"the trained weights have no {name!r} (GGUF tensor {gguf_name!r})")
        values = to_gguf(gguf_name, _as_float32(weights[name]), layout.config)
        # llama.cpp keeps 1-D tensors (norms) in float32 whatever the file type.
        half = dtype == "f16" and values.ndim > 1
        values = values.astype(np.float16 if half else np.float32)
        writer.add_tensor(gguf_name, values, raw_dtype=GGMLQuantizationType.F16 if half else GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _as_float32(tensor: Any) -> np.ndarray[Any, Any]:
    if hasattr(tensor, "detach"):
        tensor = tensor.detach().to("cpu").float().numpy()
    return np.asarray(tensor, dtype=np.float32)


@contextmanager
def merged_weights(model: Any) -> Iterator[dict[str, Any]]:
    """The model's weights under plain Hugging Face names, LoRA adapters merged in for the duration."""
    merge = getattr(model, "merge_adapter", None)
    if merge is None:
        yield dict(model.state_dict())
        return
    merge()
    try:
        base = model.get_base_model()
        yield {
            name.replace(".base_layer.", "."): value
            for name, value in base.state_dict().items()
            if "lora_" not in name and "modules_to_save" not in name
        }
    finally:
        model.unmerge_adapter()
