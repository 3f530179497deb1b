"""One designer iteration: sample documents, write worlds, validate them, play them, pay the designer.

    documents --prompt--> designer replies --gates--> valid worlds --K plain + K hinted plays--> regret
        --> designer reward, environment memory, per-iteration metrics

Everything a later step (the GRPO trainer, a report) needs is written under the run directory as it
happens: `designs.jsonl` (each designer turn, token ids included in tokens mode, with its verdict, regret
and reward), `worlds/<hash>.py` with the agent's plays of it under `worlds/<hash>/` (the engine's
trajectory store), `metrics.jsonl` (one line per iteration) and the SQLite memory.
"""

from __future__ import annotations

import functools
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog
from pydantic import BaseModel, Field

from engine.endpoints import EndpointPool
from engine.environments import playing
from engine.episode import WORLD_FAULTS
from engine.rollout import MAX_FAILED_SHARE, InfrastructureFailure, RolloutPlan, require_played, run_rollout
from engine.settings import EpisodeSettings
from engine.store import TrajectoryStore
from engine.trajectory import EpisodeRecord
from toolworlds.episode import LocalWorld, World
from toolworlds.sandbox import SandboxPool
from toolworlds.sandbox.described import SandboxWorld
from toolworlds.spec import Spec
from toolworlds.untrusted.validate import Verdict, validate, validate_spec
from trainers import journal
from trainers.config import DesignerConfig
from trainers.corpus import Corpus
from trainers.designer.diversity import VENDI_EMBEDDING, vendi_score
from trainers.designer.generate import DesignSample, sample_design
from trainers.designer.grounding import GROUNDED_SHARE, grounding
from trainers.designer.memory import RememberedWorld, StatusThresholds, WorldMemory, code_hash
from trainers.designer.prompt import PROMPT_VERSION, designer_messages, prompt_version
from trainers.designer.regret import Play, Regret, designer_reward, regret_of

log = structlog.get_logger()


@dataclass(frozen=True)
class DesignSettings:
    """How a designer iteration writes, checks, plays and pays: the run's designer knobs (defined once, in the
    config) and how each role's episodes reach the model (trainers/run_settings.py builds both from a config)."""

    knobs: DesignerConfig
    plays: int  # K: tasks per valid world, each played without and with the hint
    designer: EpisodeSettings
    agent: EpisodeSettings
    memory_examples: int = 1  # per status; 0 in the no-memory ablation
    # Episodes at once: agent plays, and designer replies. On a llama.cpp server, one per slot: a slot keeps
    # the prefix of the episode it serves, and a staged spec re-sends its whole prefix with every stage.
    concurrency: int = 16
    thresholds: StatusThresholds = field(default_factory=StatusThresholds)
    max_failed_share: float = MAX_FAILED_SHARE  # a world's plays failing more for infrastructure reasons stop the run


@dataclass
class DesignRun:
    """What an iteration works with; the caller owns (opens and closes) every resource here."""

    run: str
    out: Path
    corpus: Corpus
    endpoints: EndpointPool
    sandbox: SandboxPool
    memory: WorldMemory
    settings: DesignSettings
    seed: int = 0


@dataclass(frozen=True)
class BothWays:
    """A world's plays without and with its hint: its regret, how its own code failed in one (or None), and
    each play's record (kept in memory: the agent's rows are made from them)."""

    regret: Regret
    broken: str | None
    records: list[EpisodeRecord]


class DesignOutcome(BaseModel):
    """One line of `designs.jsonl`."""

    iteration: int
    sample: DesignSample
    verdict: dict[str, Any] | None = None
    world_hash: str | None = None
    plays: str | None = Field(default=None, description="The agent's plays of the world, under the run directory.")
    regret: float | None = None
    mean_plain: float | None = None
    solved_plain: float | None = Field(default=None, description="The share of unaided plays solved: the win rate.")
    mean_hinted: float | None = None
    masked_plays: int = 0
    reward: float | None = Field(default=None, description="None: masked (the endpoint or every play failed).")
    broken: str | None = Field(
        default=None, description="How the world's own code failed in a play (it raised, hung or died): invalid."
    )
    grounding: float | None = Field(
        default=None, description="A valid spec world: the share of its names and values its document holds."
    )
    played: list[EpisodeRecord] = Field(default_factory=list, exclude=True)  # the plays, in memory only


