"""One GRPO update through TRL on the embedded model (float32 on CPU), fed engine-style rows.

The rows are built with the model's own tokenizer the way the engine stores a two-turn episode: sampled
ids, tool-result glue (masked out), sampled ids again. After the updates, the completion with the positive
advantage is more likely and the one with the negative advantage less likely."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.policy import trainable
from trainers.config import UpdateConfig
from trainers.grpo import Learner, RowFeed, UpdateSettings, fit_batch, grpo_trainer
from trainers.rows import TrainingRow, with_advantages


def sequence_logprob(model: Any, prompt: list[int], completion: list[int]) -> float:
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
        return float(logits.log_softmax(-1).gather(1, torch.tensor(completion)[:, None]).sum())


def test_an_update_moves_the_policy_toward_the_positive_advantage(tmp_path: Path, embedded_policy: Any) -> None:
    model, tokenizer = trainable(embedded_policy)
    prompt = tokenizer.encode("<|im_start|>user\nShould I borrow the book?<|im_end|>\n<|im_start|>assistant\n")
    good, bad = tokenizer.encode("yes<|im_end|>"), tokenizer.encode("no way<|im_end|>")
    glue = tokenizer.encode('\n<|im_start|>user\n{"ok": true}<|im_end|>\n<|im_start|>assistant\n')
    rows = []
    for index in range(4):
        said = good if index % 2 == 0 else bad
        rows.append(TrainingRow(role="agent", group="task", prompt_ids=prompt, completion_ids=said + glue + said,
                                logprobs=[0.0] * (2 * len(said) + len(glue)),
                                env_mask=[1] * len(said) + [0] * len(glue) + [1] * len(said),
                                reward=1.0 if said is good else 0.0))  # fmt: skip
    before = sequence_logprob(model, prompt, good), sequence_logprob(model, prompt, bad)
    feed = RowFeed(wait_seconds=5)
    for _ in range(2):
        feed.put(with_advantages(rows, scale="group"))
    trainer = grpo_trainer(model, tokenizer, feed, UpdateSettings(UpdateConfig(learning_rate=1e-4), 4), tmp_path, 2)
    trainer.train()
    after = sequence_logprob(trainer.model, prompt, good), sequence_logprob(trainer.model, prompt, bad)
    assert feed.batches == 2
    assert after[0] > before[0] + 1.0 and after[1] < before[1] - 1.0
    logged = [entry for entry in trainer.state.log_history if "completions/mean_length" in entry]
    assert logged and logged[0]["completions/mean_length"] == pytest.approx((2 * len(good) + 2 * len(bad)) / 2)


def test_a_feed_that_runs_dry_says_so() -> None:
    with pytest.raises(TimeoutError, match=r"no training rows arrived within 0\.01 s"):
        RowFeed(wait_seconds=0.01)(["p"], None)


class RecordingSync:
    """Stands in for the server's weight sync: keeps a copy of one weight at each push."""

    def __init__(self) -> None:
        self.pushed: list[Any] = []

    def push(self, model: Any) -> int:
        self.pushed.append(model.lm_head.weight.detach().clone())
        return 0


def test_the_learner_updates_once_per_batch_and_pushes_the_weights_after_each(
    tmp_path: Path, embedded_policy: Any
) -> None:
    import torch

    model, tokenizer = trainable(embedded_policy)
    prompt = tokenizer.encode("<|im_start|>user\nPick one.<|im_end|>\n<|im_start|>assistant\n")
    choices = [("A<|im_end|>", 1.0), ("B<|im_end|>", 0.0), ("C<|im_end|>", 0.5)]
    rows = []
    for index, (text, reward) in enumerate(choices):
        ids = tokenizer.encode(text)
        rows.append(TrainingRow(role="agent", group=f"task{index // 2}", prompt_ids=prompt, completion_ids=ids,
                                logprobs=[0.0] * len(ids), env_mask=[1] * len(ids), reward=reward))  # fmt: skip
    initial = model.lm_head.weight.detach().clone()
    feed, sync = RowFeed(wait_seconds=60), RecordingSync()
    trainer = grpo_trainer(model, tokenizer, feed, UpdateSettings(UpdateConfig(learning_rate=1e-3), 4), tmp_path, 2)
    learner = Learner(trainer, feed, sync, {"agent": 4})
    logged = []
    for _ in range(2):
        learner.update(with_advantages(rows, scale="group"))
        logged.append(learner.logged)
    learner.close()
    assert learner.updates == 2 and feed.batches == 2 and len(sync.pushed) == 2
    # what the run's tracker gets under train/: each update's own log entries, not the ones before
    assert [[entry["step"] for entry in entries] for entries in logged] == [[1], [2]]
    assert all("loss" in entry and "learning_rate" in entry for entries in logged for entry in entries)
    assert not torch.equal(sync.pushed[0], initial) and not torch.equal(sync.pushed[1], sync.pushed[0])


