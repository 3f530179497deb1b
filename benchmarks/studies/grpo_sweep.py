"""A hyperparameter sweep for the main job's GRPO update, on plays the embedded model really made.

A full `just train-tools` takes 40+ minutes, so it cannot be run once per setting. The sweep separates what
the settings change from what they do not:

1. `collect` (once, ~20 min): the preset's agent (SmolLM2-135M on the embedded server, grammar-constrained
   calls, the `reference-lite` suite) plays *training* tasks, `--plays` times each, and *validation* tasks,
   `--validation-plays` times each. Both are drawn from training seeds, never from the held-out suite the
   main job's lift is measured on: choosing the preset on its numbers would tune on the test set.
2. `sweep` (minutes per setting): for each setting, a fresh float policy takes the same `--updates` GRPO
   updates through the real path (`with_advantages`, `fit_batch`, TRL's `GRPOTrainer` via `Learner`) on
   the same groups of the training plays, then scores every validation play under the new and the old
   weights. Settings are compared on the same samples (common random numbers):

   - `snis`: the self-normalised importance-sampling estimate of the new policy's validation success,
     sum(w * success) / sum(w) with w = p_new(play) / p_old(play) over the agent's sampled tokens (tool
     results and the environment are the same under both policies); `ess` is its effective sample size;
   - `gap`: the mean log-ratio of successful plays minus that of failed ones (nats per play): how far the
     update moved probability toward what succeeds, with a 95% bootstrap CI over plays;
   - `kl`: mean of (w - 1 - log w), an estimate of KL(old || new) per play: how far the policy moved.

   Group size is swept at equal sampling cost: a task's `--plays` plays form one group of 8, or two of 4.
   The zero-spread share of groups (no learning signal) is reported for each group size from the same plays.

The rule that picks the preset's setting, fixed before the first sweep ran: the highest `snis` among
settings whose `ess` is at least a quarter of the validation plays; the preset's own setting stays unless
another beats its `snis` by more than 2 points.

What it does not show: a proxy is not a measured success rate. The ratios ignore the grammar's
renormalisation (the same approximation the loss makes), and a setting that moves the policy far (large
`kl`, small `ess`) is estimated poorly. The main job's own held-out run is the measurement; the sweep
chooses which setting that run uses.

    python benchmarks/studies/grpo_sweep.py collect --out runs/sweep           # or: just sweep
    python benchmarks/studies/grpo_sweep.py sweep --data runs/sweep

Both steps resume: `collect` plays only what its directory lacks, `sweep` runs only the settings its
results file (`sweep-<updates>-updates.jsonl`) does not hold yet.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog
from rich.console import Console
from rich.table import Table

from engine.endpoints import EndpointPool
from engine.environments import playing, shared_opening
from engine.llama_server import EXACT_SAMPLING, EmbeddedServer, ServerSettings
from engine.local_models import resolve_gguf
from engine.rollout import run_rollout
from engine.store import TrajectoryStore, read_records
from engine.trajectory import EpisodeRecord
from toolworlds.registry import builtin_worlds
from trainers.config import TrainConfig, load_config
from trainers.rows import TrainingRow, agent_rows, with_advantages, zero_spread_share
from trainers.run_settings import agent_settings
from trainers.stats import bootstrap_difference
from trainers.suite import SUITES, SuitePlan, check_not_held_out

log = structlog.get_logger()
PRESET = "cpu-tiny"
SPLITS = ("train", "validation")


@dataclass(frozen=True)
class Setting:
    """One point of the sweep: the preset's update with these knobs changed."""

    name: str
    learning_rate: float = 5e-5
    beta: float = 0.0
    epsilon: float = 0.2
    steps_per_batch: int = 1
    group_size: int = 4


# Chosen before any result was seen: the preset's point, then one knob moved at a time.
SETTINGS = (  # the costliest (two optimiser steps per batch) last
    Setting("preset"),
    Setting("lr 1e-5", learning_rate=1e-5),
    Setting("group of 8", group_size=8),
    Setting("kl 0.04", beta=0.04),
    Setting("lr 2e-4", learning_rate=2e-4),
    Setting("2 steps/batch", steps_per_batch=2),
)


