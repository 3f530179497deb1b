"""The self-play training loop: one policy, two roles, one GRPO update per iteration.

    designer phase (G replies per document) -> gates, sandbox, memory -> agent plays of the new worlds
    (K without and K with the hint), of reference tasks and of archived frontier worlds -> rows for both
    roles (token-exact, infra failures masked) -> advantages per group, scaled per role -> one update ->
    weights to the server

Held-out success (reference worlds, seeds never trained on, with and without the hint) is measured before
the first iteration and after the last (and every `run.eval_every` iterations). Everything lands in the
run directory: the designer's files (see `trainers.designer.loop`), `reference/` plays, `train.jsonl`
(one line per iteration: rows, skipped rows and why, mean returns, seconds per stage), `eval.jsonl`, and
a checkpoint every `run.checkpoint_every` iterations (`trainers.run_state`) that `--resume` continues.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import anyio
import httpx
import structlog
from rich.console import Console

from engine.endpoints import EndpointPool
from engine.environments import playing, shared_opening
from engine.report import live_progress
from engine.rollout import Hints, RolloutPlan, RolloutStats, require_played, run_rollout
from engine.settings import EpisodeSettings
from engine.store import TrajectoryStore, read_records
from engine.trajectory import EpisodeRecord
from toolworlds.episode import LocalWorld, World
from toolworlds.registry import builtin_worlds, load_world
from toolworlds.sandbox import WorldLoadError
from toolworlds.sandbox.described import SandboxWorld
from trainers import journal
from trainers.config import TrainConfig
from trainers.designer.loop import DesignOutcome, DesignRun, IterationResult, run_iteration
from trainers.equal_compute import Compute, ComputeTarget, ComputeTargetError
from trainers.frontier import FrontierTasks, tally_groups
from trainers.grpo import Learner
from trainers.memory import PeakMemory, current_by_process
from trainers.rows import Skipped, TrainingRow, agent_rows, designer_rows, with_advantages, zero_spread_share
from trainers.run_records import HeldOut, IterationReport, TaskResult, read_held_out, read_iterations
from trainers.run_state import RunState, new_state, save_state
from trainers.suite import HELD_OUT_FIRST_SEED, SUITES, SuitePlan, check_not_held_out
from trainers.tracking import NoTracker, Tracker, held_out_metrics, iteration_metrics

log = structlog.get_logger()
PROCESS_STARTED = time.monotonic()  # what `HeldOut.elapsed_s` counts from (a resumed run starts again)


@dataclass
class SelfPlay:
    """One run's loop; the caller opens and closes the resources (server, pools, memory, learner)."""

    config: TrainConfig
    out: Path
    design: DesignRun
    endpoints: EndpointPool
    agent: EpisodeSettings
    learner: Learner | None
    trainer_checkpoint: Path | None = None  # the newest full checkpoint of the policy and optimiser
    unsaved_updates: int = 0  # updates since then: a checkpoint of the run must wait for the next one
    # Computes a world's opening tokens once for all the server's slots (`EmbeddedServer.share_prefix`).
    share_prefix: Callable[[list[int]], int] | None = None
    memory: PeakMemory | None = None  # the run's peak memory, recorded with each held-out evaluation
    tracker: Tracker = field(default_factory=NoTracker)  # where the run's numbers show (`run.report_to`)
    # Where each play's progress shows (a bar on a terminal, else a log line every few seconds).
    console: Console = field(default_factory=lambda: Console(stderr=True))

    @cached_property
    def compute_target(self) -> ComputeTarget | None:
        return compute_target(self.config)

    @property
    def training_hints(self) -> Hints:
        """How reference and archived tasks are played: both ways, or plain only where hinted plays would
        train nothing (`agent.learn_from=plain`)."""
        return self.config.agent.learn_from

    @property
    def task_episodes(self) -> int:
        """The agent's plays of one reference or archived task."""
        return self.config.agent.plays * (1 if self.training_hints == "plain" else 2)

    async def run(self, resumed: RunState | None = None) -> None:
        """All iterations (or those after a checkpoint), with held-out evaluations and checkpoints."""
        run = self.config.run
        if resumed is None:
            if run.before_from is None:
                await self.held_out(after=-1)
            else:
                shared = shared_before(Path(run.before_from), self.config)
                journal.append(self.out / "eval.jsonl", [shared])
                self.tracker.log(held_out_metrics(shared), step=0)
            self.checkpoint(-1)
        pending = False
        for index in range(resumed.iteration + 1 if resumed else 0, run.iterations):
            last = index == run.iterations - 1
            due = pending or last or (index + 1) % run.checkpoint_every == 0
            await self.iteration(index, checkpoint=due)
            if last or (run.eval_every and (index + 1) % run.eval_every == 0):
                await self.held_out(after=index)
            if due:
                pending = not self.checkpoint(index)

    def checkpoint(self, index: int) -> bool:
        """Record the run as of iteration `index`; False when the policy's newest update is not saved yet."""
        if self.unsaved_updates:
            log.info("checkpoint postponed to the next update", iteration=index, unsaved=self.unsaved_updates)
            return False
        sync = self.learner.sync if self.learner else None
        state = new_state(self.out, index, self.design.run, self.trainer_checkpoint, sync.version if sync else 0)
        save_state(self.out, self.design.memory, state)
        return True

    async def iteration(self, index: int, checkpoint: bool = False) -> IterationReport:
        clock: dict[str, float] = {}
        started = time.perf_counter()
        designed: IterationResult | None = None
        if not self.config.ablations.fixed_pool:
            designed = await run_iteration(self.design, index)
        clock["design"] = time.perf_counter() - started

        started = time.perf_counter()
        archived = await self.archive_plays(index)
        clock["archive"] = time.perf_counter() - started

        played = [*archived, *self.designed_records(designed)]
        started = time.perf_counter()  # last: with agent.fill_reference it stands in for what was not played
        reference = await self.reference_plays(index, extra=self.unplayed(designed, archived), played=played)
        clock["reference"] = time.perf_counter() - started

        rows, skipped = self.rows(designed, reference + played)
        compute = agent_compute(reference + played)
        zero_spread, groups = zero_spread_share(rows)
        started = time.perf_counter()
        trained = None
        if self.learner is not None and rows:
            scored = with_advantages(rows, scale=self.config.update.scale)
            # the update runs in TRL's thread; with `checkpoint`, the trainer saves right after it
            saved = await anyio.to_thread.run_sync(self.learner.update, scored, checkpoint)
            trained = self.learner.trained_tokens
            skipped.reasons.update(self.learner.left_out)  # rows the trainer could not score as sampled
            if saved is None:
                self.unsaved_updates += 1
            else:
                self.trainer_checkpoint, self.unsaved_updates = saved, 0
        clock["update"] = time.perf_counter() - started
        report = IterationReport(
            iteration=index,
            rows={role: sum(row.role == role for row in rows) for role in ("agent", "designer")},
            skipped=dict(skipped.reasons),
            agent_return=_mean([row.reward for row in rows if row.role == "agent"]),
            designer_reward=_mean([row.reward for row in rows if row.role == "designer"]),
            valid_worlds=designed.metrics.valid_after_repair if designed else 0,
            sampled_tokens=sum(sum(row.env_mask) for row in rows),
            agent_episodes=compute.episodes,
            agent_tokens=compute.tokens,
            groups=groups,
            zero_spread_groups=zero_spread,
            trained_tokens=trained,
            seconds={name: round(value, 3) for name, value in clock.items()},
        )
        journal.append(self.out / "train.jsonl", [report])
        trainer_log = self.learner.logged if self.learner is not None and trained is not None else []
        self.tracker.log(iteration_metrics(report, designed, trainer_log), step=index + 1)
        log.info("iteration done", **report.model_dump(exclude={"skipped"}))
        return report

    def designed_records(self, designed: IterationResult | None) -> list[EpisodeRecord]:
        """The agent's plays of this iteration's designed worlds that reach the rows."""
        if designed is None:
            return []
        return [record for outcome in designed.outcomes if outcome.broken is None for record in outcome.played]

    def rows(self, designed: IterationResult | None, records: list[EpisodeRecord]) -> tuple[list[TrainingRow], Skipped]:
        """Both roles' rows of one iteration from the agent's plays (`records`: reference, archived and designed
        worlds') and the designer's outcomes (the frozen-designer ablation keeps only the agent's)."""
        for record in records:
            check_not_held_out(record.key.world, record.key.seed)
        if self.training_hints == "plain":  # a designed world's hinted plays only scored its regret
            records = [record for record in records if not record.key.hinted]
        rows, skipped = agent_rows(records)
        if designed is not None and self.config.trains_designer:
            more, also = designer_rows(designed.outcomes)
            rows += more
            skipped.reasons.update(also.reasons)
        return rows, skipped

    def unplayed(self, designed: IterationResult | None, archived: list[EpisodeRecord]) -> int:
        """With `agent.fill_reference`, the reference tasks that stand in for the designed worlds and archived
        tasks not played (all of them without a designer): as many episodes as those would have played (a
        designed world is played both ways; with `agent.learn_from=plain` a reference task is not, so two stand
        in for one world)."""
        if not self.config.agent.fill_reference:
            return 0
        worlds = self.config.designer.documents * self.config.designer.generations
        if designed is not None:
            worlds -= sum(_training_plays(outcome) is not None for outcome in designed.outcomes)
        archive = self.config.agent.archive_tasks - len({(record.key.world, record.key.seed) for record in archived})
        per_world = 2 if self.training_hints == "plain" else 1
        return max(0, worlds) * per_world + max(0, archive)

    async def reference_plays(self, index: int, extra: int = 0, played: list[EpisodeRecord] | None = None
                              ) -> list[EpisodeRecord]:  # fmt: skip
        """`agent.reference_tasks` (+ `extra`) tasks of the reference worlds, K samples each way, on training seeds.
        With `agent.compute_from`, that run's agent compute decides how many instead (this iteration's other
        plays, `played`, count toward it; the tokens of the next task are estimated from this call's reference
        plays so far, else from this iteration's, else from the run's)."""
        target = self.compute_target
        tasks = 0 if target else self.config.agent.reference_tasks + extra
        earlier = now = ours = Compute()  # with a target: earlier iterations' agent compute, this one's, this call's
        if target is not None:
            earlier = sum((Compute(r.agent_episodes or 0, r.agent_tokens or 0) for r in read_iterations(self.out)
                           if r.iteration < index), Compute())  # fmt: skip
            now = agent_compute(played or [])

        def more(task: int) -> bool:
            if target is None:
                return task < tasks
            done = earlier + now
            rate = next((c.tokens / c.episodes for c in (ours, now, done) if c.episodes), None)
            return target.wants_more(index, done, task_episodes=self.task_episodes, tokens_per_episode=rate)

        rng = random.Random(f"{self.config.run.seed}/reference/{index}")
        suite = SUITES[self.config.agent.suite]
        names = self.config.agent.reference_worlds or sorted(builtin_worlds())
        frontier = FrontierTasks(suite, names, {}) if self.config.agent.task_choice == "frontier" else None
        before = self._reference_records(before=index) if frontier else []
        records: list[EpisodeRecord] = []
        task, start = 0, index * (self.config.agent.reference_tasks if target else tasks)  # rotate: where it begins
        while more(task):
            if frontier is not None:
                frontier.tallies = tally_groups(before + records)  # each pick knows the tasks played before it
                world, seed = frontier.pick(rng)
            else:
                world = names[(start + task) % len(names)]
                seed = suite.training_seed(world, rng)
            directory = self.out / "reference" / f"{index}-{task}-{world}"
            played_now = await self._play(world, seed, self.config.agent.plays, directory, hints=self.training_hints,
                                          source=suite.world(world))  # fmt: skip
            records += played_now
            if target is not None:
                spent = agent_compute(played_now)
                now, ours = now + spent, ours + spent
            task += 1
        return records

    def _reference_records(self, before: int) -> list[EpisodeRecord]:
        """The reference plays of iterations before `before`, read back from the run directory."""
        parent = self.out / "reference"
        found = (
            sorted(path for path in parent.iterdir() if int(path.name.split("-")[0]) < before)
            if parent.is_dir()
            else []
        )
        return [record for path in found for record in read_records(path)]

    async def archive_plays(self, index: int) -> list[EpisodeRecord]:
        """`agent.archive_tasks` frontier worlds from the memory (least reused first), K plays each way, in
        the sandbox: the tasks the agent nearly solves keep coming back after their iteration is over."""
        if self.config.agent.archive_tasks == 0 or self.config.ablations.fixed_pool:
            return []
        rng = random.Random(f"{self.config.run.seed}/archive/{index}")
        records: list[EpisodeRecord] = []
        for task, remembered in enumerate(self.design.memory.training_pool(self.config.agent.archive_tasks)):
            seed = rng.randrange(HELD_OUT_FIRST_SEED)
            directory = self.out / "archive" / f"{index}-{task}-{remembered.code_hash[:16]}"
            path = self.out / "worlds" / f"{remembered.code_hash[:16]}.{'json' if remembered.is_spec else 'py'}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(remembered.source)
            if remembered.is_spec:  # compiled by trusted code: it runs here
                records += await self._play(str(path), seed, self.config.agent.plays, directory,
                                            hints=self.training_hints)  # fmt: skip
                continue
            try:
                world = await self.design.sandbox.load(remembered.source, path.name)
            except WorldLoadError as error:  # it loaded when it was archived; say so and go on
                log.warning("an archived world no longer loads", world=remembered.name, reason=str(error))
                continue
            try:
                records += await self._play(str(path), seed, self.config.agent.plays, directory,
                                            source=SandboxWorld(self.design.sandbox, world),
                                            hints=self.training_hints)  # fmt: skip
            finally:
                await self.design.sandbox.unload(world)
        return records

    async def held_out(self, after: int) -> HeldOut:
        """The held-out suite (`run.eval_tasks` tasks per world, one plain play each), then the full
        reference tasks (`run.eval_seeds` per world, once without and once with the hint)."""
        started = time.perf_counter()
        run = self.config.run
        suite = SUITES[run.eval_suite]
        tasks: list[TaskResult] = []
        for world in sorted(builtin_worlds()):
            plan = SuitePlan(run=self.design.run, suite=suite.label, world=world,
                             seeds=suite.held_out_seeds(world, run.eval_tasks), settings=self.agent)  # fmt: skip
            directory = self.out / "eval" / f"after-{after}-{run.eval_suite}-{world}"
            for record in await self._rollout(plan, directory, suite.world(world)):
                tasks.append(TaskResult(world=world, seed=record.key.seed, reward=record.reward))
        plain: dict[str, float] = {}
        hinted: dict[str, float] = {}
        for world in sorted(builtin_worlds()) if run.eval_seeds else ():
            directory = self.out / "eval" / f"after-{after}-{world}"
            records = await self._play(world, HELD_OUT_FIRST_SEED, 1, directory, tasks=run.eval_seeds)
            for hint, into in ((False, plain), (True, hinted)):
                scored = [r.reward for r in records if r.key.hinted is hint and r.reward is not None]
                into[world] = sum(score >= 1.0 for score in scored) / len(scored) if scored else 0.0
        result = HeldOut(
            after_iteration=after,
            suite=suite.label,
            tasks=tasks,
            success_plain=plain,
            success_hinted=hinted,
            mean_plain=statistics.fmean(plain.values()) if plain else None,
            mean_hinted=statistics.fmean(hinted.values()) if hinted else None,
            seconds=round(time.perf_counter() - started, 3),
            elapsed_s=round(time.monotonic() - PROCESS_STARTED, 1),
            peak_rss_gb=round(self.memory.peak_gb, 2) if self.memory else None,
        )
        journal.append(self.out / "eval.jsonl", [result])
        self.tracker.log(held_out_metrics(result), step=after + 1)
        if self.memory is not None:
            log.info("memory now (PSS, MB)", **{name: round(size / 1e6) for name, size in current_by_process().items()})
        log.info("held-out success", after=after, suite=suite.label, success=round(result.success, 3),
                 partial_credit=round(result.partial_credit, 3), reference_plain=_rounded(result.mean_plain),
                 reference_hinted=_rounded(result.mean_hinted))  # fmt: skip
        return result

    async def _play(self, world: str, first_seed: int, samples: int, directory: Path, tasks: int = 1,
                    source: World | None = None, hints: Hints = "both") -> list[EpisodeRecord]:  # fmt: skip
        """`world`'s tasks (a name or file; `source`: its episodes, when they are not this process's)."""
        plan = RolloutPlan(run=self.design.run, world=world, tasks=tasks, first_seed=first_seed, samples=samples,
                           hints=hints, settings=self.agent)  # fmt: skip
        return await self._rollout(plan, directory, source or LocalWorld(load_world(world)))

    async def _rollout(self, plan: RolloutPlan | SuitePlan, directory: Path, world: World) -> list[EpisodeRecord]:
        await self._share_opening(world)
        stats = RolloutStats(planned=plan.size)
        with (TrajectoryStore.open(directory, plan, keep=True) as store,
              live_progress(stats, self.console, True, directory.name)):  # fmt: skip
            await run_rollout(plan, store, self.endpoints, playing(world), self.design.settings.concurrency,
                              stats)  # fmt: skip
        return require_played(store.records(), self.config.run.max_failed_share, endpoint_only=True)

    async def _share_opening(self, world: World) -> None:
        """Every play of a world opens with the same rules and tool schemas: have the server compute them once."""
        if self.share_prefix is None:  # (the agent plays in tokens mode: TrainConfig holds to it)
            return
        prefix = shared_opening(world, self.agent)
        started = time.perf_counter()
        try:
            slots = await anyio.to_thread.run_sync(self.share_prefix, prefix)
        except (RuntimeError, httpx.HTTPError) as error:  # only a speed-up: the plays go on without it
            log.warning("could not share the opening across the server's slots", reason=str(error))
            return
        log.debug("opening shared", tokens=len(prefix), slots=slots, seconds=round(time.perf_counter() - started, 2))


