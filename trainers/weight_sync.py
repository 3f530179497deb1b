"""Getting the trainer's current weights to the servers that sample rollouts.

`WeightSync` is the one interface the training loop sees; once `push` returns, every new request is
sampled from the pushed weights. Four ways:

- `GGUFReloadSync` (CPU): export the policy to a GGUF (LoRA merged) and restart the embedded llama.cpp
  server on it, on the same port, so the engine's endpoint URL stays valid;
- `VLLMLoRASync`: save the LoRA adapter where the vLLM servers can read it and hot-load it under one name
  (`/v1/load_lora_adapter`, always in place); requests name the adapter as their model;
- `VLLMReloadSync`: save all weights (LoRA merged) as safetensors where the vLLM servers can read them and
  have each reload them in place (`reload_weights` through vLLM's `/collective_rpc`): what works where NCCL
  does not, a CPU trainer or vLLM's CPU build (about 1 s for 135M here);
- `VLLMNCCLSync`: stream all weights (LoRA merged) to the vLLM servers over NCCL through TRL's
  `VLLMClient` (vLLM's weight-transfer engine); the trainer needs a CUDA device.

The vLLM syncs reset the servers' prefix caches, so no request reuses attention states computed under
the old weights.
"""

from __future__ import annotations

import shutil
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
    served_model: str | None  # the model name requests must ask for (an adapter's); None: keep the configured one

    def start(self, model: Any, resumed: bool) -> None:
        """Before anything is sampled: make the servers sample from `model` where they do not already."""
        ...

    def push(self, model: Any) -> int: ...


class WeightSyncError(RuntimeError):
    """A server refused or could not take the new weights; the message names the server and why."""


class GGUFReloadSync:
    """CPU weight sync: export to GGUF, then reload the embedded server on it (about 10 s for 135M)."""

    def __init__(self, server: EmbeddedServer, base: Path, workdir: Path, dtype: ExportType = "f16") -> None:
        self.server = server
        self.base = base  # the GGUF the policy came from: its metadata and tokenizer are reused
        self.workdir = workdir
        self.dtype = dtype
        self.version = 0
        self.served_model: str | None = None

    def start(self, model: Any, resumed: bool) -> None:
        # Always, even before any update: the base GGUF is quantized (the embedded default is Q4_1, run by
        # kernels that also quantize activations), the exports are not. Serving the base first would make
        # "before training" a different program from "after" beyond the training, and its number unfair.
        self.push(model)

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


class VLLMLoRASync:
    """LoRA hot-load into vLLM servers started with `--enable-lora` and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=1`.

    Each push saves the adapter as `<directory>/<name>-v<N>` (the servers must see that path: same machine
    or a shared filesystem) and loads it in place under the fixed `name`, so the engine's requests
    (`model=<name>`) need no change. The freshly initialised adapter is pushed at start,
    so even the first rollouts name the adapter.
    """

    def __init__(self, endpoints: list[str], name: str, directory: Path, timeout: float = 600.0) -> None:
        self.endpoints = [url.rstrip("/") for url in endpoints]
        self.name = name
        self.directory = directory
        self.timeout = timeout
        self.version = 0
        self.served_model: str | None = name

    def start(self, model: Any, resumed: bool) -> None:
        self.push(model)

    def push(self, model: Any) -> int:
        if not hasattr(model, "peft_config"):
            raise WeightSyncError("vllm-lora weight sync needs a LoRA policy (policy.lora_rank > 0)")
        started = time.perf_counter()
        version = self.version + 1
        path = (self.directory / f"{self.name}-v{version:05d}").resolve()
        model.save_pretrained(str(path))
        saved = time.perf_counter()
        # In place: replaces the adapter of that name if the server has one (a resumed run against a server
        # still up), loads it otherwise.
        body = {"lora_name": self.name, "lora_path": str(path), "load_inplace": True}
        _load_everywhere(self.endpoints, "/load_lora_adapter", body, self.timeout)
        _drop_superseded(path, self.version)
        self.version = version
        log.info("adapter hot-loaded", version=version, servers=len(self.endpoints), path=str(path),
                 save_s=round(saved - started, 2), load_s=round(time.perf_counter() - saved, 2))  # fmt: skip
        return version


class VLLMReloadSync:
    """Full weights to vLLM servers started with `VLLM_SERVER_DEV_MODE=1`, through a directory they read.

    Each push writes `<directory>/policy-v<N>/model.safetensors` (same machine or a shared filesystem) and asks
    every server to reload its weights from there in place (`POST /collective_rpc` `reload_weights`); the
    served name and the engine's endpoint URLs stay as they are. Pushed at start, so the servers sample from
    the trainer's weights even when they were started on another copy (a resumed run).
    """

    def __init__(self, endpoints: list[str], directory: Path, timeout: float = 600.0) -> None:
        self.endpoints = [_server_root(url) for url in endpoints]
        self.directory = directory
        self.timeout = timeout
        self.version = 0
        self.served_model: str | None = None

    def start(self, model: Any, resumed: bool) -> None:
        self.push(model)

    def push(self, model: Any) -> int:
        from safetensors.torch import save_file

        started = time.perf_counter()
        version = self.version + 1
        path = (self.directory / f"policy-v{version:05d}").resolve()
        path.mkdir(parents=True, exist_ok=True)
        with merged_weights(model) as weights:
            # Each its own copy: safetensors refuses tensors that share storage (tied embeddings).
            tensors = {name: value.detach().to("cpu", copy=True).contiguous() for name, value in weights.items()}
            save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
        saved = time.perf_counter()
        body = {"method": "reload_weights", "kwargs": {"weights_path": str(path)}}
        _load_everywhere(self.endpoints, "/collective_rpc", body, self.timeout)
        _drop_superseded(path, self.version)
        self.version = version
        log.info("weights reloaded", version=version, servers=len(self.endpoints), path=str(path),
                 save_s=round(saved - started, 2), reload_s=round(time.perf_counter() - saved, 2))  # fmt: skip
        return version