@pytest.mark.slow  # 25 s of TRL steps for an option the presets leave at 1: `just test-slow`
def test_several_steps_per_batch_take_the_rows_once_and_checkpoint_after_the_last(
    tmp_path: Path, embedded_policy: Any
) -> None:
    model, tokenizer = trainable(embedded_policy)
    prompt = tokenizer.encode("<|im_start|>user\nPick one.<|im_end|>\n<|im_start|>assistant\n")
    rows = []
    for text, reward in [("A<|im_end|>", 1.0), ("B<|im_end|>", 0.0)] * 2:
        ids = tokenizer.encode(text)
        rows.append(TrainingRow(role="agent", group="task", prompt_ids=prompt, completion_ids=ids,
                                logprobs=[0.0] * len(ids), env_mask=[1] * len(ids), reward=reward))  # fmt: skip
    good, bad = tokenizer.encode("A<|im_end|>"), tokenizer.encode("B<|im_end|>")
    before = sequence_logprob(model, prompt, good) - sequence_logprob(model, prompt, bad)
    feed, sync = RowFeed(wait_seconds=60), RecordingSync()
    settings = UpdateSettings(UpdateConfig(learning_rate=1e-3, steps_per_batch=2, gradient_checkpointing=False), 4)
    trainer = grpo_trainer(model, tokenizer, feed, settings, tmp_path, 2)
    learner = Learner(trainer, feed, sync, {"agent": 4})
    first = learner.update(with_advantages(rows, scale="group"), checkpoint=True)
    assert trainer.state.global_step == 2 and feed.batches == 1, "one batch of rows, two optimiser steps on it"
    assert first is not None and first.name == "checkpoint-2", "the checkpoint waits for the batch's last step"
    learner.update(with_advantages(rows, scale="group"))
    learner.close()
    assert trainer.state.global_step == 4 and feed.batches == 2 and len(sync.pushed) == 2
    after = sequence_logprob(trainer.model, prompt, good) - sequence_logprob(trainer.model, prompt, bad)
    assert after > before + 1.0
    clipped = [entry for entry in trainer.state.log_history if any(key.startswith("clip_ratio") for key in entry)]
    assert len(clipped) == 4, "every step reports how much the clip cut"


def test_a_run_resumed_with_more_updates_than_it_started_with_keeps_learning(
    tmp_path: Path, embedded_policy: Any
) -> None:
    """The checkpoint's optimizer holds its schedule's last rate (0 for the linear decay); the longer schedule's
    rate at the resumed step replaces it (until 2026-12-06 the first resumed update moved nothing)."""
    from engine.local_models import default_gguf
    from tests.trainers.sharded_update import fixed_rows
    from trainers.checkpoint import load_policy

    model, tokenizer = trainable(embedded_policy)
    knobs = UpdateConfig(learning_rate=1e-4, importance_sampling="off", gradient_checkpointing=False)
    settings = UpdateSettings(knobs, 4)
    feed = RowFeed(wait_seconds=60)
    learner = Learner(grpo_trainer(model, tokenizer, feed, settings, tmp_path, updates=1), feed, None, {"agent": 4})
    saved = learner.update(fixed_rows(tokenizer), checkpoint=True)
    learner.close()
    assert saved is not None

    model, tokenizer = load_policy(default_gguf(), None, saved)
    feed = RowFeed(wait_seconds=60)
    trainer = grpo_trainer(model, tokenizer, feed, settings, tmp_path, updates=2)
    learner = Learner(trainer, feed, None, {"agent": 4}, resume_from=saved, updates_done=1)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    learner.update(fixed_rows(tokenizer))
    learner.close()
    assert trainer.state.global_step == 2
    assert [entry["step"] for entry in learner.logged] == [2], "the checkpoint's own history is not logged again"
    moved = max(float((value - before[name]).abs().max()) for name, value in trainer.model.state_dict().items())
    assert moved == pytest.approx(5e-5, rel=0.05), "Adam's step at the linear schedule's rate for step 2 of 2"


