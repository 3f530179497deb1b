"""`spadework train-compare`: SPADE against its ablations at equal agent compute, over seeds, in one table.

The paper's central claim is that a designer that co-evolves with the agent beats training without one. Three
arms run from one preset, with the same iterations, update size and held-out suite, on each of a few seeds:

    spade            the preset as it is: the designer writes worlds, the agent plays them and reference tasks,
                     both roles train
    fixed-pool       `ablations.fixed_pool`: no designer; reference tasks only
    frozen-designer  `ablations.frozen_designer`: the designer still writes worlds and the agent plays them,
                     but the designer is never updated

Equal agent compute: the spade arm plays `agent.fill_reference`, a reference task in place of each designed
world or archived task not played (invalid, broken), so each of its iterations plays reference_tasks +
documents x generations + archive_tasks tasks, K plays each way. The other arms follow it
(`agent.compute_from`, `trainers.equal_compute`): after their designed worlds, they play reference tasks while
one more brings their agent episodes and sampled tokens so far closer to spade's (least squared relative
gaps; neither is a hard bound, since both cannot be met when the arms' replies part in length). The table
prints each arm's agent episodes and sampled agent tokens, and `compute_gaps` names any arm more than 10% away
from spade's: the claim is checked, not believed.

The untrained policy is measured once per seed (by the spade arm) and shared by the other arms of that seed
(`run.before_from`), so their lifts start from one measurement. Lifts and the paired differences spade -
fixed-pool and spade - frozen-designer (held-out success after training) are pooled over seeds, each
(seed, task) one paired draw of a 95% bootstrap.

Each arm is an ordinary training run in `OUT/seed-<s>/<arm>` (a `spadework train` process of its own): an arm
that finished is read back, one that was killed is resumed from its checkpoint, so a killed comparison
continues where it stopped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.config import TrainConfig, load_config
from trainers.equal_compute import TOLERANCE
from trainers.journal import JournalError
from trainers.report import ReportError, RunRecord, read_run, summary_json
from trainers.run_records import read_held_out, read_iterations
from trainers.run_state import ResumeError, load_state
from trainers.stats import paired_lift

ARMS = ("spade", "fixed-pool", "frozen-designer")
BASELINES = ("fixed-pool", "frozen-designer")  # each compared with spade


class CompareError(RuntimeError):
    """An arm that cannot run or be continued; the message names it and why."""


# What each arm adds to the preset (and to the caller's overrides): every arm fills to the same agent tasks.
ARM_OVERRIDES: dict[str, list[str]] = {
    "spade": ["agent.fill_reference=true"],
    "fixed-pool": ["agent.fill_reference=true", "ablations.fixed_pool=true"],
    "frozen-designer": ["agent.fill_reference=true", "ablations.frozen_designer=true"],
}


def seed_list(config: TrainConfig, seeds: int) -> list[int]:
    """The seeds of a comparison: the preset's `run.seed` and the ones after it."""
    return [config.run.seed + offset for offset in range(seeds)]


def finished(run: Path) -> bool:
    """Whether a run directory holds a run whose every iteration and final evaluation are recorded."""
    if not (run / "config.json").is_file():
        return False
    try:  # the journals only: a run's designs.jsonl (every sampled id) is not needed to know it ended
        planned = json.loads((run / "config.json").read_text()).get("run", {}).get("iterations")
        iterations, held_out = read_iterations(run), read_held_out(run)
    except (ValueError, JournalError) as error:
        raise ReportError(f"{run}: a file does not parse ({error})") from None
    if not isinstance(planned, int):
        return False
    return len(iterations) == planned and any(h.after_iteration == planned - 1 for h in held_out)


Arms = dict[tuple[int, str], Path]  # (seed, arm) -> its run directory


def run_arms(preset: str, overrides: list[str], out: Path, seeds: int = 2, log_level: str = "info") -> Arms:
    """Run (or resume, or skip when finished) each arm of each seed as its own `spadework train` process;
    spade first, so the other arms of its seed share its measurement of the untrained policy."""
    config = load_config(preset, overrides)
    runs: Arms = {}
    for seed in seed_list(config, seeds):
        for arm, extra in ARM_OVERRIDES.items():
            run = out / f"seed-{seed}" / arm
            runs[seed, arm] = run
            if finished(run):
                continue
            own = [*extra, f"run.seed={seed}"]
            if arm != ARMS[0]:  # the untrained policy's measurement and the agent compute: spade's of this seed
                spade = out / f"seed-{seed}" / ARMS[0]
                own += [f"run.before_from={spade}", f"agent.compute_from={spade}"]
            command = [sys.executable, "-m", "spadework", "--log-level", log_level, "train"]
            if _has_checkpoint(run):
                command += ["--resume", str(run)]
            elif run.exists() and any(run.iterdir()):
                raise CompareError(f"{run} holds an arm stopped before its first checkpoint: remove it to run it again")
            else:
                command += ["--preset", preset, "--out", str(run)]
                command += [item for setting in [*overrides, *own] for item in ("--set", setting)]
            if subprocess.run(command).returncode != 0:
                raise CompareError(f"the {arm} arm of seed {seed} failed (its output is above); run the same "
                                   "command to resume")  # fmt: skip
    return runs


