"""One GRPO update per batch of engine rows, through TRL's `GRPOTrainer` and its `rollout_func` hook.

TRL drives the optimisation loop; spadework owns generation. `RowFeed` is the `rollout_func`: when TRL asks
for a batch it hands over the next rows the self-play loop produced (token ids as sampled, logprobs,
`env_mask` keeping tool results and template glue out of the loss). The advantages are computed by
`trainers.rows` (centred per group, scaled per role) and passed as the reward with TRL's own scaling off,
so TRL's group-mean subtraction leaves them unchanged.

The rows were sampled by a serving engine (llama.cpp on a quantized export, or vLLM), not by the float
model being trained, so the two disagree on every token's probability. TRL corrects for that only on its
vLLM path; spadework's `GRPOTrainer` (trainers/trl_trainer.py) switches that path on for the engine's rows
(`importance_sampling`), so the loss is weighted by the truncated ratio between the trainer's and the
sampler's probabilities.
"""

from __future__ import annotations

import os
import queue
import random
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.callbacks import Callback
from trainers.config import GrammarSampler, ImportanceSampling, TrainConfig, UpdateConfig
from trainers.constrained import GrammarRestrictions
from trainers.rows import PADDING_GROUP, TrainingRow, padding_row, rollout_batch
from trainers.sharding import FSDP_CONFIG, GatherForPush, policy_for_push, shard_on_cpu
from trainers.weight_sync import WeightSync

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental in TRL 1.x


@dataclass(frozen=True)
class UpdateSettings:
    """The update as the trainer takes it: the config's knobs, each defined once (`UpdateConfig`), and what
    the rest of the run's config decides (`of`)."""

    knobs: UpdateConfig
    batch_rows: int  # rows in one update, both roles (`TrainConfig.update_rows`): one optimiser batch
    temperature: float = 1.0  # the sampling temperature: the trainer's logprobs must be the sampler's distribution
    grammar_sampler: GrammarSampler = "llama.cpp"  # whose rules the grammars were sampled under (llama.cpp or vLLM)
    wait_seconds: float = 3600.0  # how long an update waits for the self-play loop's next rows

    def __post_init__(self) -> None:
        if self.batch_rows % self.knobs.rows_per_pass:
            raise ValueError(
                f"the rows of one update ({self.batch_rows}) must be a multiple of rows_per_pass "
                f"({self.knobs.rows_per_pass})"
            )

    @classmethod
    def of(cls, config: TrainConfig) -> UpdateSettings:
        """A run's update: its batch holds both roles' rows, scored at the agent's sampling temperature."""
        return cls(config.update, sum(config.update_rows.values()), config.agent.temperature, config.grammar_sampler)


class TrainingStopped(Exception):
    """Raised inside TRL's loop to end it when the self-play run is over."""


