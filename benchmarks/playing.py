"""A benchmark's model run through the engine: chosen episodes played at once into a resumable store.

Each benchmark gives every task a fixed seed, so what a run plays is only a choice of keys: a resumed run may
choose more and plays what its store does not hold yet. How it plays (the benchmark's own settings and the
episode settings, model included) is the run's plan, `run.json`; the store refuses a resume that differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict
from rich.console import Console

from engine.endpoints import EndpointPool, RetryPolicy
from engine.environments import Environment
from engine.report import live_progress
from engine.rollout import RolloutStats, run_rollout
from engine.settings import EpisodeSettings
from engine.store import TrajectoryStore, read_records
from engine.trajectory import EpisodeKey, EpisodeRecord


class BenchPlan(BaseModel):
    """How a benchmark run plays (its `run.json`); each benchmark adds its own settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: str
    run: str
    endpoint: str  # what served the model, for the results ("the embedded server (<file>)" or the URLs)
    settings: EpisodeSettings


@dataclass
class Selection:
    """The keys this invocation plays (they may grow on resume; the plan may not change)."""

    run: str
    settings: EpisodeSettings
    keys: list[EpisodeKey] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.keys)

    def episodes(self) -> Iterator[EpisodeKey]:
        return iter(self.keys)


@dataclass(frozen=True)
class Played:
    """The run folder's records, by seed (the first trial) and by (seed, trial), and how long this invocation
    took."""

    records: dict[int, EpisodeRecord]
    trials: dict[tuple[int, int], EpisodeRecord]
    seconds: float


# Given the agent's endpoint pool, the per-episode environment factory, held open for the run (a benchmark may
# need more, such as ACEBench's user simulator and its own endpoints).
Environments = Callable[[EndpointPool], AbstractAsyncContextManager[Callable[[], Environment]]]


def play_keys(out: Path, spec: BenchPlan, world: str, seeds: list[int], urls: list[str], environments: Environments,
              concurrency: int, progress: bool = True, retries: int = 2, trials: int = 1) -> Played:  # fmt: skip
    """Play `trials` episodes (samples 0, 1...) of each of `seeds` that `out`'s store does not hold, `concurrency`
    at a time, and read back
    every record the folder holds: its results cover the whole run, however few entries this invocation chose
    (a rerun with a smaller --limit rewrote them as if the rest had never been played)."""
    keys = [EpisodeKey(world=world, seed=seed, sample=trial, hinted=False) for trial in range(trials) for seed in seeds]
    started = time.perf_counter()
    with TrajectoryStore.open(out, spec) as store:
        stats = RolloutStats(planned=len(keys))  # the rollout skips what the store holds

        async def main() -> None:
            retry = RetryPolicy(attempts=retries + 1)
            async with EndpointPool.open(urls, retry=retry) as pool, environments(pool) as factory:
                await run_rollout(Selection(spec.run, spec.settings, keys), store, pool, factory, concurrency, stats)

        console = Console(stderr=True)
        with live_progress(stats, console, progress):
            anyio.run(main)
    every = {(record.key.seed, record.key.sample): record for record in read_records(out)}
    records = {seed: record for (seed, trial), record in every.items() if trial == 0}
    return Played(records, every, time.perf_counter() - started)