# ----------------------------------------------------------------------------------------------- collect


def task_seeds(config: TrainConfig, plan: dict[str, int]) -> dict[str, dict[str, list[int]]]:
    """Training and validation seeds per world: training-range seeds of the preset's suite, each split from
    its own stream (more training tasks keep the validation tasks, and the first training tasks, as they
    were), no task in both."""
    suite = SUITES[config.agent.suite]
    seeds: dict[str, dict[str, list[int]]] = {split: {} for split in SPLITS}
    for world in sorted(builtin_worlds()):
        for split in ("validation", "train"):
            rng = random.Random(f"sweep/{split}/{world}")
            taken = set(seeds["validation"].get(world, []))
            chosen: list[int] = []
            while len(chosen) < plan[split]:
                seed = suite.training_seed(world, rng)
                if seed not in chosen and seed not in taken:
                    chosen.append(seed)
            seeds[split][world] = chosen
    return seeds


async def _collect(config: TrainConfig, out: Path, server: EmbeddedServer, plays: dict[str, int],
                   seeds: dict[str, dict[str, list[int]]]) -> None:  # fmt: skip
    suite = SUITES[config.agent.suite]
    agent = agent_settings(config, config.policy.served_name, str(server.settings.model), dict(EXACT_SAMPLING),
                           "llama.cpp", server.settings.context)  # fmt: skip
    async with EndpointPool.open([server.base_url]) as pool:
        for split in SPLITS:
            for world, world_seeds in seeds[split].items():
                started = time.perf_counter()
                opening = shared_opening(suite.world(world), agent)
                await anyio.to_thread.run_sync(server.share_prefix, opening)
                # one store per task: a later collect with more tasks adds stores and keeps these
                plans = [SuitePlan(run=f"sweep-{split}", suite=suite.label, world=world, seeds=[seed],
                                   samples=plays[split], settings=agent) for seed in world_seeds]  # fmt: skip
                slots = anyio.Semaphore(config.policy.parallel)  # one live episode per server slot, in all
                async with anyio.create_task_group() as group:
                    for plan in plans:
                        group.start_soon(_play_task, plan, out / split / world / str(plan.seeds[0]), pool,
                                         playing(suite.world(world)), slots)  # fmt: skip
                log.info("collected", split=split, world=world, tasks=len(plans),
                         seconds=round(time.perf_counter() - started))  # fmt: skip


async def _play_task(plan: SuitePlan, directory: Path, pool: EndpointPool, worlds: Any,
                     slots: anyio.Semaphore) -> None:  # fmt: skip
    with TrajectoryStore.open(directory, plan) as store:
        await run_rollout(plan, store, pool, worlds, slots)


def collect(args: argparse.Namespace) -> None:
    config = load_config(PRESET, args.set)
    tasks = {"train": args.tasks, "validation": args.validation_tasks}
    plays = {"train": args.plays, "validation": args.validation_plays}
    seeds = task_seeds(config, tasks)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "collect.json").write_text(json.dumps({"preset": PRESET, "overrides": args.set, "plays": plays,
                                                       "seeds": seeds}, indent=2))  # fmt: skip
    gguf = resolve_gguf(config.policy.model)
    with (
        tempfile.TemporaryDirectory(prefix="spadework-slots-") as slots,
        EmbeddedServer(ServerSettings(model=gguf, parallel=config.policy.parallel, slot_dir=Path(slots))) as server,
    ):
        anyio.run(_collect, config, args.out, server, plays, seeds)


def read_split(data: Path, split: str) -> list[EpisodeRecord]:
    """Every play of one split, in a fixed order (world, seed, sample)."""
    records = [record for task in sorted((data / split).glob("*/*")) for record in read_records(task)]
    for record in records:
        check_not_held_out(record.key.world, record.key.seed)
    return sorted(records, key=lambda r: (r.key.world, r.key.seed, r.key.sample))


# ----------------------------------------------------------------------------------------------- sweep


