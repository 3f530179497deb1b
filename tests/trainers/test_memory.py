"""The environment memory: a real SQLite file that survives reopening, feeds prompts and training pools."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trainers.designer.memory import RememberedWorld, StatusThresholds, WorldMemory, code_hash


def world(name: str, plain: float, hinted: float, created_at: float) -> RememberedWorld:
    source = f"class {name}: pass\n"
    status = StatusThresholds().classify(plain, hinted)
    return RememberedWorld(
        code_hash=code_hash(source), name=name, iteration=1, document="pydoc:topics/for", description=f"{name} world",
        tools=["a", "b"], source=source, scores_plain=[plain], scores_hinted=[hinted], mean_plain=plain,
        mean_hinted=hinted, regret=hinted - plain, reward=max(0.0, hinted - plain), status=status,
        created_at=created_at,
    )  # fmt: skip


def test_status_thresholds() -> None:
    thresholds = StatusThresholds(easy=0.8, hard=0.2)
    assert thresholds.classify(0.9, 1.0) == "too_easy"
    assert thresholds.classify(0.0, 0.1) == "too_hard"
    assert thresholds.classify(0.3, 0.9) == "frontier"


def test_worlds_survive_reopening_and_duplicates_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory" / "worlds.sqlite"
    easy = world("Easy", 0.9, 1.0, 1.0)
    with WorldMemory.open(path) as memory:
        assert memory.remember(easy)
        assert not memory.remember(easy)
    with WorldMemory.open(path) as memory:
        assert memory.get(easy.code_hash) == easy
        assert memory.counts() == {"too_easy": 1, "frontier": 0, "too_hard": 0}


def test_prompt_examples_and_training_pools(tmp_path: Path) -> None:
    with WorldMemory.open(tmp_path / "worlds.sqlite") as memory:
        for index, (plain, hinted) in enumerate([(0.9, 1.0), (0.2, 0.8), (0.3, 0.7), (0.0, 0.0)]):
            memory.remember(world(f"W{index}", plain, hinted, float(index)))
        examples = memory.prompt_examples(per_status=1)
        assert [e.name for e in examples] == ["W0", "W2", "W3"]  # newest of each kind
        assert "solved 0.30 without the hint, 0.70 with it" in examples[1].line()
        first = memory.training_pool(limit=1)
        second = memory.training_pool(limit=1)
        assert first[0].name != second[0].name  # least reused first
        assert {w.name: w.reuse_count for w in memory.training_pool(limit=5)} == {"W1": 1, "W2": 1}


def test_a_newer_schema_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "worlds.sqlite"
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(ValueError, match="schema version 99"), WorldMemory.open(path):
        pass