def _rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 3)


def agent_compute(records: list[EpisodeRecord]) -> Compute:
    """The agent's plays and the tokens it sampled in them (its rows' own tokens), as `train.jsonl` counts them."""
    rows, _ = agent_rows(records)
    return Compute(len(records), sum(sum(row.env_mask) for row in rows))


def compute_target(config: TrainConfig) -> ComputeTarget | None:
    """The run `agent.compute_from` names, as a target to follow; a ComputeTargetError says why it cannot be."""
    if config.agent.compute_from is None:
        return None
    source = Path(config.agent.compute_from)
    if not (source / "train.jsonl").is_file():
        raise ComputeTargetError(f"agent.compute_from={source}: no train.jsonl there (not a run, or none of its "
                                 "iterations finished)")  # fmt: skip
    try:
        reports = read_iterations(source)
    except (OSError, ValueError, journal.JournalError) as error:
        raise ComputeTargetError(f"agent.compute_from={source}: not a training run ({error})") from None
    return ComputeTarget.of_reports(source, reports, config.run.iterations)


def _training_plays(outcome: DesignOutcome) -> str | None:
    """Where a designed world's plays are, if they reach the rows (a world that failed in play teaches nothing)."""
    return outcome.plays if outcome.broken is None else None


SHARED_KNOBS = (("policy", "model"), ("run", "eval_suite"), ("run", "eval_tasks"), ("run", "eval_seeds"))


def shared_before(source: Path, config: TrainConfig) -> HeldOut:
    """The before-training held-out measurement of the run in `source`, for a run that starts from the same
    policy and measures the same tasks (each of SHARED_KNOBS checked); a BeforeUnavailable names what differs."""
    try:
        theirs = json.loads((source / "config.json").read_text())
        measured = [h for h in read_held_out(source) if h.after_iteration == -1]
    except (OSError, ValueError, journal.JournalError) as error:
        raise BeforeUnavailable(f"run.before_from={source}: not a run with a held-out measurement ({error})") from None
    ours = config.model_dump()
    for section, knob in SHARED_KNOBS:
        if (their := theirs.get(section, {}).get(knob)) != (our := ours[section][knob]):
            raise BeforeUnavailable(f"run.before_from={source}: its {section}.{knob} is {their!r}, this run's {our!r}")
    if not measured:
        raise BeforeUnavailable(f"run.before_from={source}: it has not measured the untrained policy yet")
    return measured[0]


class BeforeUnavailable(RuntimeError):
    """`run.before_from` names a run whose before-measurement this run cannot share; the message says why."""


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None