def trainable(records: list[EpisodeRecord]) -> list[tuple[TrainingRow, EpisodeRecord]]:
    """Each play the trainer can use (a scored, token-exact play), with its row."""
    pairs = []
    for record in records:
        rows, _ = agent_rows([record])
        pairs += [(row, record) for row in rows]
    return pairs


def grouped(records: list[EpisodeRecord], size: int) -> list[TrainingRow]:
    """The training rows with each task's plays split into groups of `size` (in sample order)."""
    return [
        row.model_copy(update={"group": f"{row.group}/{record.key.sample // size}"})
        for row, record in trainable(records)
    ]


def update_batches(rows: list[TrainingRow], rows_per_update: int, updates: int) -> list[list[TrainingRow]]:
    """`updates` batches of whole groups with a learning signal, each exactly `rows_per_update` rows, the
    groups in a fixed shuffled order (the same for every setting of one group size)."""
    groups: dict[str, list[TrainingRow]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    signal = [name for name, members in groups.items() if len({row.reward for row in members}) > 1]
    random.Random("sweep/batches").shuffle(signal)
    per_batch = rows_per_update // len(groups[signal[0]]) if signal else 0
    if per_batch == 0 or len(signal) < per_batch * updates:
        raise SystemExit(f"the training plays have {len(signal)} groups with a learning signal; {updates} updates "
                         f"of {rows_per_update} rows need {per_batch * updates}: collect more tasks")  # fmt: skip
    return [
        [row for name in signal[index * per_batch : (index + 1) * per_batch] for row in groups[name]]
        for index in range(updates)
    ]


def sequence_logprobs(model: Any, rows: list[TrainingRow], temperature: float) -> list[float]:
    """Per row, the summed log-probability of its sampled tokens (env_mask 1) at `temperature`.

    Rows that open alike (a world's rules and tools) share that opening's key-value cache, computed once:
    the same numbers as one pass per row, at a fraction of the cost.
    """
    import torch
    from transformers import DynamicCache

    model.eval()
    totals: list[float] = [0.0] * len(rows)
    by_opening: dict[tuple[int, ...], list[int]] = {}
    for index, row in enumerate(rows):
        by_opening.setdefault(tuple(row.prompt_ids[:16]), []).append(index)
    with torch.no_grad():
        for members in by_opening.values():
            # the shared opening, less one token, so every scored position's logits come from the suffix
            shared = _common_prefix([rows[i].prompt_ids for i in members])[:-1]
            if not shared:  # nothing in common: compute a cache of one token, the first (one pass per row)
                shared = rows[members[0]].prompt_ids[:1]
            cache = DynamicCache()
            model(torch.tensor([shared]), past_key_values=cache, use_cache=True)
            for index in members:
                row = rows[index]
                last = max(i for i, kept in enumerate(row.env_mask) if kept) if any(row.env_mask) else -1
                if last < 0:
                    continue
                ids = row.prompt_ids + row.completion_ids[: last + 1]
                logits = model(torch.tensor([ids[len(shared) :]]), past_key_values=cache, use_cache=True).logits[0]
                cache.crop(-(cache.get_seq_length() - len(shared)))  # back to the opening alone
                start = (
                    len(row.prompt_ids) - len(shared) - 1
                )  # the suffix position predicting the first completion token
                scored = torch.log_softmax(logits[start:-1].float() / temperature, dim=-1)
                chosen = scored.gather(1, torch.tensor(row.completion_ids[: last + 1])[:, None])[:, 0]
                mask = torch.tensor(row.env_mask[: last + 1], dtype=torch.bool)
                totals[index] = float(chosen[mask].sum())
    return totals


def _common_prefix(sequences: list[list[int]]) -> list[int]:
    first = sequences[0]
    length = len(first)
    for other in sequences[1:]:
        length = min(length, len(other))
        length = next((i for i in range(length) if first[i] != other[i]), length)
    return first[:length]


@dataclass
class Outcome:
    """What one setting did to the validation plays."""

    setting: str
    snis: float
    ess: float
    gap: float
    gap_ci95: tuple[float, float]
    auc: float  # P(a successful play's log-ratio > a failed one's), ties half: 0.5 is no preference
    kl: float  # mean of -log w: an estimate of KL(old || new) per play (the plays are the old policy's)
    won_per_token: float  # mean log-ratio per sampled token, successful plays
    lost_per_token: float  # and failed ones
    log_ratios: list[float]  # per validation play, in order: what every other measure is computed from
    train_seconds: float
    trained_tokens: int


def judge(name: str, new: list[float], old: list[float], success: list[float], sampled: list[int], seconds: float,
          tokens: int) -> Outcome:  # fmt: skip
    """The proxy measures of one setting from the validation plays' log-probabilities (`sampled`: each
    play's count of sampled tokens)."""
    log_ratio = [a - b for a, b in zip(new, old, strict=True)]
    top = max(log_ratio)
    weights = [math.exp(r - top) for r in log_ratio]  # scaled: both estimates are ratios of sums
    snis = sum(w * s for w, s in zip(weights, success, strict=True)) / sum(weights)
    ess = sum(weights) ** 2 / sum(w * w for w in weights)
    won = [r for r, s in zip(log_ratio, success, strict=True) if s >= 1.0]
    lost = [r for r, s in zip(log_ratio, success, strict=True) if s < 1.0]
    gap, low, high = bootstrap_difference(won, lost) if won and lost else (math.nan, math.nan, math.nan)
    pairs = [(a > b) + 0.5 * (a == b) for a in won for b in lost]
    auc = statistics.fmean(pairs) if pairs else math.nan
    kl = -statistics.fmean(log_ratio)
    per_token = [r / max(n, 1) for r, n in zip(log_ratio, sampled, strict=True)]
    won_per_token = _mean_where(per_token, success, True)
    lost_per_token = _mean_where(per_token, success, False)
    return Outcome(name, snis, ess, gap, (low, high), auc, kl, won_per_token, lost_per_token, log_ratio, seconds,
                   tokens)  # fmt: skip


def _mean_where(values: list[float], success: list[float], solved: bool) -> float:
    chosen = [value for value, s in zip(values, success, strict=True) if (s >= 1.0) == solved]
    return statistics.fmean(chosen) if chosen else math.nan


def run_setting(setting: Setting, config: TrainConfig, train: list[EpisodeRecord], validation: list[TrainingRow],
                old: list[float], success: list[float], updates: int, work: Path) -> Outcome:  # fmt: skip
    """A fresh policy, `updates` real GRPO updates with `setting`, then the validation measures."""
    from trainers.checkpoint import load_policy
    from trainers.grpo import Learner, RowFeed, UpdateSettings, grpo_trainer

    changed = {
        "learning_rate": setting.learning_rate,
        "beta": setting.beta,
        "epsilon": setting.epsilon,
        "steps_per_batch": setting.steps_per_batch,
    }
    knobs = config.update.model_copy(update=changed)
    # the sweep trains the agent's rows only: no room for designer rows in its updates
    settings = UpdateSettings(knobs, knobs.rows_per_update, config.agent.temperature, config.grammar_sampler)
    batches = update_batches(grouped(train, setting.group_size), settings.batch_rows, updates)
    model, tokenizer = load_policy(resolve_gguf(config.policy.model), None, None)
    feed = RowFeed()
    trainer = grpo_trainer(model, tokenizer, feed, settings, work / setting.name.replace(" ", "-"), updates)
    learner = Learner(trainer, feed, None, {"agent": settings.batch_rows}, config.run.seed)
    started, tokens = time.perf_counter(), 0
    try:
        for batch in batches:
            learner.update(with_advantages(batch, scale=config.update.scale))
            tokens += learner.trained_tokens
    finally:
        learner.close()
    seconds = time.perf_counter() - started
    new = sequence_logprobs(trainer.model, validation, config.agent.temperature)
    sampled = [sum(row.env_mask) for row in validation]
    return judge(setting.name, new, old, success, sampled, seconds, tokens)


def sweep(args: argparse.Namespace) -> None:
    from trainers.checkpoint import load_policy

    stated = json.loads((args.data / "collect.json").read_text())
    config = load_config(PRESET, stated["overrides"] + args.set)
    train, held = read_split(args.data, "train"), read_split(args.data, "validation")
    pairs = trainable(held)
    validation = [row for row, _ in pairs]
    success = [1.0 if (record.reward or 0.0) >= 1.0 else 0.0 for _, record in pairs]
    console = Console()
    spread = Table("group size", "groups", "zero spread", "share", title="learning signal in the training plays")
    for size in (2, 4, 8):
        if size <= stated["plays"]["train"]:
            zero, groups = zero_spread_share(grouped(train, size))
            spread.add_row(str(size), str(groups), str(zero), f"{zero / groups:.0%}")
    console.print(spread)
    console.print(family_table(train + held))
    base, _ = load_policy(resolve_gguf(config.policy.model), None, None)
    old = sequence_logprobs(base, validation, config.agent.temperature)
    del base
    log.info("validation plays", plays=len(validation), successes=int(sum(success)))
    results = args.data / f"sweep-{args.updates}-updates.jsonl"
    lines = results.read_text().splitlines() if results.exists() else []
    done = {row["setting"] for row in map(json.loads, lines) if "auc" in row}
    chosen = [s for s in SETTINGS if (not args.only or s.name in args.only) and s.name not in done]
    with tempfile.TemporaryDirectory(prefix="spadework-sweep-") as work:
        for setting in chosen:
            outcome = run_setting(setting, config, train, validation, old, success, args.updates, Path(work))
            with results.open("a") as file:
                file.write(json.dumps({**asdict(setting), **asdict(outcome), "updates": args.updates}) + "\n")
            log.info("setting done", **asdict(outcome))
    console.print(results_table(results, statistics.fmean(success), len(success)))


def family_table(records: list[EpisodeRecord]) -> Table:
    """Success per task family (the tools its reference plan calls): where the base policy's signal is."""
    from trainers.suite import plan_tools

    tally: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for record in records:
        family = (record.key.world, plan_tools(record.key.world, record.key.seed))
        tally.setdefault(family, []).append(1.0 if (record.reward or 0.0) >= 1.0 else 0.0)
    table = Table("world", "family (reference plan)", "plays", "solved", "success", title="the base policy by family")
    for (world, family), solved in sorted(tally.items()):
        table.add_row(world, " > ".join(family), str(len(solved)), str(int(sum(solved))),
                      f"{statistics.fmean(solved):.1%}")  # fmt: skip
    return table


def results_table(results: Path, base_success: float, plays: int) -> Table:
    table = Table("setting", "lr", "beta", "steps/batch", "group", "snis (ess)", "gap [95% CI], nats", "auc",
                  "per token: solved / failed", "kl(old||new)", "train s", "trained tok/s",
                  title=f"GRPO settings on {plays} validation plays (base success {base_success:.1%})")  # fmt: skip
    for line in results.read_text().splitlines():
        row = json.loads(line)
        if "auc" not in row:  # written before the rank measures existed: run that setting again
            continue
        low, high = row["gap_ci95"]
        table.add_row(row["setting"], f"{row['learning_rate']:g}", f"{row['beta']:g}", str(row["steps_per_batch"]),
                      str(row["group_size"]), f"{row['snis']:.1%} ({row['ess']:.1f})",
                      f"{row['gap']:+.1f} [{low:+.1f}, {high:+.1f}]", f"{row['auc']:.2f}",
                      f"{row['won_per_token']:+.3f} / {row['lost_per_token']:+.3f}", f"{row['kl']:.1f}",
                      f"{row['train_seconds']:.0f}", f"{row['trained_tokens'] / row['train_seconds']:.0f}")  # fmt: skip
    return table


def simulate_task_choice(args: argparse.Namespace) -> None:
    """How many groups with reward spread a run's task choice yields, simulated on the collected plays.

    Each simulated run picks `agent.reference_tasks` tasks per iteration for `run.iterations` iterations,
    by the preset's rule (`rotate` or `frontier`, the real `trainers.frontier.choose`); each task gives two
    groups (plain and hinted), whose spread is drawn from the collected groups of 4 of its family. What it
    assumes: the policy does not change during the run, and hinted groups spread like plain ones.
    """
    from trainers.frontier import Family, Tally, choose, family_of
    from trainers.suite import TOOL_SAMPLE_SEEDS

    config = load_config(PRESET, json.loads((args.data / "collect.json").read_text())["overrides"])
    suite = SUITES[config.agent.suite]
    rewards: dict[tuple[str, int, int], set[float]] = {}  # (world, seed, which 4 of its 8 plays)
    for row, record in trainable(read_split(args.data, "train")):
        rewards.setdefault((record.key.world, record.key.seed, record.key.sample // 4), set()).add(row.reward)
    observed: dict[Family, list[bool]] = {}
    for (world, seed, _), seen in rewards.items():
        observed.setdefault(family_of(world, seed), []).append(len(seen) > 1)
    names = sorted(builtin_worlds())
    mix = {world: [family_of(world, seed) for seed in TOOL_SAMPLE_SEEDS if suite.admits(world, seed)]
           for world in names}  # fmt: skip
    families = sorted({family for world in names for family in mix[world]})
    rng = random.Random("sweep/task-choice")
    picks = config.agent.reference_tasks
    yields: dict[str, list[int]] = {"rotate": [], "frontier": []}
    for rule, counts in yields.items():
        for _ in range(args.runs):
            tallies: dict[Family, Tally] = {}
            signal = 0
            for index in range(config.run.iterations):
                for task in range(picks):  # each pick knows the plays of the tasks before it
                    if rule == "rotate":
                        family = rng.choice(mix[names[(index * picks + task) % len(names)]])
                    else:
                        family = choose(families, tallies, rng)
                    outcomes = observed.get(family) or [False]
                    tally = tallies.setdefault(family, Tally())
                    for _ in range(2):
                        spread = rng.choice(outcomes)
                        tally.groups += 1
                        tally.spread += spread
                        signal += spread
            counts.append(signal)
    groups = config.run.iterations * picks * 2
    table = Table("task choice", "groups with spread per run", "95% of runs", "share",
                  title=f"simulated task choice: {args.runs} runs of {groups} groups each")  # fmt: skip
    for rule, counts in yields.items():
        ordered = sorted(counts)
        low, high = ordered[int(0.025 * len(ordered))], ordered[int(0.975 * len(ordered)) - 1]
        mean = statistics.fmean(counts)
        table.add_row(rule, f"{mean:.1f}", f"{low} - {high}", f"{mean / groups:.0%}")
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    gather = commands.add_parser("collect", help="play the training and validation tasks once")
    gather.add_argument("--out", type=Path, required=True)
    gather.add_argument("--tasks", type=int, default=8, help="training tasks per world")
    gather.add_argument("--plays", type=int, default=8, help="plays of each training task")
    gather.add_argument("--validation-tasks", type=int, default=20, help="validation tasks per world")
    gather.add_argument("--validation-plays", type=int, default=2, help="plays of each validation task")
    gather.add_argument("--set", action="append", default=[], help="a preset override, e.g. agent.temperature=1.0")
    gather.set_defaults(run=collect)
    measure = commands.add_parser("sweep", help="train each setting on the collected plays and compare")
    measure.add_argument("--data", type=Path, required=True)
    measure.add_argument("--updates", type=int, default=3, help="GRPO updates per setting")
    measure.add_argument("--only", action="append", default=[], help="run only the setting with this name")
    measure.add_argument("--set", action="append", default=[], help="a preset override for the update")
    measure.set_defaults(run=sweep)
    simulate = commands.add_parser("task-choice", help="simulate rotate vs frontier task choice on the plays")
    simulate.add_argument("--data", type=Path, required=True)
    simulate.add_argument("--runs", type=int, default=2000)
    simulate.set_defaults(run=simulate_task_choice)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
