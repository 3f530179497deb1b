"""`spadework train-compare`: SPADE against a fixed pool of reference worlds, at equal compute, in one table.

The paper's central claim is that a designer that co-evolves with the agent beats training on a fixed pool
of environments. Two arms run from one preset, with the same seed, iterations, update size and held-out suite:

    spade       the preset as it is: the designer writes worlds, the agent plays them and reference tasks
    fixed-pool  `ablations.fixed_pool`: no designer; the agent plays `designer.documents x
                designer.generations` more reference tasks per iteration, as many tasks as the designer's
                worlds add when every one is valid, so the fixed pool never has fewer training plays

Each update takes `update.rows_per_update` rows in both arms (one update per iteration), so both take the
same gradient steps on the same number of rows; what differs is where the rows come from. The table also
prints each arm's sampled tokens and minutes, so the equal-compute claim can be checked, not just believed.

Each arm is an ordinary training run in `OUT/<arm>` (a `spadework train` process of its own): an arm that
finished is read back, one that was killed is resumed from its checkpoint, so a killed comparison continues.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.config import TrainConfig, load_config
from trainers.journal import JournalError
from trainers.report import ReportError, RunRecord, read_run, summary_json
from trainers.run_state import ResumeError, load_state
from trainers.selfplay import read_held_out, read_iterations
from trainers.stats import paired_lift

ARMS = ("spade", "fixed-pool")


class CompareError(RuntimeError):
    """An arm that cannot run or be continued; the message names it and why."""


def arm_overrides(config: TrainConfig) -> dict[str, list[str]]:
    """The overrides each arm adds to the preset (and the caller's own overrides, already in `config`)."""
    extra_tasks = config.designer.documents * config.designer.generations
    return {
        "spade": [],
        "fixed-pool": [
            "ablations.fixed_pool=true",
            f"agent.reference_tasks={config.agent.reference_tasks + extra_tasks}",
        ],
    }


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


def run_arms(preset: str, overrides: list[str], out: Path, log_level: str = "info") -> dict[str, Path]:
    """Run (or resume, or skip when finished) each arm as its own `spadework train` process."""
    config = load_config(preset, overrides)
    runs: dict[str, Path] = {}
    for arm, extra in arm_overrides(config).items():
        run = out / arm
        runs[arm] = run
        if finished(run):
            continue
        command = [sys.executable, "-m", "spadework", "--log-level", log_level, "train"]
        if _has_checkpoint(run):
            command += ["--resume", str(run)]
        elif run.exists() and any(run.iterdir()):
            raise CompareError(f"{run} holds an arm stopped before its first checkpoint: remove it to run it again")
        else:
            command += ["--preset", preset, "--out", str(run)]
            command += [item for setting in [*overrides, *extra] for item in ("--set", setting)]
        if subprocess.run(command).returncode != 0:
            raise CompareError(f"the {arm} arm's training failed (its output is above); run the same command to resume")
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
    """One arm's row of the comparison."""

    arm: str
    iterations: int
    suite: str | None
    before: float | None  # held-out success before training
    after: float | None  # and after the last iteration
    lift: Interval | None  # paired over the held-out tasks
    credit_lift: Interval | None
    validity: list[tuple[int, int]]  # per iteration: (valid worlds, replies)
    regret: list[list[float]]  # per iteration: the valid worlds' regrets
    agent_rows: int
    sampled_tokens: int
    minutes: float | None


def arm_result(arm: str, record: RunRecord) -> ArmResult:
    """One arm's row, its held-out numbers as its own report states them (`trainers.report.summary_json`)."""
    headline = summary_json(record)
    before, after = headline["before"], headline["after"]
    lift = credit = None
    if headline["lift_ci95"] is not None:
        lift = Interval(headline["lift"], *headline["lift_ci95"])
        credit = Interval(headline["partial_credit_lift"], *headline["partial_credit_lift_ci95"])
    return ArmResult(
        arm=arm,
        iterations=len(record.iterations),
        suite=headline["suite"],
        before=before["success"] if before else None,
        after=after["success"] if after and lift is not None else None,
        lift=lift,
        credit_lift=credit,
        validity=[(m.valid_after_repair, m.replies) for m in record.designer],
        regret=[list(m.regrets) for m in record.designer],
        agent_rows=sum(r.rows.get("agent", 0) for r in record.iterations),
        sampled_tokens=sum(r.sampled_tokens or 0 for r in record.iterations),
        minutes=headline["minutes"],
    )


def final_difference(first: RunRecord, second: RunRecord) -> Interval | None:
    """Held-out success after training, first arm minus second, paired over the tasks both measured (both
    arms start from the same policy, so this is the difference of their lifts without the noise of two
    separate before-measurements)."""
    finals = []
    for record in (first, second):
        measured = [h for h in record.held_out if h.scored]
        if len(measured) < 2:
            return None
        finals.append(measured[-1].successes())
    return Interval(*paired_lift(finals[1], finals[0]))


def comparison(runs: dict[str, Path]) -> tuple[list[ArmResult], Interval | None]:
    records = {arm: read_run(path) for arm, path in runs.items()}
    results = [arm_result(arm, record) for arm, record in records.items()]
    difference = final_difference(records["spade"], records["fixed-pool"]) if set(records) >= set(ARMS) else None
    return results, difference


COLUMNS = ("arm", "held-out success before -> after", "lift (95% CI)", "partial-credit lift (95% CI)",
           "designer validity per iteration", "mean regret per iteration (valid worlds)", "agent rows",
           "sampled tokens", "minutes")  # fmt: skip


def rows(results: list[ArmResult]) -> list[list[str]]:
    """The table's cells, one row per arm (the same cells for the console and for markdown)."""
    table = []
    for result in results:
        success = (
            "-"
            if result.before is None
            else f"{result.before:.1%} -> " + ("-" if result.after is None else f"{result.after:.1%}")
        )
        validity = " ".join(f"{valid}/{replies}" for valid, replies in result.validity) or "no designer"
        regret = " ".join("-" if not values else f"{sum(values) / len(values):+.2f}" for values in result.regret)
        table.append([
            result.arm, success, result.lift.text() if result.lift else "-",
            result.credit_lift.text(percent=False) if result.credit_lift else "-", validity, regret or "-",
            str(result.agent_rows), str(result.sampled_tokens), "-" if result.minutes is None else f"{result.minutes}",
        ])  # fmt: skip
    return table


def markdown(results: list[ArmResult], difference: Interval | None) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows(results)]
    if difference is not None:
        lines.append("")
        lines.append(f"Held-out success after training, spade - fixed-pool (paired over tasks): {difference.text()}")
    return "\n".join(lines) + "\n"


def as_json(results: list[ArmResult], difference: Interval | None) -> dict[str, Any]:
    def interval(value: Interval | None) -> list[float] | None:
        return None if value is None else [round(value.value, 4), round(value.low, 4), round(value.high, 4)]

    return {
        "arms": {
            result.arm: {
                "iterations": result.iterations,
                "suite": result.suite,
                "before": result.before,
                "after": result.after,
                "lift_ci95": interval(result.lift),
                "partial_credit_lift_ci95": interval(result.credit_lift),
                "validity": result.validity,
                "regrets": result.regret,
                "agent_rows": result.agent_rows,
                "sampled_tokens": result.sampled_tokens,
                "minutes": result.minutes,
            }
            for result in results
        },
        "spade_minus_fixed_pool_after_ci95": interval(difference),
    }


def write_comparison(out: Path, results: list[ArmResult], difference: Interval | None) -> None:
    (out / "compare.json").write_text(json.dumps(as_json(results, difference), indent=2) + "\n")
    (out / "compare.md").write_text(markdown(results, difference))