class RowFeed:
    """TRL's `rollout_func`: returns the next rows put in, exactly as many as TRL asks for.

    It is also where the two loops meet: TRL calls it at the start of each optimiser step, so a call after
    the first means the previous update is done and the model is idle until rows arrive. `wait_for_update`
    lets the self-play loop block until then (and push the new weights to the server) before it samples.
    """

    def __init__(self, wait_seconds: float = 3600.0) -> None:
        self._rows: queue.Queue[TrainingRow | None] = queue.Queue()
        self._updates: queue.Queue[int] = queue.Queue()
        self.wait_seconds = wait_seconds
        self.batches = 0
        self.restrictions: GrammarRestrictions | None = None  # set by `grpo_trainer` when it restricts

    def put(self, rows: Iterable[TrainingRow]) -> None:
        for row in rows:
            self._rows.put(row)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        if self.batches:
            self._updates.put(self.batches)
        rows = self._step_rows(len(prompts), trainer)
        if rows is None:
            raise TrainingStopped
        self.batches += 1
        if self.restrictions is not None:
            rows = self.restrictions.prepare(rows)
        return rollout_batch(rows)

    def _step_rows(self, share: int, trainer: Any) -> list[TrainingRow] | None:
        """This process's rows for the step TRL is starting, or None once the run has stopped."""
        return self._take(share)

    def _take(self, count: int) -> list[TrainingRow] | None:
        """The next `count` rows, or None once the run has stopped."""
        rows: list[TrainingRow] = []
        while len(rows) < count:
            try:
                row = self._rows.get(timeout=self.wait_seconds)
            except queue.Empty:
                raise TimeoutError(f"no training rows arrived within {self.wait_seconds:g} s") from None
            if row is None:
                return None
            rows.append(row)
        return rows

    def stop(self) -> None:
        """End training at the next request for rows (the run may stop before TRL's last step)."""
        self._rows.put(None)

    def update_finished(self) -> None:
        """Called when training ends: the last update is done too."""
        self._updates.put(self.batches)

    def wait_for_update(self, timeout: float) -> int:
        """Block until the update on the rows put so far is done; returns how many updates are done."""
        try:
            return self._updates.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"the trainer did not finish an update within {timeout:g} s") from None


