"""Checkpoints of a self-play run, and putting a killed run back to its last one.

A checkpoint is taken after an iteration, once everything it produced is on disk:

- `trainer/checkpoint-N`: TRL/transformers' own checkpoint after the N-th update (policy weights,
  optimizer, scheduler, torch RNG, trainer state), written by the trainer when asked (`Learner`);
- `checkpoints/memory.sqlite`: a consistent copy of the world memory (SQLite's backup API);
- `checkpoints/state.json`, written last and atomically: the iteration, the run's id, which trainer
  checkpoint goes with it, the weights version served, and the byte length of every append-only journal
  (`trainers.journal`).

Everything else a run draws at random is derived from (run seed, iteration): the corpus documents, the
reference tasks, the designer's sampling seeds. So the iteration number is the corpus cursor, and a
resumed run samples what the unbroken run would have. Resuming cuts the journals back to their recorded
lengths, restores the memory, and removes what the interrupted iteration left half-done (its plays,
evaluations, later trainer checkpoints and exported weights), so nothing is counted twice.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import structlog
from pydantic import BaseModel

from trainers.designer.memory import WorldMemory

log = structlog.get_logger()

STATE_DIR = "checkpoints"
STATE_FILE = "state.json"
MEMORY_FILE = "memory.sqlite"
TRAINER_DIR = "trainer"
WEIGHTS_DIR = "weights"
JOURNALS = ("designs.jsonl", "metrics.jsonl", "train.jsonl", "eval.jsonl")


class ResumeError(RuntimeError):
    """A run directory that cannot be resumed; the message says what is missing or inconsistent."""


class RunState(BaseModel):
    """`checkpoints/state.json`: where a resumed run picks up."""

    iteration: int  # the last completed iteration (-1: only the evaluation before training)
    run_id: str
    trainer_checkpoint: str | None  # relative to the run directory; None: no update yet
    weights_version: int
    journals: dict[str, int]  # name -> bytes that belong to completed iterations
    saved_at: float

    @property
    def updates(self) -> int:
        """How many optimiser steps the checkpointed policy has taken."""
        if self.trainer_checkpoint is None:
            return 0
        return int(self.trainer_checkpoint.rsplit("-", 1)[1])


def save_state(out: Path, memory: WorldMemory, state: RunState) -> None:
    """Write a checkpoint's memory copy, then its state file (atomically, so a kill leaves the old one)."""
    directory = out / STATE_DIR
    directory.mkdir(exist_ok=True)
    partial = directory / f"{MEMORY_FILE}.partial"
    partial.unlink(missing_ok=True)
    memory.backup(partial)
    os.replace(partial, directory / MEMORY_FILE)
    written = directory / f"{STATE_FILE}.partial"
    written.write_text(state.model_dump_json(indent=2))
    os.replace(written, directory / STATE_FILE)
    log.info("checkpoint saved", iteration=state.iteration, trainer=state.trainer_checkpoint)


def journal_lengths(out: Path) -> dict[str, int]:
    return {name: (out / name).stat().st_size if (out / name).exists() else 0 for name in JOURNALS}


def new_state(out: Path, iteration: int, run_id: str, trainer_checkpoint: Path | None, weights: int) -> RunState:
    return RunState(
        iteration=iteration,
        run_id=run_id,
        trainer_checkpoint=str(trainer_checkpoint.relative_to(out)) if trainer_checkpoint else None,
        weights_version=weights,
        journals=journal_lengths(out),
        saved_at=time.time(),
    )


def load_state(out: Path) -> RunState:
    path = out / STATE_DIR / STATE_FILE
    if not path.exists():
        raise ResumeError(f"{out} has no checkpoint ({path} is missing): nothing to resume")
    state = RunState.model_validate_json(path.read_text())
    if state.trainer_checkpoint and not (out / state.trainer_checkpoint).is_dir():
        raise ResumeError(f"{path} names the trainer checkpoint {state.trainer_checkpoint}, which is missing")
    if not (out / STATE_DIR / MEMORY_FILE).exists():
        raise ResumeError(f"{out / STATE_DIR / MEMORY_FILE} is missing: the checkpoint is incomplete")
    return state


def restore(out: Path, state: RunState) -> None:
    """Put the run directory back to the checkpoint: journals, memory, and nothing of later iterations."""
    for name, length in state.journals.items():
        path = out / name
        size = path.stat().st_size if path.exists() else 0
        if size < length:
            raise ResumeError(f"{path} has {size} bytes but the checkpoint recorded {length}: the run is damaged")
        if size > length:
            with path.open("r+b") as handle:
                handle.truncate(length)
    for suffix in ("", "-wal", "-shm"):  # a stale write-ahead log would replay the lost iteration
        (out / f"{MEMORY_FILE}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(out / STATE_DIR / MEMORY_FILE, out / MEMORY_FILE)
    for path in later_artifacts(out, state):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
        log.info("discarded the interrupted iteration's output", path=str(path.relative_to(out)))


_REFERENCE = re.compile(r"(\d+)-")  # reference/ and archive/<iteration>-<task>-<world>
_EVALUATION = re.compile(r"after-(-?\d+)-")  # eval/after-<iteration>-<world>
_DESIGN_PLAYS = re.compile(r"designer-(\d+)-")  # worlds/<hash>/designer-<iteration>-<document>-<generation>
_TRAINER = re.compile(r"checkpoint-(\d+)")


def later_artifacts(out: Path, state: RunState) -> list[Path]:
    """What iterations after the checkpoint wrote: it is redone on resume, so it must not linger."""

    def after(pattern: re.Pattern[str], parent: Path, limit: int) -> list[Path]:
        found = []
        for path in sorted(parent.iterdir()) if parent.is_dir() else []:
            match = pattern.match(path.name)
            if match and int(match.group(1)) > limit:
                found.append(path)
        return found

    worlds = sorted(path for path in (out / "worlds").glob("*") if path.is_dir())
    plays = [play for world in worlds for play in after(_DESIGN_PLAYS, world, state.iteration)]
    weights = sorted((out / WEIGHTS_DIR).glob("*.gguf")) if (out / WEIGHTS_DIR).is_dir() else []
    return (
        after(_REFERENCE, out / "reference", state.iteration)
        + after(_REFERENCE, out / "archive", state.iteration)
        + after(_EVALUATION, out / "eval", state.iteration)
        + plays
        + after(_TRAINER, out / TRAINER_DIR, state.updates)
        + weights  # exported from the policy; the resumed run exports its restored weights again
    )
