"""Run many episodes at once: a plan, a bounded number live at a time, each written as it finishes.

A `RolloutPlan` names every episode (world x seeds x samples x hinted/plain) and how it is played; it is
stored with the run so a resumed run plays exactly the keys that are not on disk yet. At most
`concurrency` episodes are live; new ones start only as others finish, so memory stays bounded however
long the plan. Cancelling the run (Ctrl-C) cancels the live episodes, and everything that finished
before is already in the store.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio
import structlog
from pydantic import BaseModel, ConfigDict, Field

from engine.endpoints import EndpointPool
from engine.environments import Environment
from engine.episode import play_episode
from engine.settings import EpisodeSettings
from engine.store import TrajectoryStore
from engine.trajectory import EpisodeKey, EpisodeRecord

Hints = Literal["plain", "hinted", "both"]
log = structlog.get_logger()


class Plan(Protocol):
    """What `run_rollout` plays: a run id, how episodes are played, and which keys."""

    @property
    def run(self) -> str: ...

    @property
    def settings(self) -> EpisodeSettings: ...

    @property
    def size(self) -> int: ...

    def episodes(self) -> Iterator[EpisodeKey]: ...


class RolloutPlan(BaseModel):
    """Which episodes a run plays and how; stored as the run's `run.json`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run: str
    world: str
    tasks: int = Field(gt=0)
    first_seed: int = 0
    samples: int = Field(default=1, gt=0)
    hints: Hints = "plain"
    settings: EpisodeSettings = Field(default_factory=EpisodeSettings)

    def episodes(self) -> Iterator[EpisodeKey]:
        return episode_keys(self.world, range(self.first_seed, self.first_seed + self.tasks), self.samples, self.hints)

    @property
    def size(self) -> int:
        return self.tasks * self.samples * (2 if self.hints == "both" else 1)


def episode_keys(world: str, seeds: Iterable[int], samples: int, hints: Hints) -> Iterator[EpisodeKey]:
    """Every episode of `world` on `seeds`: per seed, each hint condition, `samples` plays each."""
    hinted = {"plain": (False,), "hinted": (True,), "both": (False, True)}[hints]
    for seed in seeds:
        for with_hint in hinted:
            for sample in range(samples):
                yield EpisodeKey(world=world, seed=seed, sample=sample, hinted=with_hint)


@dataclass
class RolloutStats:
    """Live counters (for the progress display) and the end-of-run summary."""

    planned: int
    skipped: int = 0
    live: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)
    turns: int = 0
    tool_calls: int = 0
    malformed_turns: int = 0
    completion_tokens: int = 0
    reward_sum: float = 0.0
    rewarded: int = 0
    drifted: int = 0
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None

    def add(self, record: EpisodeRecord) -> None:
        self.statuses[record.status] += 1
        if record.cause:
            self.causes[record.cause] += 1
        self.turns += len(record.turns)
        self.tool_calls += record.tool_calls
        self.malformed_turns += record.malformed_turns
        self.completion_tokens += sum(turn.completion_tokens or 0 for turn in record.turns)
        if record.reward is not None:
            self.reward_sum += record.reward
            self.rewarded += 1
        if record.tokens is not None and not record.tokens.exact:
            self.drifted += 1

    @property
    def done(self) -> int:
        return sum(self.statuses.values())

    @property
    def elapsed_s(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.rewarded if self.rewarded else None


MAX_FAILED_SHARE = 0.5  # more of a run's episodes failing for infrastructure reasons fails the run


class InfrastructureFailure(RuntimeError):
    """Plays that mostly failed for infrastructure reasons: not outcomes to learn from; the message says why."""


def require_played(records: list[EpisodeRecord], max_share: float, endpoint_only: bool = False) -> list[EpisodeRecord]:
    """`records`, unless they failed as a whole (`infrastructure_failure`): then `InfrastructureFailure`."""
    failure = infrastructure_failure(records, max_share, endpoint_only)
    if failure is not None:
        raise InfrastructureFailure(failure)
    return records


def infrastructure_failure(
    records: Iterable[EpisodeRecord], max_share: float, endpoint_only: bool = False
) -> str | None:
    """Why a run failed as a whole, or None: all of its episodes, or more than `max_share` of them, last failed
    for infrastructure reasons (the endpoint or the sandbox, not the model). `records`: each episode's last.
    `endpoint_only` counts only the endpoint's failures: where worlds are model-written, a world that crashes
    or hangs in the sandbox is that world's outcome (its plays are masked), not a broken run."""
    played, causes = 0, Counter[str]()
    for record in records:
        played += 1
        cause = record.cause or "unknown"
        if record.status == "infra_error" and (cause.startswith("endpoint:") or not endpoint_only):
            causes[cause] += 1
    failed = causes.total()
    if not failed or (failed < played and failed <= max_share * played):
        return None
    listed = ", ".join(f"{cause} {count}" for cause, count in causes.most_common(3))
    return f"{failed} of {played} episodes failed for infrastructure reasons ({listed}); they count as not played"


async def run_rollout(
    plan: Plan,
    store: TrajectoryStore,
    pool: EndpointPool,
    environments: Callable[[], Environment],
    concurrency: int | anyio.Semaphore,
    stats: RolloutStats | None = None,
) -> RolloutStats:
    """Play every key of `plan` not yet in `store`, at most `concurrency` at a time (a semaphore: shared
    with other rollouts, e.g. several stores filled at once from one server's slots)."""
    stats = stats or RolloutStats(planned=plan.size)
    slots = concurrency if isinstance(concurrency, anyio.Semaphore) else anyio.Semaphore(concurrency)

    async def one(key: EpisodeKey) -> None:
        try:
            record = await play_episode(plan.run, key, environments(), pool, plan.settings)
            store.append(record)
            stats.add(record)
            if record.status == "infra_error":
                log.debug("episode failed", episode=key.text, cause=record.cause, detail=record.detail)
        finally:
            stats.live -= 1
            slots.release()

    try:
        async with anyio.create_task_group() as group:
            for key in plan.episodes():
                if key.text in store.finished:
                    stats.skipped += 1
                    continue
                await slots.acquire()
                stats.live += 1
                group.start_soon(one, key)
    finally:
        stats.ended = time.perf_counter()
    return stats