def fit_batch(rows: list[TrainingRow], budget: Mapping[str, int], rng: random.Random) -> list[TrainingRow]:
    """Exactly `sum(budget.values())` rows for one update: whole groups with a learning signal while each role's
    rows fit its budget (`TrainConfig.update_rows`), then padding.

    A group whose advantages are all 0 (its rewards were equal) adds nothing to the gradient, so it is left
    out rather than paid for with a forward and backward pass; groups are taken in random order, and the
    rows of groups that do not fit are left for no one (an update has a fixed size: size it to the
    iteration's yield). Each role has its own budget, so the designer's rows never take the agent's place.
    The rest is padding: one-token rows with nothing in the loss, which cost a forward pass of two tokens.
    """
    groups: dict[str, list[TrainingRow]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    order = [name for name in groups if any(row.advantage for row in groups[name])]
    rng.shuffle(order)
    chosen: list[TrainingRow] = []
    taken: Counter[str] = Counter()
    for name in order:
        role = groups[name][0].role
        if taken[role] + len(groups[name]) <= budget.get(role, 0):
            chosen += groups[name]
            taken[role] += len(groups[name])
    if not chosen and order:
        smallest = min(order, key=lambda name: len(groups[name]))
        raise ValueError(f"no group fits in an update of {dict(budget)} rows per role (the smallest, "
                         f"{smallest!r}, has {len(groups[smallest])})")  # fmt: skip
    return chosen + [padding_row(rows[0])] * (sum(budget.values()) - len(chosen))


class SaveWhenAsked(Callback):
    """A transformers callback: after the next batch's last optimiser step, write a full checkpoint
    (weights, optimizer, scheduler, RNG, trainer state) to `output_dir/checkpoint-<step>`."""

    def __init__(self, steps_per_batch: int = 1) -> None:
        self.asked = threading.Event()
        self.steps_per_batch = steps_per_batch

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.asked.is_set() and state.global_step % self.steps_per_batch == 0:
            self.asked.clear()
            control.should_save = True
        return control


class RateFromSchedule(Callback):
    """A transformers callback: when training starts, set the optimizer's learning rate to the schedule's at the
    current step. A run resumed with more iterations than it started with has a longer schedule, but the
    checkpoint's optimizer holds the old schedule's last rate (0, for the linear decay): its first update
    would not move the weights."""

    def on_train_begin(self, args: Any, state: Any, control: Any, optimizer: Any = None, lr_scheduler: Any = None,
                       **kwargs: Any) -> Any:  # fmt: skip
        if optimizer is not None and lr_scheduler is not None and state.global_step:
            for group, rate in zip(optimizer.param_groups, lr_scheduler.get_lr(), strict=True):
                group["lr"] = rate
        return control


class Learner:
    """TRL's training loop in a thread, one update per `update(rows)`, weights pushed after each.

    The self-play loop stays in charge: it samples, hands rows over, and gets control back once the
    update is applied (and checkpointed, when asked) and the serving endpoint has the new weights
    (`sync`, e.g. `GGUFReloadSync`). `resume_from` continues from a trainer checkpoint: weights,
    optimizer, scheduler and RNG as they were after its update.
    """

    def __init__(self, trainer: Any, feed: RowFeed, sync: WeightSync | None, budget: Mapping[str, int], seed: int = 0,
                 resume_from: Path | None = None, updates_done: int = 0) -> None:  # fmt: skip
        self.trainer = trainer
        self.feed = feed
        self.sync = sync
        self.budget = dict(budget)  # rows per role in one update; their sum is the trainer's rows_per_update
        self.seed = seed
        self.updates = updates_done
        self.trained_tokens = 0  # in the newest update's rows, padding left out
        self.left_out: Counter[str] = Counter()  # the newest update's rows left out (`GrammarRestrictions`)
        self.logged: list[dict[str, Any]] = []  # TRL's log entries of the newest update's optimiser steps
        self._saver = next(c for c in trainer.callback_handler.callbacks if isinstance(c, SaveWhenAsked))
        self._resume_from = resume_from
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._train, name="grpo-learner", daemon=True)
        self._thread.start()

    def _train(self) -> None:
        try:
            resume = str(self._resume_from) if self._resume_from else None
            self.trainer.train(resume_from_checkpoint=resume)
        except TrainingStopped:
            pass
        except BaseException as error:  # handed to the self-play loop, which re-raises it
            self._failure = error
        finally:
            self.feed.update_finished()

    def update(self, rows: list[TrainingRow], checkpoint: bool = False, timeout: float = 3600.0) -> Path | None:
        """Apply one GRPO update on `rows` and push the new weights; raises what the trainer raised.

        With `checkpoint`, the trainer also writes a full checkpoint after the step; its path is returned.
        """
        rng = random.Random(f"{self.seed}/batch/{self.updates}")  # the same batch on a resumed run
        if checkpoint:
            self._saver.asked.set()
        batch = fit_batch(rows, self.budget, rng)
        self.trained_tokens = sum(
            len(row.prompt_ids) + len(row.completion_ids) for row in batch if row.group != PADDING_GROUP
        )
        self.feed.put(batch)
        self.feed.wait_for_update(timeout)
        if self._failure is not None:
            raise RuntimeError(f"the GRPO trainer failed: {self._failure!r}") from self._failure
        self.updates += 1
        step = self.trainer.state.global_step  # a resumed trainer's history also holds the steps before it
        first = step - self._saver.steps_per_batch
        self.logged = [e for e in self.trainer.state.log_history if first < e.get("step", 0) <= step and "loss" in e]
        restrictions = self.feed.restrictions
        self.left_out = Counter(restrictions.left_out) if restrictions else Counter()
        self.trained_tokens -= restrictions.left_out_tokens if restrictions else 0
        saved = None
        if checkpoint:
            saved = Path(self.trainer.args.output_dir) / f"checkpoint-{self.trainer.state.global_step}"
            if not saved.is_dir():
                raise RuntimeError(f"the trainer did not write the checkpoint {saved}")
        if self.sync is not None:
            self.sync.push(policy_for_push(self.trainer))
        return saved

    def close(self, timeout: float = 60.0) -> None:
        self.feed.stop()
        self._thread.join(timeout)


def advantage_reward(env_reward: list[float], **_: Any) -> list[float]:
    """The reward TRL sees is the advantage `trainers.rows` computed (per group, per role)."""
    return env_reward


