"""`spadework train` end to end against the scripted mock model over HTTP (token ids from SmolLM2's own
tokenizer), with the real sandbox, engine, GRPO update and held-out evaluation; and what each ablation
switch changes, through the loop itself."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.endpoints import EndpointPool
from engine.local_models import default_gguf
from engine.settings import EpisodeSettings
from tests.engine.conftest import mock_model
from tests.servers import SPADEWORK
from toolworlds.examples import EXAMPLE_WORLD
from toolworlds.sandbox import SandboxPool
from trainers.config import load_config
from trainers.corpus import Corpus, open_source
from trainers.designer.loop import DesignRun, DesignSettings
from trainers.designer.memory import WorldMemory
from trainers.selfplay import SelfPlay

TINY = ["run.iterations=1", "run.eval_seeds=1", "designer.documents=1", "designer.generations=2", "agent.plays=2",
        "agent.reference_tasks=1", "update.rows_per_update=2", "designer.smoke_seeds=2"]  # fmt: skip


@pytest.fixture(scope="module")
def designing_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    world = tmp_path_factory.mktemp("designs") / "library.py"
    world.write_text(EXAMPLE_WORLD)
    with mock_model("--tokenizer", str(default_gguf()), "--design", str(world)) as url:
        yield url


def test_one_training_iteration_end_to_end(tmp_path: Path, designing_url: str) -> None:
    settings = [f'policy.endpoints=["{designing_url}"]', f"policy.tokenizer={default_gguf()}", *TINY]
    command = [*SPADEWORK, "train", "--out", str(tmp_path)] + [item for s in settings for item in ("--set", s)]
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"}
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "held-out reference tasks" in completed.stdout and "after iteration 0" in completed.stdout
    report = json.loads((tmp_path / "train.jsonl").read_text())
    assert report["rows"] == {"agent": 12, "designer": 2}  # 2 worlds x 2 tasks x 2 ways + 1 reference task x 2 x 2
    assert report["valid_worlds"] == 2 and report["seconds"]["update"] > 0
    held = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert [h["after_iteration"] for h in held] == [-1, 0] and set(held[0]["success_plain"]) == {
        "banking",
        "orders",
        "ticketing",
    }
    assert json.loads((tmp_path / "config.json").read_text())["update"]["rows_per_update"] == 2


def test_a_bad_setting_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    command = [*SPADEWORK, "train", "--out", str(tmp_path), "--set", "agent.plays=0"]
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"}
    )
    assert completed.returncode == 2 and "agent.plays: Input should be greater than or equal to 1" in completed.stderr
    (tmp_path / "train.jsonl").write_text("{}\n")
    again = subprocess.run([*SPADEWORK, "train", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert again.returncode == 2 and "already holds a run" in again.stderr


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def one_iteration(out: Path, url: str, ablation: str | None) -> SelfPlay:
    """One iteration through the loop without an update: what each ablation changes is in the rows and files."""
    overrides = [*TINY, f"ablations.{ablation}=true"] if ablation else TINY
    config = load_config("cpu-tiny", overrides)
    agent = EpisodeSettings(mode="tokens", tokenizer=str(default_gguf()), max_turns=4, max_tokens_per_turn=128)
    settings = DesignSettings(documents=1, generations=2, plays=2, smoke_seeds=2, designer=agent.model_copy(
        update={"max_turns": 1, "max_tokens_per_turn": 512}), agent=agent,
        memory_examples=0 if config.ablations.no_memory else 1)  # fmt: skip
    corpus = Corpus(open_source("none" if config.ablations.no_corpus else "builtin"), max_tokens=200)
    async with SandboxPool() as sandbox, EndpointPool.open([url]) as endpoints:
        with WorldMemory.open(out / "memory.sqlite") as memory:
            design = DesignRun("test", out, corpus, endpoints, sandbox, memory, settings)
            loop = SelfPlay(config, out, design, endpoints, agent, learner=None)
            for index in range(2):
                await loop.iteration(index)
    return loop


@pytest.mark.anyio
@pytest.mark.parametrize("ablation", [None, "fixed_pool", "frozen_designer", "no_memory", "no_corpus"])
async def test_each_ablation_changes_what_it_claims(tmp_path: Path, designing_url: str, ablation: str | None) -> None:
    await one_iteration(tmp_path, designing_url, ablation)
    reports = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    designs = (tmp_path / "designs.jsonl").read_text().splitlines() if (tmp_path / "designs.jsonl").exists() else []
    last_prompt = json.loads(designs[-1])["sample"]["messages"][1]["content"] if designs else ""
    if ablation == "fixed_pool":
        assert not designs and all(r["rows"] == {"agent": 4, "designer": 0} for r in reports)
        return
    assert len(designs) == 4
    if ablation == "frozen_designer":
        assert all(r["rows"]["designer"] == 0 and r["rows"]["agent"] == 12 for r in reports)
    else:
        assert all(r["rows"]["designer"] == 2 for r in reports)
    assert ("Worlds you wrote before" in last_prompt) is (ablation != "no_memory")
    assert ("a domain of your choice" in last_prompt) is (ablation == "no_corpus")
