"""`tokens` mode: the engine renders with the chat template, the server samples ids, the trace is exact."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.clients import Route, TokensClient
from engine.endpoints import EndpointPool
from engine.settings import EpisodeSettings
from engine.templates import TokenTemplate, byte_tokenizer, load_template
from engine.trajectory import EpisodeKey, Turn
from spadework.testing.mock_server import fake_logprob
from tests.engine.conftest import mock_model, play
from toolworlds.registry import load_world
from toolworlds.tool import FINISH_FUNCTION


@pytest.fixture(scope="module")
def tokens_url() -> Iterator[str]:
    with mock_model("--tokenizer", "bytes") as url:
        yield url


@pytest.mark.anyio
@pytest.mark.parametrize("world", ["banking", "orders"])
async def test_tokens_mode_trace_is_exact(tmp_path: Path, tokens_url: str, world: str) -> None:
    stats, records = await play(tmp_path, [tokens_url], world=world, tasks=4, mode="tokens", tokenizer="bytes")
    assert stats.statuses["ok"] == 4
    template = load_template("bytes")
    tools = [*load_world(world).openai_tools(), FINISH_FUNCTION]
    for record in records:
        trace = record.tokens
        assert record.reward == 1.0 and trace is not None and trace.exact and trace.rerender_matches
        held = trace.prompt_ids + trace.completion_ids
        # Appending turn by turn gave exactly what rendering the finished conversation at once gives.
        assert held == template.render(record.messages, tools)[: len(held)]
        assert len(trace.completion_ids) == len(trace.loss_mask) == len(trace.logprobs)
        sampled = [token for token, mask in zip(trace.completion_ids, trace.loss_mask, strict=True) if mask]
        replies = [m["content"] for m in record.messages if m["role"] == "assistant"]
        eos = template.eos_token_id
        assert sampled == [t for reply in replies for t in [*template.tokenizer.encode(reply), eos]]
        for token, mask, logprob in zip(trace.completion_ids, trace.loss_mask, trace.logprobs, strict=True):
            assert logprob == (fake_logprob(token) if mask else 0.0)


@pytest.mark.anyio
async def test_call_schema_sends_the_call_grammar_and_reads_bare_calls(tmp_path: Path, tokens_url: str) -> None:
    stats, records = await play(tmp_path, [tokens_url], world="orders", tasks=3, mode="tokens", tokenizer="bytes",
                                call_schema=True)  # fmt: skip
    assert stats.statuses["ok"] == 3 and all(record.reward == 1.0 for record in records)
    for record in records:
        replies = [m["content"] for m in record.messages if m["role"] == "assistant"]
        assert all(reply.startswith('{"name": ') for reply in replies), "the mock answers a grammar with bare JSON"
        assert record.malformed_turns == 0 and record.tokens is not None and record.tokens.exact


def test_a_reply_ending_in_another_stop_token_is_read_without_it() -> None:
    template = load_template("bytes")
    endoftext = template.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    sampled = [*template.tokenizer.encode('{"name": "finish", "arguments": {}}'), endoftext]
    assert template.reply_text(sampled) == '{"name": "finish", "arguments": {}}'


def test_continuation_closes_a_truncated_turn_itself() -> None:
    template = load_template("bytes")
    sampled = template.tokenizer.encode('<tool_call>{"name": "a"')  # cut off by max_tokens: no stop token
    glue = template.continuation(sampled, truncated=True, messages=[{"role": "user", "content": "go on"}])
    assert glue[: len(template.closing)] == template.closing
    finished = [*sampled, template.eos_token_id]
    glue = template.continuation(finished, truncated=False, messages=[{"role": "user", "content": "go on"}])
    assert glue[0] != template.eos_token_id  # the model sampled the stop token; it is not added twice


def test_a_template_that_rewrites_history_is_refused() -> None:
    tokenizer = byte_tokenizer()
    # Renders only the last two messages: appending a message changes what came before.
    tokenizer.chat_template = (
        "{% for m in messages[-2:] %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    template = TokenTemplate(tokenizer)
    with pytest.raises(ValueError, match="not prefix-preserving"):
        template.continuation([template.eos_token_id], truncated=False, messages=[{"role": "user", "content": "x"}])


def test_a_missing_tokenizer_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no tokenizer at"):
        load_template(str(tmp_path / "nowhere"))


def test_sampled_ids_are_read_in_vllm_and_llama_cpp_shapes() -> None:
    from engine.clients import _sampled_ids_and_logprobs
    from engine.transport import EndpointFailure

    vllm = {"token_ids": [5, 6], "logprobs": {"token_logprobs": [-0.1, -0.2]}}
    assert _sampled_ids_and_logprobs(vllm) == ([5, 6], [-0.1, -0.2])
    llama_cpp = {"logprobs": {"content": [{"id": 5, "logprob": -0.1}, {"id": 6, "logprob": -0.2}]}}
    assert _sampled_ids_and_logprobs(llama_cpp) == ([5, 6], [-0.1, -0.2])
    with pytest.raises(EndpointFailure, match="needs the sampled ids"):
        _sampled_ids_and_logprobs({"text": "no ids here"})


class _CountingStages:
    """Two stages under a grammar the mock ignores (it answers as the oracle agent); records the tokens left."""

    def __init__(self) -> None:
        self.left: list[int] = []
        self.texts: list[str] = []

    def grammar(self, tokens_left: int) -> str | None:
        self.left.append(tokens_left)
        return 'root ::= "x"' if len(self.left) <= 2 else None

    def wrote(self, text: str) -> None:
        self.texts.append(text)


@pytest.mark.anyio
async def test_staged_sampling_tells_each_stage_the_tokens_left_of_the_reply(tokens_url: str) -> None:
    """A stage's grammar may depend on how much of the turn's budget is left (a staged spec offers more
    records only while it can still close): each stage is told the budget less every token kept before it."""
    budget = 400
    settings = EpisodeSettings(mode="tokens", tokenizer="bytes", max_tokens_per_turn=budget)
    stages = _CountingStages()
    async with EndpointPool.open([tokens_url]) as pool:
        with pool.sticky() as endpoint:
            route = Route(pool, endpoint, EpisodeKey(world="banking", seed=0).header("test"), 30.0)
            client = TokensClient(route, settings, [], load_template("bytes"))
            messages = [{"role": "system", "content": "Design a world."}, {"role": "user", "content": "Go."}]
            client.start(messages)
            turn = Turn(index=0, endpoint=endpoint.url, started_s=0.0, latency_s=0.0, attempts=0)
            await client.sample_stages(stages, turn)
    first = len(stages.texts[0].encode())  # a byte a token
    assert first > 0 and stages.left[:2] == [budget, budget - first], (stages.left, stages.texts)
