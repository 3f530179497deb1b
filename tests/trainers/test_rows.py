"""Training rows from real engine records (tokens mode against the mock model over HTTP): shapes and masks
match the stored traces, infrastructure failures are masked, advantages are centred per group and scaled
per role."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.endpoints import RetryPolicy
from engine.trajectory import TokenTrace
from tests.engine.conftest import mock_model, play
from trainers.rows import TrainingRow, agent_rows, rollout_batch, with_advantages

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def faulty_tokens_url() -> Iterator[str]:
    with mock_model("--tokenizer", "bytes", "--script", "random", "--fault-rate", "0.15", "--faults", "5xx") as url:
        yield url


async def test_rows_are_the_stored_traces_with_infra_failures_masked(tmp_path: Path, faulty_tokens_url: str) -> None:
    _, records = await play(tmp_path, [faulty_tokens_url], world="orders", tasks=6, samples=2, hints="both",
                            mode="tokens", tokenizer="bytes", retry=RetryPolicy(attempts=1), max_turns=4)  # fmt: skip
    rows, skipped = agent_rows(records)
    failed = [r for r in records if r.status == "infra_error"]
    assert failed, "no request failed: the fault rate must be high enough for this test to mean anything"
    assert len(rows) + len(failed) == len(records) == 24
    assert sum(skipped.reasons.values()) == len(failed)
    usable = [r for r in records if r.status != "infra_error"]
    tasks: dict[str, set[tuple[int, bool]]] = {}  # each group: the (seed, hinted) of its plays
    for record, row in zip(usable, rows, strict=True):
        tasks.setdefault(row.group, set()).add((record.key.seed, record.key.hinted))
    assert all(len(found) == 1 for found in tasks.values()), tasks  # orders' tasks open on their own prompts
    for row in rows:
        assert len(row.completion_ids) == len(row.env_mask) == len(row.logprobs)
        assert 0.0 <= row.reward <= 1.0
        assert sum(row.env_mask) > 0
        assert all(value == 0.0 for value, keep in zip(row.logprobs, row.env_mask, strict=True) if not keep)
    assert any(0 in row.env_mask for row in rows)  # tool results between turns stay out of the loss
    assert len({row.group for row in rows}) <= 12  # each task in each hint condition is one GRPO group


def test_drifted_and_tokenless_traces_are_counted_not_used() -> None:
    from engine.trajectory import DriftEvent, EpisodeKey, EpisodeRecord

    def record(tokens: TokenTrace | None) -> EpisodeRecord:
        key = EpisodeKey(world="w", seed=0, sample=0, hinted=False)
        return EpisodeRecord(run="r", key=key, mode="tokens", model="m", status="ok", reward=1.0, messages=[],
                             turns=[], tokens=tokens, started_at=0.0, duration_s=0.0)  # fmt: skip

    good = TokenTrace(prompt_ids=[1, 2], completion_ids=[3, 4], loss_mask=[1, 0], logprobs=[None, 0.0])
    drifted = good.model_copy(update={"drift": [DriftEvent(turn=1, position=0)]})
    rows, skipped = agent_rows([record(good), record(drifted), record(None)])
    assert len(rows) == 1 and rows[0].logprobs == [None, 0.0]  # unknown: TRL gives that token no IS weight
    assert sorted(skipped.reasons) == ["no token ids (play in tokens mode, or chat mode with --token-ids)",
                                       "token drift (the held ids are not what the server sampled)"]  # fmt: skip


def test_plays_that_open_alike_are_one_group_whatever_their_seed() -> None:
    """A designed world is played on seeds 0..K-1 to measure its win rate; when the seed changes only its hidden
    state, the plays open on one prompt and are one GRPO group, so a world the agent sometimes solves teaches
    it. Grouped by seed (every run up to d4ff634), each play was a group of one, with no advantage."""
    from engine.trajectory import EpisodeKey, EpisodeRecord

    def play(seed: int, hinted: bool, opening: list[int], reward: float) -> EpisodeRecord:
        trace = TokenTrace(prompt_ids=opening, completion_ids=[7, 8], loss_mask=[1, 1], logprobs=[-0.5, -0.5])
        key = EpisodeKey(world="worlds/abc.json", seed=seed, sample=0, hinted=hinted)
        return EpisodeRecord(run="r", key=key, mode="tokens", model="m", status="ok", reward=reward, messages=[],
                             turns=[], tokens=trace, started_at=0.0, duration_s=0.0)  # fmt: skip

    plain, hinted, other = [1, 2, 3], [1, 2, 3, 4], [1, 2, 5]
    records = [play(seed, False, plain, reward) for seed, reward in enumerate([0.0, 1.0, 0.0, 0.0])]
    records += [play(seed, True, hinted, 1.0) for seed in range(4)]
    records += [play(4, False, other, 1.0)]  # a seed whose opening differs: a group of its own
    found, _ = agent_rows(records)
    assert [len({r.group for r in found[:4]}), len({r.group for r in found[4:8]})] == [1, 1]
    assert len({found[0].group, found[4].group, found[8].group}) == 3
    scored = with_advantages(found)
    assert scored[1].advantage > 0 > scored[0].advantage  # the one solved play is pushed up, the rest down
    assert all(row.advantage == 0 for row in scored[4:])  # all hinted plays solved; the lone one: no signal


def rows(role: str, group: str, rewards: list[float]) -> list[TrainingRow]:
    return [TrainingRow(role=role, group=group, prompt_ids=[1], completion_ids=[2], logprobs=[0.0], env_mask=[1],
                        reward=reward) for reward in rewards]  # type: ignore[arg-type]  # fmt: skip


def test_advantages_are_centred_per_group_and_scaled_per_role() -> None:
    batch = rows("agent", "a1", [1.0, 0.0]) + rows("agent", "a2", [1.0, 1.0]) + rows("designer", "d1", [0.2, 0.0])
    scored = with_advantages(batch, scale="role")
    advantages = [row.advantage for row in scored]
    assert advantages[2:4] == [0.0, 0.0]  # equal rewards: no signal
    agent = advantages[:4]
    assert sum(agent) == pytest.approx(0.0) and advantages[0] > 0 > advantages[1]
    # each role gets unit scale, although the designer's rewards span 0.2 and the agent's 1.0
    assert statistics.pstdev(agent) == pytest.approx(1.0, abs=1e-3)
    assert statistics.pstdev(advantages[4:]) == pytest.approx(1.0, abs=1e-3)
    grouped = with_advantages(batch, scale="group")
    assert grouped[4].advantage == pytest.approx(1.0, abs=1e-2) and grouped[0].advantage == pytest.approx(1.0, abs=1e-2)
    plain = with_advantages(batch, scale="none")
    assert plain[4].advantage == pytest.approx(0.1) and plain[0].advantage == pytest.approx(0.5)


def test_the_rollout_batch_has_trls_columns() -> None:
    batch = rollout_batch(with_advantages(rows("agent", "g", [1.0, 0.0])))
    assert set(batch) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "role"}
    assert all(len(column) == 2 for column in batch.values())