class VLLMNCCLSync:
    """All weights to vLLM servers over NCCL (servers started with `VLLM_SERVER_DEV_MODE=1` and
    `--weight-transfer-config '{"backend":"nccl"}'`), through TRL's `VLLMClient`.

    The trainer joins each server's weight-transfer group as rank 0, on its own CUDA device; each server
    gets its own group port. A LoRA policy is merged for the transfer (vLLM serves plain weights).
    """

    def __init__(self, endpoints: list[str], device: str = "cuda:0", group_port: int = 51216) -> None:
        require_cuda_for_nccl()
        self.endpoints = [_server_root(url) for url in endpoints]
        self.device = device
        self.group_port = group_port
        self.version = 0
        self.served_model: str | None = None
        self._clients: list[Any] = []

    def start(self, model: Any, resumed: bool) -> None:
        from trl.generation.vllm_client import VLLMClient

        for index, url in enumerate(self.endpoints):
            client = VLLMClient(base_url=url, group_port=self.group_port + index, connection_timeout=60)
            client.init_communicator(self.device)
            self._clients.append(client)
        if resumed:
            self.push(model)

    def push(self, model: Any) -> int:
        started = time.perf_counter()
        with merged_weights(model) as weights:
            metadata = [(name, str(value.dtype).removeprefix("torch."), list(value.shape))
                        for name, value in weights.items()]  # fmt: skip
            for client in self._clients:
                # NCCL sends from the GPU: a policy pushed before the trainer placed it (resume) is still on the CPU.
                on_device = ((name, value.to(self.device)) for name, value in weights.items())
                with client.weight_update():
                    client.update_named_params(metadata, on_device)
                client.reset_prefix_cache()
        self.version += 1
        log.info("weights streamed", version=self.version, servers=len(self._clients),
                 seconds=round(time.perf_counter() - started, 2))  # fmt: skip
        return self.version


def require_cuda_for_nccl() -> None:
    """Fail before a run starts, not at its first update, where NCCL weight transfer cannot work."""
    import torch

    if not torch.cuda.is_available():
        raise WeightSyncError(
            "vllm-nccl weight sync streams weights over NCCL and needs a CUDA trainer; on a machine without "
            "one, reload full weights from a shared directory (policy.weight_sync=vllm-reload) or train a LoRA "
            "(policy.lora_rank) and hot-load it (policy.weight_sync=vllm-lora)"
        )


def _load_everywhere(urls: list[str], route: str, body: dict[str, Any], timeout: float) -> None:
    """POST `body` to `route` under each server's URL, then drop that server's cached prefixes: none may be
    reused with attention states computed under the old weights."""
    for url in urls:
        _post(f"{url}{route}", body, timeout)
        _post(f"{_server_root(url)}/reset_prefix_cache", None, timeout)


def _drop_superseded(path: Path, served_before: int) -> None:
    """Remove version `served_before` of `path` (`<name>-v<N>`): only the served weights stay on disk; the
    trainer's checkpoints hold its own copies."""
    previous = path.with_name(f"{path.name.rsplit('-v', 1)[0]}-v{served_before:05d}")
    if served_before and previous.is_dir():
        shutil.rmtree(previous)


def _server_root(url: str) -> str:
    """`http://host:8000/v1` -> `http://host:8000`: vLLM's admin routes live beside the OpenAI API."""
    url = url.rstrip("/")
    return url.removesuffix("/v1")


def _post(url: str, body: dict[str, Any] | None, timeout: float) -> None:
    import httpx

    try:
        response = httpx.post(url, json=body, timeout=timeout)
    except httpx.HTTPError as error:
        raise WeightSyncError(f"{url}: {error!r}") from None
    if response.status_code == 404 and url.endswith(("/reset_prefix_cache", "/collective_rpc")):
        raise WeightSyncError(f"{url}: 404; start vLLM with VLLM_SERVER_DEV_MODE=1 (its admin routes)")
    if response.status_code == 404 and url.endswith("/load_lora_adapter"):
        raise WeightSyncError(
            f"{url}: 404; start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 (or the adapter "
            f"path is not visible to the server: {body and body.get('lora_path')})"
        )
    if response.status_code != 200:
        raise WeightSyncError(f"{url}: {response.status_code} {response.text[:500]}")