def test_fit_batch_takes_whole_groups_with_signal_and_pads_with_empty_rows() -> None:
    import random

    rows = [TrainingRow(role="agent", group=f"g{i // 3}", prompt_ids=[1, 5], completion_ids=[2, 3],
                        logprobs=[0.0] * 2, env_mask=[1, 1], reward=float(i % 3), advantage=float(i % 3) - 1)
            for i in range(9)]  # fmt: skip
    batch = fit_batch(rows, {"agent": 8}, random.Random(0))
    assert len(batch) == 8
    real = [row for row in batch if row.group != "padding"]
    assert len(real) == 6 and len({row.group for row in real}) == 2, "whole groups only: two of three fit"
    padding = [row for row in batch if row.group == "padding"]
    assert all(row.prompt_ids == [1] and row.completion_ids == [2] and row.env_mask == [0] for row in padding)
    with pytest.raises(ValueError, match=r"no group fits in an update of \{'agent': 2\} rows per role"):
        fit_batch(rows, {"agent": 2}, random.Random(0))
    # a group with no signal (equal rewards, advantages 0) is never trained on: it would cost a pass for nothing
    flat = [row.model_copy(update={"group": "flat", "advantage": 0.0}) for row in rows[:3]]
    for seed in range(20):
        picked = fit_batch(flat + rows[3:], {"agent": 9}, random.Random(seed))
        assert {row.group for row in picked} == {"g1", "g2", "padding"}
    assert {row.group for row in fit_batch(flat, {"agent": 4}, random.Random(0))} == {"padding"}


def test_the_designers_rows_never_take_the_agents_place_in_an_update() -> None:
    """Two agent groups of 4 and a designer group of 2, with 8 agent rows and 2 designer rows an update: both
    agent groups are trained on in every order. With one budget of 8 for both roles (every run up to d4ff634),
    the designer's group, when drawn first, left room for one agent group only."""
    import random

    from engine.trajectory import Role

    def group(role: Role, name: str, size: int) -> list[TrainingRow]:
        return [TrainingRow(role=role, group=name, prompt_ids=[1], completion_ids=[2], logprobs=[0.0], env_mask=[1],
                            reward=float(i % 2), advantage=float(i % 2) - 0.5) for i in range(size)]  # fmt: skip

    rows = group("agent", "a1", 4) + group("agent", "a2", 4) + group("designer", "d", 2)
    for seed in range(20):
        batch = fit_batch(rows, {"agent": 8, "designer": 2}, random.Random(seed))
        assert len(batch) == 10 and {row.group for row in batch} == {"a1", "a2", "d"}
    frozen = fit_batch(rows, {"agent": 8, "designer": 0}, random.Random(0))  # the ablation: no designer budget
    assert {row.group for row in frozen} == {"a1", "a2"}
    trained = [[r.group for r in fit_batch(rows, {"agent": 8, "designer": 8}, random.Random(s))] for s in range(20)]
    assert all(groups.count("a1") + groups.count("a2") == 8 for groups in trained)


def token_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
        return logits.log_softmax(-1).gather(1, torch.tensor(completion)[:, None])[:, 0].tolist()