def _has_checkpoint(run: Path) -> bool:
    try:
        load_state(run)
    except ResumeError:
        return False
    return True


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def text(self, percent: bool = True) -> str:
        if percent:
            return f"{self.value:+.1%} [{self.low:+.1%}, {self.high:+.1%}]"
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


@dataclass(frozen=True)
class ArmResult:
    """One arm of one seed: a row of the comparison."""

    arm: str
    seed: int
    iterations: int
    suite: str | None
    before: float | None  # held-out success before training
    after: float | None  # and after the last iteration
    lift: Interval | None  # paired over the held-out tasks
    credit_lift: Interval | None
    validity: list[tuple[int, int]]  # per iteration: (valid worlds, replies)
    regret: list[list[float]]  # per iteration: the valid worlds' regrets
    agent_rows: int
    agent_episodes: int
    agent_tokens: int
    minutes: float | None


def arm_result(arm: str, seed: int, record: RunRecord) -> ArmResult:
    """One arm's row, its held-out numbers as its own report states them (`trainers.report.summary_json`)."""
    headline = summary_json(record)
    before, after = headline["before"], headline["after"]
    lift = credit = None
    if headline["lift_ci95"] is not None:
        lift = Interval(headline["lift"], *headline["lift_ci95"])
        credit = Interval(headline["partial_credit_lift"], *headline["partial_credit_lift_ci95"])
    return ArmResult(
        arm=arm,
        seed=seed,
        iterations=len(record.iterations),
        suite=headline["suite"],
        before=before["success"] if before else None,
        after=after["success"] if after and lift is not None else None,
        lift=lift,
        credit_lift=credit,
        validity=[(m.valid_after_repair, m.replies) for m in record.designer],
        regret=[list(m.regrets) for m in record.designer],
        agent_rows=sum(r.rows.get("agent", 0) for r in record.iterations),
        agent_episodes=sum(r.agent_episodes or 0 for r in record.iterations),
        agent_tokens=sum(r.agent_tokens or 0 for r in record.iterations),
        minutes=headline["minutes"],
    )


def _successes(record: RunRecord, seed: int, which: int) -> dict[str, float] | None:
    """Held-out success per `seed/task` at the run's first (0) or last (-1) evaluation; None before it ends."""
    measured = [h for h in record.held_out if h.scored]
    if len(measured) < 2:
        return None
    return {f"{seed}/{task}": value for task, value in measured[which].successes().items()}


def _pooled(pairs: list[tuple[dict[str, float] | None, dict[str, float] | None]]) -> Interval | None:
    """second - first per `seed/task` both measured, over every pair (seed): one paired bootstrap."""
    first: dict[str, float] = {}
    second: dict[str, float] = {}
    for ours, theirs in pairs:
        if ours is None or theirs is None:
            return None
        first |= ours
        second |= theirs
    return Interval(*paired_lift(first, second)) if set(first) & set(second) else None


def pooled_lift(records: dict[int, RunRecord]) -> Interval | None:
    """An arm's lift over its seeds (seed -> its run): after - before per (seed, task)."""
    return _pooled([(_successes(r, seed, 0), _successes(r, seed, -1)) for seed, r in records.items()])


def paired_difference(pairs: dict[int, tuple[RunRecord, RunRecord]]) -> Interval | None:
    """Held-out success after training, first arm minus second, per (seed, task) both measured, pooled over
    seeds: arms of a seed start from one policy and one measurement of it, so this is the difference of their
    lifts without the noise of separate before-measurements."""
    return _pooled([(_successes(second, seed, -1), _successes(first, seed, -1))
                    for seed, (first, second) in pairs.items()])  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    results: list[ArmResult]  # one per (seed, arm)
    pooled: dict[str, Interval | None]  # arm -> its lift over all seeds
    differences: dict[str, Interval | None]  # baseline -> spade minus it, over all seeds
    gaps: list[str]  # equal agent compute, where it does not hold


def comparison(runs: Arms) -> Comparison:
    records = {key: read_run(path) for key, path in runs.items()}
    results = [arm_result(arm, seed, record) for (seed, arm), record in records.items()]
    pooled = {}
    for arm in ARMS:
        ours = {seed: record for (seed, name), record in records.items() if name == arm}
        if ours:
            pooled[arm] = pooled_lift(ours)
    differences = {}
    for baseline in BASELINES:
        pairs = {seed: (records[seed, ARMS[0]], records[seed, baseline])
                 for seed, name in records if name == baseline and (seed, ARMS[0]) in records}  # fmt: skip
        differences[baseline] = paired_difference(pairs) if pairs else None
    return Comparison(results, pooled, differences, compute_gaps(results))