class IterationMetrics(BaseModel):
    """One line of `metrics.jsonl`."""

    iteration: int
    prompt_version: str = PROMPT_VERSION
    finished_at: float
    requested: int
    replies: int
    valid_before_repair: int
    valid_after_repair: int
    validity_before_repair: float
    validity_after_repair: float
    rejections: dict[str, int]
    regrets: list[float]
    regret_mean: float | None
    negative_regrets: int
    rewards: list[float | None]
    statuses: dict[str, int]
    vendi: float
    vendi_embedding: str = VENDI_EMBEDDING
    answer_leak_rate: float | None
    broken_in_play: int = Field(0, description="Valid worlds whose own code failed in a play (scored invalid).")
    grounding_mean: float | None = Field(None, description="Mean grounding share of the valid spec worlds.")
    grounded: int = Field(0, description="Valid spec worlds with at least half their names and values grounded.")
    seconds: dict[str, float]
    worlds_per_minute: float
    memory: dict[str, int]


def completed_iterations(out: Path) -> int:
    metrics = out / "metrics.jsonl"
    return sum(1 for line in metrics.read_text().splitlines() if line.strip()) if metrics.exists() else 0


@dataclass(frozen=True)
class IterationResult:
    metrics: IterationMetrics
    outcomes: list[DesignOutcome]


async def run_iteration(run: DesignRun, iteration: int) -> IterationResult:
    settings = run.settings
    rng = random.Random(f"{run.seed}/{iteration}")
    examples = run.memory.prompt_examples(settings.memory_examples)
    samples, documents = [], []
    for index in range(settings.knobs.documents):
        document = run.corpus.sample(rng)
        knobs = settings.knobs
        messages = designer_messages(document, examples, knobs.format, knobs.spec_budget(), knobs.plans)
        for generation in range(settings.knobs.generations):
            key = f"designer/{iteration}/{index}/{generation}"
            version = prompt_version(settings.knobs.format)
            samples.append(DesignSample(key=key, document=document.source, prompt_version=version, messages=messages))
            documents.append(document.text)
    clock = {"generation": time.perf_counter()}

    limiter = anyio.CapacityLimiter(settings.concurrency)

    async def design(index: int, sample: DesignSample) -> None:
        async with limiter:
            seed = iteration * 10_000 + index
            stages = functools.partial(settings.knobs.spec_stages, documents[index])
            await sample_design(run.endpoints, settings.designer, run.run, seed, sample, settings.knobs.format, stages)

    async with anyio.create_task_group() as group:
        for index, sample in enumerate(samples):
            group.start_soon(design, index, sample)
    clock["generation"] = time.perf_counter() - clock["generation"]
    _require_replies(samples, settings.max_failed_share)

    started = time.perf_counter()
    verdicts: list[Verdict | None] = [None] * len(samples)

    async def judge(index: int, reply: str) -> None:
        seeds = range(max(settings.knobs.smoke_seeds, settings.plays))  # every seed a play will use is a checked one
        if settings.knobs.format == "spec":
            verdicts[index] = await validate_spec(reply, seeds=seeds)
        else:
            verdicts[index] = await validate(reply, run.sandbox, seeds=seeds, filename="world.py")

    async with anyio.create_task_group() as group:
        for index, sample in enumerate(samples):
            if sample.reply is not None:
                group.start_soon(judge, index, sample.reply)
    clock["validation"] = time.perf_counter() - started

    started = time.perf_counter()
    outcomes = []
    for sample, verdict, text in zip(samples, verdicts, documents, strict=True):
        outcome = await _settle(run, iteration, sample, verdict)
        if outcome.world_hash is not None and outcome.broken is None and verdict and verdict.local is not None:
            outcome.grounding = grounding(Spec.model_validate_json(verdict.source or ""), text).share
        outcomes.append(outcome)
    clock["plays"] = time.perf_counter() - started
    metrics = _metrics(run, iteration, outcomes, verdicts, clock)
    journal.append(run.out / "designs.jsonl", outcomes)
    journal.append(run.out / "metrics.jsonl", [metrics])
    return IterationResult(metrics, outcomes)


