"""Checkpoints of a run directory and putting it back: real files, a real SQLite memory (in WAL mode, as
the run keeps it), and the artifacts an interrupted iteration leaves behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainers.test_memory import world
from trainers.designer.memory import WorldMemory
from trainers.run_state import ResumeError, load_state, new_state, restore, save_state


def journal(out: Path, name: str, *entries: dict) -> None:
    with (out / name).open("a") as handle:
        handle.writelines(json.dumps(entry) + "\n" for entry in entries)


def iteration_artifacts(out: Path, iteration: int) -> list[Path]:
    made = [
        out / "reference" / f"{iteration}-0-banking",
        out / "eval" / f"after-{iteration}-orders",
        out / "worlds" / "abcdef" / f"designer-{iteration}-0-1",
        out / "trainer" / f"checkpoint-{iteration + 1}",
    ]
    for path in made:
        path.mkdir(parents=True)
        (path / "episodes.jsonl").write_text("{}\n")
    return made


def test_restore_puts_the_run_back_to_its_checkpoint(tmp_path: Path) -> None:
    out = tmp_path
    kept = [*iteration_artifacts(out, 0), out / "eval" / "after--1-banking"]
    kept[-1].mkdir()
    journal(out, "train.jsonl", {"iteration": 0})
    journal(out, "eval.jsonl", {"after_iteration": -1})
    with WorldMemory.open(out / "memory.sqlite") as memory:
        memory.remember(world("Kept", 0.5, 1.0, 1.0))
        save_state(out, memory, new_state(out, 0, "run1", out / "trainer" / "checkpoint-1", weights=1))
        # the interrupted iteration 1: journals grow, memory learns a world, plays and weights appear
        memory.remember(world("Lost", 0.1, 0.9, 2.0))
        journal(out, "train.jsonl", {"iteration": 1})
        journal(out, "designs.jsonl", {"iteration": 1})
        lost = iteration_artifacts(out, 1)
        (out / "weights").mkdir()
        (out / "weights" / "policy-v00002.gguf").write_bytes(b"GGUF")

    state = load_state(out)
    assert (state.iteration, state.run_id, state.updates, state.weights_version) == (0, "run1", 1, 1)
    restore(out, state)
    assert [json.loads(line)["iteration"] for line in (out / "train.jsonl").read_text().splitlines()] == [0]
    assert (out / "designs.jsonl").read_text() == ""
    assert (out / "eval.jsonl").read_text().count("\n") == 1
    with WorldMemory.open(out / "memory.sqlite") as memory:
        assert [w.name for w in memory.prompt_examples(5)] == ["Kept"]
    assert all(path.exists() for path in kept)
    assert not any(path.exists() for path in lost) and not list((out / "weights").iterdir())


def test_a_damaged_or_missing_checkpoint_is_named(tmp_path: Path) -> None:
    with pytest.raises(ResumeError, match="has no checkpoint"):
        load_state(tmp_path)
    journal(tmp_path, "train.jsonl", {"iteration": 0})
    with WorldMemory.open(tmp_path / "memory.sqlite") as memory:
        save_state(tmp_path, memory, new_state(tmp_path, 0, "run1", None, weights=0))
    (tmp_path / "train.jsonl").write_text("")
    with pytest.raises(ResumeError, match=r"train.jsonl has 0 bytes but the checkpoint recorded 17"):
        restore(tmp_path, load_state(tmp_path))
    state = json.loads((tmp_path / "checkpoints" / "state.json").read_text())
    (tmp_path / "checkpoints" / "state.json").write_text(
        json.dumps({**state, "trainer_checkpoint": "trainer/checkpoint-3"})
    )
    with pytest.raises(ResumeError, match="names the trainer checkpoint trainer/checkpoint-3, which is missing"):
        load_state(tmp_path)