def grpo_trainer(model: Any, tokenizer: Any, feed: RowFeed, settings: UpdateSettings, out: Path, updates: int,
                 processes: int = 1) -> Any:  # fmt: skip
    """A `GRPOTrainer` that runs up to `updates` updates, each `steps_per_batch` optimiser steps on
    `rows_per_update` rows from `feed` (split over `processes` data-parallel processes), and checkpoints when
    a `Learner` asks (at most the two newest are kept)."""
    from datasets import Dataset
    from trl.trainer.grpo_config import GRPOConfig

    from trainers.trl_trainer import SpadeworkGRPOTrainer

    args = GRPOConfig(
        output_dir=str(out),
        # One optimiser step per `rows_per_update` rows, in passes of `rows_per_pass`: on CPU the logits and
        # activations of four 2,000-token rows at once took 18 GB; one row per pass keeps that bounded.
        per_device_train_batch_size=settings.knobs.rows_per_pass,
        gradient_accumulation_steps=settings.batch_rows // (settings.knobs.rows_per_pass * processes),
        num_generations=settings.batch_rows,  # TRL's grouping is unused: groups live in the advantages
        max_steps=updates * settings.knobs.steps_per_batch,
        num_iterations=settings.knobs.steps_per_batch,  # TRL asks the feed for rows once per batch, steps it mu times
        learning_rate=settings.knobs.learning_rate,
        beta=settings.knobs.beta,
        epsilon=settings.knobs.epsilon,
        max_completion_length=settings.knobs.max_completion_length,
        temperature=settings.temperature,  # TRL divides the logits by it: the sampler's distribution
        scale_rewards="none",
        logging_steps=1,
        report_to=[],
        save_strategy="no",  # checkpoints are written when the self-play loop asks (SaveWhenAsked)
        save_total_limit=2,
        vllm_importance_sampling_correction=settings.knobs.importance_sampling != "off",
        vllm_importance_sampling_mode=_is_mode(settings.knobs.importance_sampling),
        vllm_importance_sampling_clip_max=settings.knobs.importance_sampling_cap,
        use_cpu=not _has_accelerator(),
        gradient_checkpointing=settings.knobs.gradient_checkpointing,
        bf16=_has_accelerator(),  # CPU: float32 throughout
        # Processes other than the first wait in a collective while it plays a whole iteration.
        ddp_timeout=int(settings.wait_seconds) + 600,
        fsdp=settings.knobs.sharding == "fsdp2",
        fsdp_config=dict(FSDP_CONFIG) if settings.knobs.sharding == "fsdp2" else None,
    )
    # TRL samples prompts from a dataset; each prompt only asks the feed for one row.
    prompts = Dataset.from_dict({"prompt": ["(rows come from the engine)"] * settings.batch_rows})
    if settings.knobs.grammar_logprobs == "restricted":
        feed.restrictions = GrammarRestrictions(tokenizer, settings.grammar_sampler)
    trainer = SpadeworkGRPOTrainer(
        model=model,
        reward_funcs=[advantage_reward],
        args=args,
        train_dataset=prompts,
        processing_class=tokenizer,
        rollout_func=feed,
        callbacks=[SaveWhenAsked(settings.knobs.steps_per_batch), RateFromSchedule()],
        restrictions=feed.restrictions,
        correct_for_sampler=settings.knobs.importance_sampling != "off",
    )
    if settings.knobs.sharding == "fsdp2":
        if not _has_accelerator():
            shard_on_cpu(trainer)
        trainer.add_callback(GatherForPush.for_trainer(trainer, settings.knobs.steps_per_batch))
    elif trainer.is_fsdp_enabled:
        raise ValueError(
            "accelerate's config shards the policy (FSDP), so the weight sync would read shards: "
            "set update.sharding=fsdp2 (spadework then gathers the whole weights for each push)"
        )
    return trainer


def _is_mode(mode: ImportanceSampling) -> str:
    return "token_truncate" if mode == "off" else mode


def _has_accelerator() -> bool:
    import torch

    return bool(torch.cuda.is_available())
