"""Weight sync against a real vLLM server (its CPU build): after `push`, vLLM samples what the trainer's model
would, greedy token for greedy token and logprob for logprob, and no cached prefix serves older weights.
Slow (`just test-vllm`): the server takes about a minute to start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from engine.vllm_server import VLLMServer
from tests.policy import trainable
from tests.trainers.test_weight_sync import TARGET, prompt_ids, teach
from tests.vllm import LORA_RANK, served_greedy, trainer_logprobs
from trainers.weight_sync import VLLMLoRASync, VLLMReloadSync

pytestmark = pytest.mark.slow

# Both sides float32: an unchanged model measured 2e-5 apart; a trained LoRA runs unmerged on vLLM.
TOLERANCE = 2e-3


def assert_in_sync(url: str, name: str, model: Any, prompt: list[int]) -> list[int]:
    """Along vLLM's greedy path: the trainer's logprobs, and each token the trainer's argmax too (up to ties)."""
    sampled, served = served_greedy(url, name, prompt)
    chosen, ours = trainer_logprobs(model, prompt, sampled)
    for step, (token, mine, theirs) in enumerate(zip(sampled, ours, served, strict=True)):
        assert abs(mine - theirs) < TOLERANCE, f"step {step}: vLLM {theirs:.5f}, trainer {mine:.5f}"
        if chosen[step] != token:  # a near tie may break either way
            _, (best,) = trainer_logprobs(model, prompt + sampled[:step], [chosen[step]])
            assert best - mine < TOLERANCE, f"step {step}: the trainer prefers {chosen[step]} by {best - mine:.5f}"
    return sampled


def test_an_adapter_hot_loads_into_vllm_and_replaces_the_last(
    vllm_server: VLLMServer, embedded_policy: tuple[Any, Any], tmp_path: Path
) -> None:
    from peft import LoraConfig, get_peft_model

    model, tokenizer = trainable(embedded_policy)
    prompt = prompt_ids(tokenizer)
    url = vllm_server.base_url
    base, _ = served_greedy(url, "default", prompt)
    torch.manual_seed(0)  # the adapter's initial A: the same training, run after run
    lora = get_peft_model(model, LoraConfig(r=LORA_RANK, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    sync = VLLMLoRASync([url], "spadework-policy", tmp_path)
    sync.start(lora, resumed=False)  # a fresh adapter (B = 0): the base model's tokens under the adapter's name
    assert sync.served_model == "spadework-policy"
    assert assert_in_sync(url, "spadework-policy", lora, prompt) == base
    teach(lora, tokenizer, prompt, lr=1e-2, steps=6)
    assert sync.push(lora) == 2
    # The same prompt again: its prefix is cached from version 1, and must not be served.
    after = assert_in_sync(url, "spadework-policy", lora, prompt)
    assert after != base and tokenizer.decode(after).startswith(TARGET[:6]), tokenizer.decode(after)
    assert served_greedy(url, "default", prompt)[0] == base, "the base model is untouched"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["spadework-policy-v00002"]


def test_full_weights_reload_in_place_from_a_directory(
    vllm_server: VLLMServer, embedded_policy: tuple[Any, Any], tmp_path: Path
) -> None:
    model, tokenizer = trainable(embedded_policy)
    original = {name: value.clone() for name, value in model.state_dict().items()}
    prompt = prompt_ids(tokenizer)
    url = vllm_server.base_url
    sync = VLLMReloadSync([url], tmp_path)
    try:
        sync.start(model, resumed=False)
        before = assert_in_sync(url, "default", model, prompt)
        teach(model, tokenizer, prompt, lr=1e-4)
        assert sync.push(model) == 2 and sync.served_model is None
        after = assert_in_sync(url, "default", model, prompt)  # same prompt: a cached prefix would be stale
        assert after != before and tokenizer.decode(after).startswith(TARGET[:10])
        assert sorted(path.name for path in tmp_path.iterdir()) == ["policy-v00002"]
    finally:  # the session's server goes back to the embedded model's weights for the tests after this one
        with torch.no_grad():
            model.load_state_dict(original)
        sync.push(model)
