"""Where a run's numbers show while it runs: Trackio (local, the default), TensorBoard, W&B, or nowhere.

One tracker per run, owned by the self-play loop. It receives spadework's own measures once per iteration
and at each held-out evaluation, with TRL's log of the iteration's update folded in under `train/`, all on
one step axis: step `i + 1` is iteration `i`, step 0 is before training. TRL's own `report_to` stays empty,
so a run is one tracker run, not two on different axes. The names are stable and SPADE's where SPADE logs
the same measure (`METRICS` lists them; docs/guide.md shows the table).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import structlog

from trainers.config import TrackerKind
from trainers.designer.loop import IterationResult
from trainers.run_records import HeldOut, IterationReport
from trainers.stats import bootstrap_mean

log = structlog.get_logger()

PROJECT = "spadework"  # the tracker's project, unless TRACKIO_PROJECT / WANDB_PROJECT name another
TENSORBOARD_DIR = "tensorboard"  # under the run directory

# Every name a run logs, and what it measures. SPADE's own names (its W&B keys) come first.
METRICS: dict[str, str] = {
    "env/avg_regret": "mean hint-based regret of the iteration's designed worlds (hinted minus unhinted score)",
    "env/avg_r_hint": "mean score of the agent's hinted plays of the designed worlds",
    "env/avg_r_no_hint": "mean score of the agent's unhinted plays of the designed worlds",
    "env/avg_actor_win_rate": "share of the unhinted plays of designed worlds that solved their task",
    "env_validator/rejection_rate": "share of the designer's replies the gates rejected (after repair)",
    "actor/all_zero_std": "share of GRPO groups whose rewards were all equal (no learning signal)",
    "env/valid_worlds": "designed worlds that passed every gate",
    "env/validity_before_repair": "share of the designer's replies valid as written",
    "env/vendi": "Vendi score of the valid worlds' tool sets (diversity)",
    "env/answer_leak_rate": "mean share of a valid world's answer its hint gives away",
    "env/frontier_worlds": "designed worlds the thresholds class as frontier (solvable, not yet solved)",
    "env_validator/rejected/<gate>": "replies rejected by each gate",
    "actor/return": "mean reward of the agent's training rows",
    "designer/reward": "mean reward of the designer's training rows",
    "rows/<role>": "training rows of each role in the update",
    "rows/skipped/<reason>": "rows left out of the update, by reason",
    "perf/sampled_tokens_per_s": "tokens the policy sampled per second of the iteration's play stages",
    "time/<stage>_s": "seconds of each stage of the iteration (design, archive, reference, update)",
    "train/<TRL key>": "TRL's log of the iteration's update (loss, kl, entropy, clip ratios, ...), mean of its steps",
    "eval/success": "held-out success: share of the suite's tasks solved (one plain play each)",
    "eval/success_low, eval/success_high": "its 95% bootstrap interval",
    "eval/partial_credit": "held-out partial credit: mean score on the suite's tasks",
    "eval/partial_credit_low, eval/partial_credit_high": "its 95% bootstrap interval",
    "eval/reference_plain, eval/reference_hinted": "mean success on the full reference tasks, unhinted and hinted",
    "eval/peak_rss_gb": "the run's peak memory so far",
}

Metrics = Mapping[str, float]


class Tracker(Protocol):
    """A run's sink for numbers: `log` at a step, `close` once at the end."""

    def log(self, metrics: Metrics, step: int) -> None: ...

    def close(self) -> None: ...


class NoTracker:
    """`run.report_to=none`: the run's JSONL files and report only."""

    def log(self, metrics: Metrics, step: int) -> None:
        pass

    def close(self) -> None:
        pass


