"""Weight sync on CPU: after `push`, the embedded server samples exactly what the trainer's model would."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from safetensors.torch import load_file

from engine.llama_server import EmbeddedServer, ServerSettings
from engine.local_models import default_gguf
from tests.engine.conftest import mock_model
from tests.policy import trainable
from trainers.checkpoint import LoraSettings, load_policy
from trainers.weight_sync import GGUFReloadSync, VLLMLoRASync, WeightSyncError

# Largest |server logprob - trainer logprob| over the greedy tokens. Measured here: an unchanged model gives
# 0.003 (f32) and 0.005 (f16); after the LoRA steps below, f16 gave 0.026.
TOLERANCE = {"f32": 0.01, "f16": 0.05}
STEPS = 16  # greedy tokens compared
TARGET = " Spadework digs deep, one tool call at a time."


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedServer]:
    with EmbeddedServer(ServerSettings(model=default_gguf(), parallel=1, context=1024)) as running:
        yield running


@pytest.fixture(scope="module")
def policy(embedded_policy: tuple[Any, Any]) -> tuple[Any, Any]:
    return trainable(embedded_policy)


def prompt_ids(tokenizer: Any) -> list[int]:
    messages = [{"role": "user", "content": "Write one sentence about the sea."}]
    return [int(i) for i in tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)]


def served(server: EmbeddedServer, prompt: list[int]) -> tuple[list[int], list[float]]:
    body = {"prompt": prompt, "max_tokens": STEPS, "temperature": 0, "logprobs": 1}
    content = httpx.post(server.base_url + "/completions", json=body, timeout=120).json()["choices"][0]["logprobs"]
    return [entry["id"] for entry in content["content"]], [entry["logprob"] for entry in content["content"]]


@torch.no_grad()
def trainer_logprobs(model: Any, prompt: list[int], continuation: list[int]) -> torch.Tensor:
    """The trainer model's log-distribution at each step of `continuation` (teacher-forced)."""
    model.eval()
    logits = model(torch.tensor([prompt + continuation])).logits[0, len(prompt) - 1 : -1]
    return logits.float().log_softmax(-1)


def teach(model: Any, tokenizer: Any, prompt: list[int], lr: float, steps: int = 4) -> None:
    """A few optimizer steps towards TARGET, enough to change the greedy continuation."""
    target = tokenizer.encode(TARGET, add_special_tokens=False)
    ids = torch.tensor([prompt + target])
    labels = ids.clone()
    labels[0, : len(prompt)] = -100
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for _ in range(steps):
        model(ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def assert_in_sync(server: EmbeddedServer, model: Any, prompt: list[int], sync: GGUFReloadSync) -> list[int]:
    """Along the server's greedy path: the same logprobs, and each token the trainer's argmax too (up to ties)."""
    tolerance = TOLERANCE[sync.dtype]
    server_ids, server_logprobs = served(server, prompt)
    trainer = trainer_logprobs(model, prompt, server_ids)
    for step, (token, logprob) in enumerate(zip(server_ids, server_logprobs, strict=True)):
        gap = abs(trainer[step, token].item() - logprob)
        assert gap < tolerance, f"step {step}: server and trainer logprobs differ by {gap:.4f}"
        behind = (trainer[step].max() - trainer[step, token]).item()
        assert behind < tolerance, f"step {step}: the trainer's greedy token beats the server's by {behind:.4f}"
    return server_ids


@pytest.mark.slow  # ~20 s; the default suite covers the plain-model export in the LoRA test's first push
def test_full_update_reaches_the_server(server: EmbeddedServer, policy: tuple[Any, Any], tmp_path: Path) -> None:
    model, tokenizer = policy
    prompt = prompt_ids(tokenizer)
    before, _ = served(server, prompt)
    teach(model, tokenizer, prompt, lr=1e-4)
    sync = GGUFReloadSync(server, default_gguf(), tmp_path, dtype="f32")
    assert sync.push(model) == 1
    after = assert_in_sync(server, model, prompt, sync)
    assert after != before
    assert tokenizer.decode(after).startswith(TARGET[:10])


def test_start_serves_the_untrained_policy_as_exported(
    server: EmbeddedServer, policy: tuple[Any, Any], tmp_path: Path
) -> None:
    """Before any update the server must already run the export, not the quantized base it started on:
    the held-out measurement before training and the one after must differ only by the training."""
    model, tokenizer = policy
    server.reload(default_gguf())
    sync = GGUFReloadSync(server, default_gguf(), tmp_path, dtype="f16")
    sync.start(model, resumed=False)
    assert sync.version == 1
    assert server.settings.model.parent == tmp_path
    assert_in_sync(server, model, prompt_ids(tokenizer), sync)


def test_lora_is_merged_for_the_server(server: EmbeddedServer, policy: tuple[Any, Any], tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model, tokenizer = policy
    prompt = prompt_ids(tokenizer)
    sync = GGUFReloadSync(server, default_gguf(), tmp_path, dtype="f16")
    sync.push(model)
    before = assert_in_sync(server, model, prompt, sync)
    lora = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    teach(lora, tokenizer, prompt, lr=1e-2, steps=6)
    assert sync.push(lora) == 2
    after = assert_in_sync(server, lora, prompt, sync)
    assert after != before
    assert len(list(tmp_path.glob("*.gguf"))) == 1  # the superseded export was removed


def test_an_adapter_is_hot_loaded_into_vllm_style_servers(tmp_path: Path, embedded_policy: tuple[Any, Any]) -> None:
    """`VLLMLoRASync` against a real HTTP server with vLLM's `/v1/load_lora_adapter` (the mock model's)."""
    model, _ = load_policy(default_gguf(), LoraSettings(rank=2, alpha=4, targets=("q_proj",)))
    plain, _ = embedded_policy
    with mock_model() as url:
        sync = VLLMLoRASync([url, url], "policy", tmp_path)
        sync.start(model, resumed=False)  # the fresh adapter, before anything is sampled
        with torch.no_grad():
            next(p for name, p in model.named_parameters() if "lora_B" in name).add_(0.5)
        assert sync.push(model) == 2 and sync.served_model == "policy"
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
        with pytest.raises(WeightSyncError, match="needs a LoRA policy"):
            sync.push(plain)
        with pytest.raises(
            WeightSyncError, match=r"/elsewhere/v1/load_lora_adapter: 404; start vLLM with --enable-lora"
        ):
            VLLMLoRASync([url.replace("/v1", "/elsewhere/v1")], "policy", tmp_path / "other").push(model)
    served = Path(stats["adapters"]["policy"]["path"])
    assert served == (tmp_path / "policy-v00002").resolve() and not (tmp_path / "policy-v00001").exists()
    assert stats["adapters"]["policy"]["loads"] == 4 and stats["prefix_cache_resets"] == 4  # 2 pushes x 2 servers
    assert (
        stats["adapters"]["policy"]["sha256"]
        == hashlib.sha256((served / "adapter_model.safetensors").read_bytes()).hexdigest()
    )
    pushed = load_file(served / "adapter_model.safetensors")
    assert any(tensor.abs().max() == 0.5 for name, tensor in pushed.items() if "lora_B" in name)
