"""Episodes end to end against a real HTTP server, on asyncio and on trio."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.endpoints import EndpointPool
from engine.environments import playing
from engine.rollout import RolloutPlan, run_rollout
from engine.store import TrajectoryStore, read_records
from engine.trajectory import EpisodeRecord
from spadework.testing.mock_server import render, token_ids
from tests.benchmarks.scripted import serving
from tests.engine.conftest import mock_model, play
from toolworlds.checks import code_names
from toolworlds.episode import LocalWorld
from toolworlds.registry import builtin_worlds, load_world

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("world", ["banking", "ticketing", "orders"])
async def test_the_oracle_model_solves_every_world(tmp_path: Path, oracle_url: str, world: str) -> None:
    stats, records = await play(tmp_path, [oracle_url], world=world, tasks=8, hints="both")
    assert len(records) == 16 and stats.statuses["ok"] == 16
    assert {record.key.hinted for record in records} == {False, True}
    for record in records:
        assert record.reward == 1.0 and record.malformed_turns == 0
        assert record.tool_calls == len(record.turns) - 1  # every turn a call, the last one finishes
        assert record.messages[0]["role"] == "system" and record.messages[1]["role"] == "user"
        system = record.messages[0]["content"]  # the world's description for the agent: no code, no indentation
        assert (
            system.startswith(builtin_worlds()[world].description) and "\n    " not in system and not code_names(system)
        )
        assert ("Hint:" in record.messages[1]["content"]) == record.key.hinted
        assert record.messages[-1]["tool_calls"][0]["function"]["name"] == "finish"


async def test_an_episode_ends_on_its_state_before_a_turn_could_outgrow_the_token_budget(
    tmp_path: Path, oracle_url: str
) -> None:
    """A server refuses a prompt longer than its context (llama.cpp: HTTP 400), which made an episode that filled
    it an infrastructure failure, dropped from the measurement. The engine must stop first, and score the state."""
    _, solved = await play(tmp_path / "free", [oracle_url], tasks=1)
    first = solved[0].turns[0]
    assert len(solved[0].turns) >= 2 and first.prompt_tokens and first.completion_tokens
    reply = 512  # max_tokens_per_turn
    # Room for the first turn; a second reply of full length would not fit.
    budget = first.prompt_tokens + first.completion_tokens + reply - 1
    stats, records = await play(tmp_path / "tight", [oracle_url], tasks=1, max_tokens_per_turn=reply,
                                max_episode_tokens=budget)  # fmt: skip
    assert stats.statuses == {"truncated": 1}
    for record in records:
        assert record.cause == "token_budget" and len(record.turns) == 1
        assert record.reward is not None and record.scorecard  # scored on the state the first call left


async def test_each_tool_result_answers_its_call_id(tmp_path: Path, oracle_url: str) -> None:
    _, records = await play(tmp_path, [oracle_url], tasks=3)
    for record in records:
        for before, after in zip(record.messages, record.messages[1:], strict=False):
            if before.get("tool_calls") and after["role"] == "tool":
                assert after["tool_call_id"] == before["tool_calls"][0]["id"]
                json.loads(after["content"])


@pytest.mark.parametrize("style", ["hermes", "json", "python"])
async def test_text_protocols_end_to_end(tmp_path: Path, style: str) -> None:
    with mock_model("--style", style) as url:
        stats, records = await play(tmp_path, [url], world="orders", tasks=5)
    assert stats.statuses["ok"] == 5 and all(record.reward == 1.0 for record in records)
    assert all(record.malformed_turns == 0 for record in records)
    # Results of calls written as text come back as a user message, since there is no call id to answer.
    assert any("<tool_response>" in message["content"] for message in records[0].messages if message["role"] == "user")


async def test_constrained_mode_sends_the_schema_and_reads_json(tmp_path: Path, oracle_url: str) -> None:
    stats, records = await play(tmp_path, [oracle_url], world="ticketing", tasks=5, mode="constrained")
    assert stats.statuses["ok"] == 5 and all(record.reward == 1.0 for record in records)
    assert "The tools:" in records[0].messages[0]["content"]
    assert all("tool_calls" not in message for message in records[0].messages)


async def test_token_trace_is_exact_against_the_servers_own_ids(tmp_path: Path, oracle_url: str) -> None:
    _, records = await play(tmp_path, [oracle_url], tasks=4, token_ids=True)
    for record in records:
        trace = record.tokens
        assert trace is not None and trace.exact
        # Prompt + completion is the server's rendering of the whole conversation, byte for byte.
        assert trace.prompt_ids + trace.completion_ids == token_ids(render(record.messages))
        assert len(trace.loss_mask) == len(trace.completion_ids) == len(trace.logprobs)
        # Mask 1 exactly on what the model sampled: each assistant message as the server rendered it.
        sampled = bytes(t for t, m in zip(trace.completion_ids, trace.loss_mask, strict=True) if m).decode()
        assistant = [render([m])[len("<|assistant|>") :] for m in record.messages if m["role"] == "assistant"]
        assert sampled == "".join(assistant)
        assert all(lp < 0 for lp, m in zip(trace.logprobs, trace.loss_mask, strict=True) if m)
        assert all(lp == 0.0 for lp, m in zip(trace.logprobs, trace.loss_mask, strict=True) if not m)


async def test_drift_is_counted_not_hidden(tmp_path: Path) -> None:
    with mock_model("--drift") as url:
        stats, records = await play(tmp_path, [url], tasks=4, token_ids=True)
    multi_call = [record for record in records if record.tool_calls >= 1]
    assert multi_call and all(record.tokens is not None and not record.tokens.exact for record in multi_call)
    assert stats.drifted == len(multi_call)
    for record in multi_call:  # in completion order, which varies with load: check each against its own history
        assert record.tokens is not None
        held, served = render(record.messages), render(record.messages, drift=True)
        position = next(i for i, (a, b) in enumerate(zip(held, served, strict=False)) if a != b)
        assistant = [message for message in record.messages if message["role"] == "assistant"]
        changed = next(i for i, m in enumerate(assistant) if render([m]) != render([m], drift=True))
        # Drift shows on the first request after the first re-rendered call, at the first byte that changed.
        assert (record.tokens.drift[0].turn, record.tokens.drift[0].position) == (changed + 1, position)
    assert {r.tokens.drift[0].turn for r in multi_call if r.tokens} == {1, 2}  # task 1's first call has no arguments


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # ~10 s of timeouts per backend; trio: the slow test below
async def test_faults_at_twenty_percent_are_marked_and_counted(tmp_path: Path) -> None:
    with mock_model("--fault-rate", "0.2", "--hang", "30", "--seed", "3") as url:  # a hang is cut at 0.5 s
        stats, records = await play(tmp_path, [url], tasks=40, concurrency=16, request_timeout_s=0.5)
    assert len(records) == 40 == stats.done
    assert len({record.key.text for record in records}) == 40
    by_status = {status: [r for r in records if r.status == status] for status in ("ok", "truncated", "infra_error")}
    assert sum(map(len, by_status.values())) == 40
    assert by_status["infra_error"], "a 20% fault rate over 40 episodes must break some"
    assert by_status["ok"], "retries must carry most episodes through"
    for record in by_status["infra_error"]:
        assert record.reward is None and record.cause is not None and record.cause.startswith("endpoint:")
    assert all(record.reward == 1.0 for record in by_status["ok"])
    retried = [turn for record in records for turn in record.turns if turn.attempts > 1]
    assert retried, "5xx, hangs and dropped connections are retried"
    assert sum(record.malformed_turns for record in records) == stats.malformed_turns > 0


@pytest.mark.slow
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_faults_at_twenty_percent_are_marked_and_counted_under_trio(tmp_path: Path) -> None:
    await test_faults_at_twenty_percent_are_marked_and_counted(tmp_path)


async def test_a_model_that_only_writes_garbage_is_truncated_not_crashed(tmp_path: Path) -> None:
    with mock_model("--script", "malformed") as url:
        stats, records = await play(tmp_path, [url], tasks=3, max_turns=4)
    assert stats.statuses["truncated"] == 3
    for record in records:
        assert record.cause == "turn_limit" and record.malformed_turns == 4 and record.reward is not None
        assert record.reward < 1.0
        assert "could not be used" in record.messages[-1]["content"]


async def test_random_model_plays_without_errors(tmp_path: Path) -> None:
    with mock_model("--script", "random") as url:
        stats, _ = await play(tmp_path, [url], tasks=10, max_turns=8)
    assert stats.statuses["infra_error"] == 0
    assert stats.mean_reward is not None and stats.mean_reward < 0.5


async def test_episodes_stick_to_one_endpoint_and_load_spreads(tmp_path: Path, oracle_url: str) -> None:
    with mock_model("--latency", "0.01") as second:
        _, records = await play(tmp_path, [oracle_url, second], tasks=12, concurrency=8)
    used = [{turn.endpoint for turn in record.turns} for record in records]
    assert all(len(endpoints) == 1 for endpoints in used)
    counts = [sum(1 for endpoints in used if url in endpoints) for url in (oracle_url, second)]
    assert min(counts) >= 3, counts


async def test_episode_deadline_is_an_infra_error(tmp_path: Path) -> None:
    with mock_model("--latency", "0.3") as url:
        stats, records = await play(tmp_path, [url], tasks=2, episode_timeout_s=0.5)
    assert stats.statuses["infra_error"] == 2
    assert {record.cause for record in records} == {"episode_timeout"}


def most_at_once(records: list[EpisodeRecord]) -> int:
    """The most episodes that were live at the same moment."""
    edges = sorted([(r.started_at, 1) for r in records] + [(r.started_at + r.duration_s, -1) for r in records])
    live = peak = 0
    for _, step in edges:
        live += step
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("shared", [True, False])
async def test_rollouts_into_several_stores_can_share_one_limit(tmp_path: Path, shared: bool) -> None:
    import anyio

    with mock_model("--latency", "0.05") as url:
        async with EndpointPool.open([url]) as pool:
            limit = anyio.Semaphore(2)

            async def fill(name: str) -> None:
                plan = RolloutPlan(run=name, world="banking", tasks=4, samples=2)
                with TrajectoryStore.open(tmp_path / name, plan) as store:
                    await run_rollout(
                        plan, store, pool, playing(LocalWorld(load_world("banking"))), limit if shared else 2
                    )

            async with anyio.create_task_group() as group:
                for name in ("a", "b"):
                    group.start_soon(fill, name)
    records = [record for name in ("a", "b") for record in read_records(tmp_path / name)]
    assert len(records) == 16
    if shared:
        assert most_at_once(records) == 2, "one limit over both stores"
    else:
        assert most_at_once(records) > 2, "each store's own limit"


def _reply(message: object) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (None, "choices[0].message is NoneType, not an object"),
        ({"role": "assistant", "content": [{"type": "text", "text": "x"}]}, "content is list, not a string or null"),
        ({"role": "assistant", "content": None, "tool_calls": "oops"}, "tool_calls is not a list of calls"),
        ({"role": "assistant", "content": "answer \ud800"}, "not valid Unicode text"),
    ],
    ids=["null message", "content parts", "tool_calls a string", "lone surrogate"],
)
def test_a_reply_of_the_wrong_shape_is_the_endpoints_failure_not_a_crash(
    tmp_path: Path, message: object, problem: str
) -> None:
    with serving(lambda body: _reply(message)) as url:  # a server with an event loop of its own: played from sync
        stats, records = anyio.run(functools.partial(play, tmp_path, [url], tasks=2))
    assert stats.statuses == {"infra_error": 2}
    for record in records:
        assert record.cause == "endpoint:bad_response" and record.detail is not None and problem in record.detail


def test_a_call_whose_arguments_hold_a_lone_surrogate_is_refused_and_the_episode_goes_on(tmp_path: Path) -> None:
    arguments = '{"name": "half an emoji \\ud83d"}'  # JSON text: the escape decodes to a lone surrogate
    call = {"id": "c1", "type": "function", "function": {"name": "find_customer", "arguments": arguments}}
    with serving(lambda body: _reply({"role": "assistant", "content": None, "tool_calls": [call]})) as url:
        _, records = anyio.run(functools.partial(play, tmp_path, [url], tasks=1, max_turns=2))
    (record,) = records
    assert record.status == "truncated" and record.reward is not None
    refusal = json.loads(record.messages[3]["content"])
    assert refusal["error"]["code"] == "invalid_arguments"
    assert refusal["error"]["fields"] == [{"field": "name", "problem": "is not valid Unicode text (a lone surrogate)"}]