def compute_gaps(results: list[ArmResult], tolerance: float = TOLERANCE) -> list[str]:
    """Every arm whose agent episodes or sampled agent tokens differ from its seed's spade arm by more than
    `tolerance` (relative), one line each: equal agent compute, checked."""
    spade = {result.seed: result for result in results if result.arm == ARMS[0]}
    gaps = []
    for result in results:
        reference = spade.get(result.seed)
        if reference is None or result is reference:
            continue
        for what, ours, theirs in (("agent episodes", result.agent_episodes, reference.agent_episodes),
                                   ("sampled agent tokens", result.agent_tokens, reference.agent_tokens)):  # fmt: skip
            if abs(ours - theirs) > tolerance * max(theirs, 1):
                gaps.append(f"seed {result.seed}: {result.arm} has {ours} {what}, spade {theirs} "
                            f"({(ours - theirs) / max(theirs, 1):+.0%}, more than {tolerance:.0%} apart)")  # fmt: skip
    return gaps


COLUMNS = ("arm", "seed", "held-out success before -> after", "lift (95% CI)", "partial-credit lift (95% CI)",
           "designer validity per iteration", "mean regret per iteration (valid worlds)", "agent episodes",
           "sampled agent tokens", "minutes")  # fmt: skip


def rows(found: Comparison) -> list[list[str]]:
    """The table's cells: a row per arm and seed, then each arm pooled over seeds (the same cells for the
    console and for markdown)."""
    table = []
    for result in sorted(found.results, key=lambda r: (ARMS.index(r.arm), r.seed)):
        success = (
            "-"
            if result.before is None
            else f"{result.before:.1%} -> " + ("-" if result.after is None else f"{result.after:.1%}")
        )
        validity = " ".join(f"{valid}/{replies}" for valid, replies in result.validity) or "no designer"
        regret = " ".join("-" if not values else f"{sum(values) / len(values):+.2f}" for values in result.regret)
        table.append([
            result.arm, str(result.seed), success, result.lift.text() if result.lift else "-",
            result.credit_lift.text(percent=False) if result.credit_lift else "-", validity, regret or "-",
            str(result.agent_episodes), str(result.agent_tokens),
            "-" if result.minutes is None else f"{result.minutes}",
        ])  # fmt: skip
    for arm, lift in found.pooled.items():
        ours = [r for r in found.results if r.arm == arm]
        table.append([arm, "all", "-", lift.text() if lift else "-", "-", "-", "-",
                      str(sum(r.agent_episodes for r in ours)), str(sum(r.agent_tokens for r in ours)),
                      f"{sum(r.minutes or 0.0 for r in ours):.1f}"])  # fmt: skip
    return table


def difference_lines(found: Comparison) -> list[str]:
    return [f"Held-out success after training, spade - {baseline} (paired over seed x task, all seeds): "
            f"{difference.text()}" for baseline, difference in found.differences.items() if difference]  # fmt: skip


def gap_lines(found: Comparison) -> list[str]:
    return [f"Not equal agent compute: {gap}" for gap in found.gaps]


def markdown(found: Comparison) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows(found)]
    more = difference_lines(found) + gap_lines(found)
    return "\n".join(lines + (["", *more] if more else [])) + "\n"


def as_json(found: Comparison) -> dict[str, Any]:
    def interval(value: Interval | None) -> list[float] | None:
        return None if value is None else [round(value.value, 4), round(value.low, 4), round(value.high, 4)]

    return {
        "arms": {
            f"seed-{result.seed}/{result.arm}": {
                "arm": result.arm,
                "seed": result.seed,
                "iterations": result.iterations,
                "suite": result.suite,
                "before": result.before,
                "after": result.after,
                "lift_ci95": interval(result.lift),
                "partial_credit_lift_ci95": interval(result.credit_lift),
                "validity": result.validity,
                "regrets": result.regret,
                "agent_rows": result.agent_rows,
                "agent_episodes": result.agent_episodes,
                "agent_tokens": result.agent_tokens,
                "minutes": result.minutes,
            }
            for result in found.results
        },
        "pooled_lift_ci95": {arm: interval(lift) for arm, lift in found.pooled.items()},
        "spade_minus_ci95": {baseline: interval(value) for baseline, value in found.differences.items()},
        "compute_gaps": found.gaps,
    }


def write_comparison(out: Path, found: Comparison) -> None:
    (out / "compare.json").write_text(json.dumps(as_json(found), indent=2) + "\n")
    (out / "compare.md").write_text(markdown(found))
