"""One real vLLM server (its CPU build) for every test that needs it in a session: it takes about a minute to start."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.hf_checkpoint import float_checkpoint
from engine.local_models import default_gguf
from engine.vllm_server import VLLMServer, VLLMSettings

LORA_RANK = 8


@pytest.fixture(scope="session")
def vllm_server(model_cache: Any) -> Iterator[VLLMServer]:
    """The embedded model's float checkpoint on vLLM, LoRA hot-loading on; must stop cleanly on SIGTERM."""
    server = VLLMServer(VLLMSettings(model=float_checkpoint(default_gguf()), max_lora_rank=LORA_RANK))
    server.start()
    try:
        yield server
    finally:
        assert server.stop() == 0, "vLLM must stop cleanly on SIGTERM"


def served_greedy(url: str, model: str, prompt: list[int], tokens: int = 16) -> tuple[list[int], list[float]]:
    """What the server decodes greedily after `prompt` under `model` (a served name or an adapter's), with logprobs."""
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0.0, "logprobs": 1,
            "return_token_ids": True, "ignore_eos": True}  # fmt: skip
    response = httpx.post(f"{url}/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text[:500]
    choice = response.json()["choices"][0]
    return choice["token_ids"], choice["logprobs"]["token_logprobs"]


def trainer_logprobs(model: Any, prompt: list[int], sampled: list[int]) -> tuple[list[int], list[float]]:
    """The trainer's greedy choice and its logprob of each sampled token, after `prompt` and the tokens before it."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + sampled])).logits[0, len(prompt) - 1 : -1].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    chosen = logprobs.argmax(dim=-1).tolist()
    return chosen, logprobs.gather(1, torch.tensor(sampled)[:, None])[:, 0].tolist()