def _require_replies(samples: list[DesignSample], max_share: float) -> None:
    """An iteration whose designer requests all (or more than `max_share` of them) failed at the endpoint is
    not an outcome: it is not recorded (a rerun plays it again) and `InfrastructureFailure` says why."""
    failed = Counter(sample.failure.split(":", 1)[0] for sample in samples if sample.failure is not None)
    count = failed.total()
    if count and (count == len(samples) or count > max_share * len(samples)):
        listed = ", ".join(f"endpoint:{cause} {n}" for cause, n in failed.most_common(3))
        raise InfrastructureFailure(f"{count} of {len(samples)} designer requests failed for infrastructure reasons "
                                    f"({listed}); the iteration is not recorded")  # fmt: skip


async def _settle(run: DesignRun, iteration: int, sample: DesignSample, verdict: Verdict | None) -> DesignOutcome:
    """Play a valid world K times each way, archive it, and pay the designer; pay the penalty otherwise."""
    outcome = DesignOutcome(iteration=iteration, sample=sample, verdict=verdict.summary() if verdict else None)
    if verdict is None:  # no reply: the endpoint failed, which says nothing about the designer
        return outcome
    if not verdict.valid or verdict.world is None or verdict.source is None:
        outcome.reward = designer_reward(None, run.settings.knobs.rewards)
        return outcome
    digest = code_hash(verdict.source)
    outcome.world_hash = digest
    plays = run.out / "worlds" / digest[:16] / sample.key.replace("/", "-")  # fresh plays for each design
    outcome.plays = str(plays.relative_to(run.out))
    played = await _play_both_ways(run, verdict, digest, plays)
    regret, broken = played.regret, played.broken
    outcome.played = played.records
    if verdict.local is None:
        await run.sandbox.unload(verdict.world)
    if broken is not None:
        # Its failed plays would be masked, not scored: a world that crashes (or hangs) on the plays it wants
        # left out of its regret could pick its own reward. A world that fails in play is invalid.
        log.info("a valid world failed in play: invalid", world=verdict.world.name, failure=broken)
        outcome.broken, outcome.reward = broken, designer_reward(None, run.settings.knobs.rewards)
        return outcome
    outcome.regret, outcome.masked_plays = regret.value, regret.masked
    outcome.mean_plain, outcome.mean_hinted = regret.mean_plain, regret.mean_hinted
    outcome.solved_plain = regret.solve_rate_plain
    outcome.reward = designer_reward(regret, run.settings.knobs.rewards)
    if regret.value < 0:
        log.info("negative regret: the hint misleads", world=verdict.world.name, regret=round(regret.value, 3))
    remembered = RememberedWorld(
        code_hash=digest,
        name=verdict.world.name,
        iteration=iteration,
        document=sample.document,
        description=verdict.world.description,
        tools=[tool["name"] for tool in verdict.world.tools],
        source=verdict.source,
        scores_plain=regret.plain,
        scores_hinted=regret.hinted,
        mean_plain=regret.mean_plain,
        mean_hinted=regret.mean_hinted,
        regret=regret.value,
        reward=outcome.reward,
        status=run.settings.thresholds.classify(regret.mean_plain, regret.mean_hinted),
    )
    run.memory.remember(remembered)
    return outcome


async def _play_both_ways(run: DesignRun, verdict: Verdict, digest: str, directory: Path) -> BothWays:
    """The world's plays each way (its file written under the run's worlds/ for the archive)."""
    assert verdict.world is not None and verdict.source is not None
    worlds = run.out / "worlds"
    worlds.mkdir(parents=True, exist_ok=True)
    spec = verdict.local is not None  # a spec world runs here; Python only in the sandbox
    path = worlds / f"{digest[:16]}.{'json' if spec else 'py'}"
    path.write_text(verdict.source)
    # The spec the gates compiled plays as it is (the file is for the archive and a reader, not read back).
    world = LocalWorld(verdict.local) if verdict.local is not None else SandboxWorld(run.sandbox, verdict.world)
    return await play_both_ways(run.endpoints, run.settings, run.run, path, world, directory)