@pytest.mark.parametrize("mode", ["token_truncate", "off"])
def test_rows_from_another_sampler_are_importance_weighted(tmp_path: Path, mode: str, embedded_policy: Any) -> None:
    """The sampler gave each sampled token 1 nat less than the trained model does (as a quantized server
    would disagree): the correction sees that difference and weights by e^1, unless it is off. Tokens
    whose logprob the server did not report (None) get no weight of their own."""
    model, tokenizer = trainable(embedded_policy)
    prompt = tokenizer.encode("<|im_start|>user\nPick one.<|im_end|>\n<|im_start|>assistant\n")
    rows = []
    for index, text in enumerate(["yes, the first<|im_end|>", "no, the second<|im_end|>"]):
        ids = tokenizer.encode(text)
        sampled: list[float | None] = [value - 1.0 for value in token_logprobs(model, prompt, ids)]
        sampled[-1] = None
        rows.append(TrainingRow(role="agent", group="g", prompt_ids=prompt, completion_ids=ids, logprobs=sampled,
                                env_mask=[1] * len(ids), reward=float(index)))  # fmt: skip
    feed = RowFeed(wait_seconds=5)
    feed.put(with_advantages(rows, scale="group"))
    settings = UpdateSettings(UpdateConfig(importance_sampling=mode), 2)  # type: ignore[arg-type]
    trainer = grpo_trainer(model, tokenizer, feed, settings, tmp_path, 1)
    trainer.train()
    logged = next(entry for entry in trainer.state.log_history if "completions/mean_length" in entry)
    if mode == "off":
        assert "sampling/importance_sampling_ratio/mean" not in logged
        return
    assert logged["sampling/sampling_logp_difference/mean"] == pytest.approx(1.0, abs=0.02)
    tokens = sum(len(row.completion_ids) for row in rows)
    expected = ((tokens - len(rows)) * math.e + len(rows) * 1.0) / tokens  # unreported tokens: ratio 1
    assert logged["sampling/importance_sampling_ratio/mean"] == pytest.approx(expected, rel=0.02)


def test_each_pass_reads_only_its_rows_tokens_and_trains_exactly_as_padded(
    tmp_path: Path, embedded_policy: Any
) -> None:
    """TRL pads a batch to its longest row; one long row must not make the short rows' passes long, and cutting
    the padding must not change the update."""
    long_prompt = "<|im_start|>user\n" + "Find the book and borrow it for me, please. " * 20 + "<|im_end|>\n"
    short_prompt = "<|im_start|>user\nPick one.<|im_end|>\n<|im_start|>assistant\n"
    weights: list[Any] = []
    widths: list[list[int]] = []
    for cut in (True, False):
        model, tokenizer = trainable(embedded_policy)
        initial = model.lm_head.weight.detach().clone()
        rows = []
        for index, (prompt, text, reward) in enumerate(
            [(long_prompt, "A long answer that goes on " * 8, 1.0), (long_prompt, "B<|im_end|>", 0.0),
             (short_prompt, "A<|im_end|>", 1.0), (short_prompt, "B<|im_end|>", 0.0)]
        ):  # fmt: skip
            ids = tokenizer.encode(text)
            rows.append(TrainingRow(role="agent", group=f"task{index // 2}", prompt_ids=tokenizer.encode(prompt),
                                    completion_ids=ids, logprobs=[0.0] * len(ids), env_mask=[1] * len(ids),
                                    reward=reward))  # fmt: skip
        feed = RowFeed(wait_seconds=5)
        feed.put(with_advantages(rows, scale="group"))
        settings = UpdateSettings(UpdateConfig(learning_rate=1e-3, gradient_checkpointing=False), 4)
        trainer = grpo_trainer(model, tokenizer, feed, settings, tmp_path / str(cut), 1)
        trainer.trim_padding = cut  # off: TRL's own passes, padded to the batch's longest row
        seen: list[int] = []
        hook = model.model.register_forward_hook(
            lambda module, inputs, output, seen=seen: seen.append(output[0].size(1))
        )
        trainer.train()
        hook.remove()
        weights.append(trainer.model.lm_head.weight.detach() - initial)
        widths.append(sorted(seen))
    trimmed, padded = widths
    assert len(set(padded)) == 1 and max(trimmed) == padded[0], "TRL pads every pass to the longest row"
    assert min(trimmed) < padded[0] // 4, "a short row's pass reads its own tokens only"
    moved, difference = weights[1].norm(), (weights[0] - weights[1]).norm()
    assert difference < 1e-3 * moved, "the same update with and without the padding (float rounding aside)"
