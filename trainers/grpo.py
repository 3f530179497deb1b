"""One GRPO update per batch of engine rows, through TRL's `GRPOTrainer` and its `rollout_func` hook.

TRL drives the optimisation loop; spadework owns generation. `RowFeed` is the `rollout_func`: when TRL asks
for a batch it hands over the next rows the self-play loop produced (token ids as sampled, logprobs,
`env_mask` keeping tool results and template glue out of the loss). The advantages are computed by
`trainers.rows` (centred per group, scaled per role) and passed as the reward with TRL's own scaling off,
so TRL's group-mean subtraction leaves them unchanged.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.rows import TrainingRow, rollout_batch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental in TRL 1.x


@dataclass(frozen=True)
class UpdateSettings:
    """The optimiser's knobs for one role-mixed GRPO update per batch."""

    rows_per_update: int = 8
    learning_rate: float = 1e-5
    beta: float = 0.0  # KL to a reference model; 0 needs no reference copy
    epsilon: float = 0.2  # PPO clip
    max_completion_length: int = 4096
    wait_seconds: float = 3600.0  # how long an update waits for the self-play loop's next rows


class RowFeed:
    """TRL's `rollout_func`: returns the next rows put in, exactly as many as TRL asks for."""

    def __init__(self, wait_seconds: float = 3600.0) -> None:
        self._rows: queue.Queue[TrainingRow] = queue.Queue()
        self.wait_seconds = wait_seconds
        self.batches = 0

    def put(self, rows: Iterable[TrainingRow]) -> None:
        for row in rows:
            self._rows.put(row)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        try:
            rows = [self._rows.get(timeout=self.wait_seconds) for _ in prompts]
        except queue.Empty:
            raise TimeoutError(f"no training rows arrived within {self.wait_seconds:g} s") from None
        self.batches += 1
        return rollout_batch(rows)


def advantage_reward(env_reward: list[float], **_: Any) -> list[float]:
    """The reward TRL sees is the advantage `trainers.rows` computed (per group, per role)."""
    return env_reward


def grpo_trainer(model: Any, tokenizer: Any, feed: RowFeed, settings: UpdateSettings, out: Path, updates: int) -> Any:
    """A `GRPOTrainer` that runs `updates` optimiser steps, each on `rows_per_update` rows from `feed`."""
    from datasets import Dataset
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=settings.rows_per_update,
        num_generations=settings.rows_per_update,  # TRL's grouping is unused: groups live in the advantages
        max_steps=updates,
        learning_rate=settings.learning_rate,
        beta=settings.beta,
        epsilon=settings.epsilon,
        max_completion_length=settings.max_completion_length,
        scale_rewards="none",
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=not _has_accelerator(),
        gradient_checkpointing=False,
        bf16=False,
    )
    # TRL samples prompts from a dataset; each prompt only asks the feed for one row.
    prompts = Dataset.from_dict({"prompt": ["(rows come from the engine)"] * settings.rows_per_update})
    return GRPOTrainer(
        model=model,
        reward_funcs=[advantage_reward],
        args=args,
        train_dataset=prompts,
        processing_class=tokenizer,
        rollout_func=feed,
    )


def _has_accelerator() -> bool:
    import torch

    return bool(torch.cuda.is_available())