async def play_both_ways(
    endpoints: EndpointPool,
    settings: DesignSettings,
    run: str,
    path: Path,
    world: World,
    directory: Path,
) -> BothWays:
    """The world at `path` played K times without and K times with its hint through `endpoints`, stored under
    `directory`. A world written in an earlier run can be played again by another policy this way
    (`benchmarks/studies/who_learned.py`)."""
    plan = RolloutPlan(run=run, world=str(path), tasks=settings.plays, hints="both", settings=settings.agent)
    with TrajectoryStore.open(directory, plan, keep=True) as store:
        await run_rollout(plan, store, endpoints, playing(world), settings.concurrency)
    records = require_played(store.records(), settings.max_failed_share, endpoint_only=True)
    plays = [Play(record.key.hinted, None if record.status == "infra_error" else record.reward) for record in records]
    broken = next((f"{r.cause}: {r.detail}" for r in records if r.cause in WORLD_FAULTS), None)
    return BothWays(regret_of(plays), broken, records)


def _metrics(
    run: DesignRun,
    iteration: int,
    outcomes: list[DesignOutcome],
    verdicts: list[Verdict | None],
    clock: dict[str, float],
) -> IterationMetrics:
    judged = [verdict for verdict in verdicts if verdict is not None]
    valid = [verdict for verdict in judged if verdict.valid]
    rejections = Counter(_rejection_kind(verdict) for verdict in judged if not verdict.valid)
    regrets = [outcome.regret for outcome in outcomes if outcome.regret is not None]
    leaks = [verdict.answer_leak for verdict in valid if verdict.answer_leak is not None]
    statuses = Counter(
        run.settings.thresholds.classify(o.mean_plain, o.mean_hinted)
        for o in outcomes
        if o.mean_plain is not None and o.mean_hinted is not None
    )
    total = sum(clock.values())
    groundings = [outcome.grounding for outcome in outcomes if outcome.grounding is not None]
    return IterationMetrics(
        iteration=iteration,
        prompt_version=prompt_version(run.settings.knobs.format),
        finished_at=time.time(),
        requested=len(outcomes),
        replies=len(judged),
        valid_before_repair=sum(verdict.valid_without_repair for verdict in judged),
        valid_after_repair=len(valid),
        validity_before_repair=_share(sum(verdict.valid_without_repair for verdict in judged), len(judged)),
        validity_after_repair=_share(len(valid), len(judged)),
        rejections=dict(rejections),
        regrets=regrets,
        regret_mean=statistics.fmean(regrets) if regrets else None,
        negative_regrets=sum(regret < 0 for regret in regrets),
        rewards=[outcome.reward for outcome in outcomes],
        statuses=dict(statuses),
        vendi=vendi_score([verdict.world.tools for verdict in valid if verdict.world is not None]),
        answer_leak_rate=statistics.fmean(leaks) if leaks else None,
        broken_in_play=sum(outcome.broken is not None for outcome in outcomes),
        grounding_mean=statistics.fmean(groundings) if groundings else None,
        grounded=sum(share >= GROUNDED_SHARE for share in groundings),
        seconds={name: round(value, 3) for name, value in clock.items()},
        worlds_per_minute=60 * len(outcomes) / total if total else 0.0,
        memory=run.memory.counts(),
    )


def _rejection_kind(verdict: Verdict) -> str:
    """The gate that rejected, with the failed check for the smoke gate: what is worth counting."""
    failed = next(gate for gate in verdict.gates if not gate.passed)
    if failed.name == "smoke":
        return "smoke: " + failed.detail.split(":", 1)[0]
    if failed.name == "meaning":  # `seed 3: not a sentence: ...`
        return "meaning: " + failed.detail.split(": ")[1]
    return failed.name


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def read_designs(out: Path) -> list[DesignOutcome]:
    """`designs.jsonl` read back: every designer turn of the run, valid or not."""
    return journal.read(out / "designs.jsonl", DesignOutcome)


def world_file(out: Path, outcome: DesignOutcome) -> Path | None:
    """Where a valid design's world was written (`worlds/<hash>.json` for a spec, `.py` for Python)."""
    if outcome.world_hash is None:
        return None
    found = [out / "worlds" / f"{outcome.world_hash[:16]}.{suffix}" for suffix in ("json", "py")]
    return next((path for path in found if path.is_file()), None)


def read_metrics(out: Path) -> list[IterationMetrics]:
    return journal.read(out / "metrics.jsonl", IterationMetrics)