class TrackioTracker:
    """Trackio's local store (`trackio show` opens its dashboard); no account, no network."""

    def __init__(self, run_name: str, config: Mapping[str, Any], resume: bool) -> None:
        import trackio

        self._trackio = trackio
        project = os.environ.get("TRACKIO_PROJECT", PROJECT)
        resumed = "allow" if resume else "never"
        self.run = trackio.init(project=project, name=run_name, config=dict(config), embed=False, resume=resumed,
                                auto_log_cpu=False, auto_log_gpu=False)  # fmt: skip
        self.project = project

    def log(self, metrics: Metrics, step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()  # type: ignore[no-untyped-call]


class TensorBoardTracker:
    """Event files under the run directory's `tensorboard/` (`tensorboard --logdir RUN/tensorboard`)."""

    def __init__(self, directory: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(directory))

    def log(self, metrics: Metrics, step: int) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    """Weights & Biases; offline (files under the run directory, `wandb sync` later) unless an API key or
    WANDB_MODE says otherwise."""

    def __init__(self, directory: Path, run_name: str, run_id: str, config: Mapping[str, Any]) -> None:
        import wandb

        mode: Any = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", PROJECT), name=run_name, id=run_id,
                              resume="allow", dir=str(directory), config=dict(config), mode=mode)  # fmt: skip

    def log(self, metrics: Metrics, step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


def iteration_metrics(report: IterationReport, designed: IterationResult | None,
                      trainer_log: Sequence[Mapping[str, Any]] = ()) -> dict[str, float]:  # fmt: skip
    """One iteration's numbers under `METRICS`'s names; `trainer_log` is TRL's log of its update."""
    metrics: dict[str, float] = {f"rows/{role}": count for role, count in report.rows.items()}
    metrics |= {f"rows/skipped/{reason}": count for reason, count in report.skipped.items()}
    metrics |= {f"time/{stage}_s": seconds for stage, seconds in report.seconds.items()}
    metrics |= _present({"actor/return": report.agent_return, "designer/reward": report.designer_reward,
                         "actor/all_zero_std": report.zero_spread_share})  # fmt: skip
    playing = sum(seconds for stage, seconds in report.seconds.items() if stage != "update")
    if report.sampled_tokens is not None and playing > 0:
        metrics["perf/sampled_tokens_per_s"] = report.sampled_tokens / playing
    if designed is not None:
        metrics |= _designer_metrics(designed)
    metrics |= _trainer_means(trainer_log)
    return metrics


def _designer_metrics(designed: IterationResult) -> dict[str, float]:
    measured, outcomes = designed.metrics, designed.outcomes
    metrics: dict[str, float] = {
        "env/valid_worlds": measured.valid_after_repair,
        "env/validity_before_repair": measured.validity_before_repair,
        "env/vendi": measured.vendi,
        "env/frontier_worlds": measured.statuses.get("frontier", 0),
    }
    if measured.replies:
        metrics["env_validator/rejection_rate"] = 1.0 - measured.validity_after_repair
    metrics |= {f"env_validator/rejected/{gate}": count for gate, count in measured.rejections.items()}
    return metrics | _present({
        "env/avg_regret": measured.regret_mean,
        "env/answer_leak_rate": measured.answer_leak_rate,
        "env/avg_r_hint": _mean([o.mean_hinted for o in outcomes if o.mean_hinted is not None]),
        "env/avg_r_no_hint": _mean([o.mean_plain for o in outcomes if o.mean_plain is not None]),
        "env/avg_actor_win_rate": _mean([o.solved_plain for o in outcomes if o.solved_plain is not None]),
    })  # fmt: skip


def _trainer_means(trainer_log: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """TRL's numbers over the update's optimiser steps, each key's mean, under `train/`."""
    values: dict[str, list[float]] = {}
    for entry in trainer_log:
        for key, value in entry.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and key not in ("step", "epoch"):
                values.setdefault(f"train/{key}", []).append(float(value))
    return {key: statistics.fmean(numbers) for key, numbers in values.items()}


def held_out_metrics(held: HeldOut) -> dict[str, float]:
    """One held-out evaluation's numbers under `METRICS`'s names, with 95% bootstrap intervals."""
    metrics: dict[str, float] = {}
    for name, scores in (("success", held.successes()), ("partial_credit", held.credits())):
        if scores:
            mean, low, high = bootstrap_mean(list(scores.values()))
            metrics |= {f"eval/{name}": mean, f"eval/{name}_low": low, f"eval/{name}_high": high}
    return metrics | _present({"eval/reference_plain": held.mean_plain, "eval/reference_hinted": held.mean_hinted,
                               "eval/peak_rss_gb": held.peak_rss_gb})  # fmt: skip


def _present(values: Mapping[str, float | None]) -> dict[str, float]:
    return {name: value for name, value in values.items() if value is not None}


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


class TrackerError(RuntimeError):
    """The tracker `run.report_to` names cannot start; the message says which and how to fix it."""


def open_tracker(kind: TrackerKind, out: Path, run_id: str, config: Mapping[str, Any], resume: bool = False) -> Tracker:
    """The tracker `run.report_to` names, for the run in `out` (its run name is the directory's name)."""
    try:
        if kind == "trackio":
            tracker: Tracker = TrackioTracker(out.resolve().name, config, resume)
        elif kind == "tensorboard":
            tracker = TensorBoardTracker(out / TENSORBOARD_DIR)
        elif kind == "wandb":
            tracker = WandbTracker(out, out.resolve().name, run_id, config)
        else:
            tracker = NoTracker()
    except ImportError as error:
        raise TrackerError(f"run.report_to={kind} needs the {kind} package ({error}): pip install "
                           f"'spadework[tracking]', or set run.report_to=none") from None  # fmt: skip
    log.info("tracking", report_to=kind, run=out.resolve().name)
    return tracker
