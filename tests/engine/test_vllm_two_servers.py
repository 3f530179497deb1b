"""Two real vLLM servers (its CPU build) behind one engine, as a GPU run puts one server per GPU: the episodes
spread over both, each stays on one server and stays token-exact, and one full-weight push reaches both.
Slow (`just test-vllm`): a second server beside the session's takes about a minute to start and 4.3 GiB."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.hf_checkpoint import float_checkpoint
from engine.local_models import default_gguf
from engine.vllm_server import VLLMServer, VLLMSettings
from tests.engine.conftest import play
from tests.policy import trainable
from tests.trainers.test_vllm_weight_sync import assert_in_sync
from tests.trainers.test_weight_sync import TARGET, prompt_ids, teach
from trainers.weight_sync import VLLMReloadSync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def two_urls(vllm_server: VLLMServer, model_cache: Any) -> Iterator[list[str]]:
    second = VLLMServer(VLLMSettings(model=float_checkpoint(default_gguf()), kv_cache_gib=1))
    second.start()
    try:
        yield [vllm_server.base_url, second.base_url]
    finally:
        assert second.stop() == 0, "vLLM must stop cleanly on SIGTERM"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the engine on trio is tested against the mock model


@pytest.mark.anyio
async def test_episodes_spread_over_both_servers_and_stay_token_exact(tmp_path: Path, two_urls: list[str]) -> None:
    checkpoint = float_checkpoint(default_gguf())
    stats, records = await play(tmp_path, two_urls, tasks=20, hints="both", concurrency=16, mode="tokens",
                                tokenizer=str(checkpoint), call_schema=True, max_turns=2,
                                max_tokens_per_turn=64)  # fmt: skip
    assert len(records) == 40 and stats.statuses["ok"] + stats.statuses["truncated"] == 40
    assert stats.drifted == 0 and all(r.tokens is not None and r.tokens.exact for r in records)
    servers = [{turn.endpoint for turn in record.turns} for record in records]
    assert all(len(used) == 1 for used in servers), "an episode keeps its server (and its prefix cache)"
    spread = Counter(used.pop() for used in servers)
    print(f"episodes per server: {dict(spread)}")
    assert len(spread) == 2 and min(spread.values()) >= 10, spread


def test_one_push_reloads_the_weights_of_every_server(
    two_urls: list[str], embedded_policy: tuple[Any, Any], tmp_path: Path
) -> None:
    model, tokenizer = trainable(embedded_policy)
    original = {name: value.clone() for name, value in model.state_dict().items()}
    prompt = prompt_ids(tokenizer)
    sync = VLLMReloadSync(two_urls, tmp_path)
    try:
        sync.start(model, resumed=False)
        before = [assert_in_sync(url, "default", model, prompt) for url in two_urls]
        teach(model, tokenizer, prompt, lr=1e-4)
        assert sync.push(model) == 2
        for url, old in zip(two_urls, before, strict=True):
            after = assert_in_sync(url, "default", model, prompt)  # same prompt: a cached prefix would be stale
            assert after != old and tokenizer.decode(after).startswith(TARGET[:10]), url
    finally:  # the session's server goes back to the embedded model's weights for the tests after this one
        with torch.no_grad():
            model.load_state_dict(original)
        sync.push(model)
