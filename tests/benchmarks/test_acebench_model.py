"""ACEBench Agent played by a model through the engine (`spadework bench acebench`), against real HTTP servers.

The scripted mock says each task's first milestone path and plays a user who finishes when the agent is done
(`--script acebench`): through the whole model path, in both protocols, every task must get the verdict the
same path gets when replayed in process. The embedded model then plays two real tasks, one with its own
simulated user.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.acebench.checker import end_state_correct
from benchmarks.acebench.data import AceTask, load_tasks
from benchmarks.acebench.environment import WORLD, AceConversation, Protocol
from benchmarks.acebench.prompts import STOP_PHRASE, USER_SAMPLING
from benchmarks.acebench.replay import DONE, GO_ON, OPENING
from benchmarks.parties import Party
from engine.endpoints import EndpointPool
from engine.store import read_records
from tests.benchmarks import runs
from tests.benchmarks.runs import results
from tests.benchmarks.test_acebench import replay
from tests.engine.conftest import mock_model


def bench(*arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return runs.bench("acebench", "--no-progress", *arguments, timeout=timeout)


@pytest.fixture(scope="module")
def scripted() -> Iterator[str]:
    with mock_model("--script", "acebench") as url:
        yield url


@pytest.fixture(scope="module")
def tasks() -> list[AceTask]:
    return load_tasks()


@pytest.mark.parametrize("protocol", ["prompt", "fc"])
def test_milestones_said_through_the_engine_get_their_in_process_verdicts(
    tmp_path: Path, scripted: str, tasks: list[AceTask], protocol: str
) -> None:
    completed = bench("--endpoint", scripted, "--protocol", protocol, "--out", str(tmp_path))
    assert completed.returncode == 0, completed.stderr[-2000:]
    records = {record.key.seed: record for record in read_records(tmp_path)}
    assert sorted(records) == list(range(100)) and all(record.status == "ok" for record in records.values())
    expected = {seed: end_state_correct(replay(task, task.milestones[0])[0].state(), task.ground_truth)
                for seed, task in enumerate(tasks)}  # fmt: skip
    assert {seed: record.reward == 1.0 for seed, record in records.items()} == expected
    passed = Counter((tasks[seed].language, tasks[seed].kind) for seed, ok in expected.items() if ok)
    summary = results(tmp_path)
    splits = {(split["language"], split["kind"]): split["correct"] for split in summary["score"]["splits"]}
    assert splits == dict(passed) and sum(passed.values()) >= 69  # the reference's own replay figure
    assert summary["score"]["agent"]["en"] == round(
        (passed["en", "multi_turn"] / 30 + passed["en", "multi_step"] / 20) / 2, 3
    )
    assert summary["user_model"] == "default" and summary["label"] == f"default ({protocol})"
    note = "the benchmark's own protocol" if protocol == "prompt" else "not comparable"
    assert note in (tmp_path / "results.md").read_text()
    offered = httpx.get(scripted.removesuffix("/v1") + "/stats").json()["offered"]
    users = [episode for episode in offered if episode.startswith(f"{tmp_path.name}/user/acebench/")]
    assert len(users) == sum(task.kind == "multi_turn" for task in tasks)  # one simulated user per multi_turn task


def test_a_run_resumes_grows_and_refuses_another_protocol(tmp_path: Path, scripted: str) -> None:
    chosen = ("--endpoint", scripted, "--languages", "zh", "--kinds", "multi_step", "--out", str(tmp_path))
    assert bench(*chosen, "--limit", "2").returncode == 0
    before = [record.key.seed for record in read_records(tmp_path)]
    assert bench(*chosen, "--limit", "5").returncode == 0
    seeds = [record.key.seed for record in read_records(tmp_path)]
    assert seeds[:2] == before and sorted(seeds) == [80, 81, 82, 83, 84]  # zh multi_step starts at 80
    assert results(tmp_path)["score"]["splits"][0]["total"] == 5
    other = bench(*chosen, "--protocol", "fc")
    assert other.returncode == 2 and "differs in: protocol" in other.stderr


def test_bad_data_ids_and_choices_are_named(tmp_path: Path) -> None:
    missing = bench("--data", str(tmp_path / "nowhere"), "--endpoint", "http://127.0.0.1:9/v1")
    assert missing.returncode == 2 and "nowhere does not exist" in missing.stderr and "data_all/" in missing.stderr
    (tmp_path / "data_en").mkdir()
    partial = bench("--data", str(tmp_path), "--endpoint", "http://127.0.0.1:9/v1")
    assert partial.returncode == 2 and "data_agent_multi_turn.json is missing" in partial.stderr
    unknown = bench("--ids", "agent_multi_turn_99", "--endpoint", "http://127.0.0.1:9/v1")
    assert unknown.returncode == 2 and "no ACEBench Agent task agent_multi_turn_99" in unknown.stderr
    language = bench("--languages", "fr", "--endpoint", "http://127.0.0.1:9/v1")
    assert language.returncode == 2 and "unknown fr: choose from en, zh" in language.stderr


@pytest.mark.slow  # ~30 s of the real model: `just test-slow`
def test_the_embedded_model_plays_two_real_tasks_one_with_its_own_simulated_user(tmp_path: Path) -> None:
    """The default: SmolLM2-135M as the agent and as the user, dialogues cut at 4 messages to keep it short."""
    ids = "en/agent_multi_step_0,en/agent_multi_turn_0"
    completed = bench("--ids", ids, "--max-messages", "4", "--max-tokens", "24", "--out", str(tmp_path), timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    records = list(read_records(tmp_path))
    assert sorted(record.key.seed for record in records) == [0, 30]
    for record in records:
        assert record.status == "ok", record.detail
        card = json.loads(record.scorecard or "{}")
        assert 2 <= card["messages"] <= 5 and record.reward in (0.0, 1.0)  # the opening and at most 4 more
    summary = results(tmp_path)
    assert summary["endpoint"].startswith("the embedded server (") and summary["user_endpoint"] == summary["endpoint"]
    assert "not comparable" in (tmp_path / "results.md").read_text()  # cut at 4 messages


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(("protocol", "told"), [("prompt", f"user:{GO_ON}\n"), ("fc", GO_ON)])
async def test_the_simulated_user_answers_text_and_the_agent_is_told_in_its_protocols_form(
    scripted: str, tasks: list[AceTask], protocol: Protocol, told: str
) -> None:
    async with EndpointPool.open([scripted]) as pool:
        dialogue = AceConversation(tasks, protocol, Party(pool, "default", "talk", WORLD, sampling=USER_SAMPLING))
        task = await dialogue.reset(0)  # en multi_turn 0: the user opens
        assert task.instruction == OPENING and [m.sender for m in dialogue.dialogue] == ["user"]
        turn = await dialogue.user_turn("Whom should I write to?")
        assert turn is not None and turn.content == told
        assert [(m.sender, m.recipient) for m in dialogue.dialogue] == [("user", "agent"), ("agent", "user"),
                                                                        ("user", "agent")]  # fmt: skip
        assert await dialogue.user_turn(DONE) is None  # the user says the stop phrase: the dialogue is over
        assert dialogue.dialogue[-1].content == STOP_PHRASE
