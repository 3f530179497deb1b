"""The GRPO sweep's pieces: which seeds it plays, which groups it trains on, and its proxy measures."""

from __future__ import annotations

import math

import pytest

from benchmarks.studies.grpo_sweep import judge, task_seeds, update_batches
from trainers.config import load_config
from trainers.rows import TrainingRow, zero_spread_share
from trainers.suite import HELD_OUT_FIRST_SEED, SUITES


def group(name: str, rewards: list[float]) -> list[TrainingRow]:
    return [TrainingRow(role="agent", group=name, prompt_ids=[1], completion_ids=[2], logprobs=[0.0], env_mask=[1],
                        reward=reward) for reward in rewards]  # fmt: skip


def test_training_and_validation_tasks_are_distinct_training_seeds_of_the_suite() -> None:
    config = load_config("cpu-tiny", [])
    seeds = task_seeds(config, {"train": 3, "validation": 5})
    assert seeds == task_seeds(config, {"train": 3, "validation": 5}), "the same tasks every time"
    more = task_seeds(config, {"train": 6, "validation": 5})
    assert more["validation"] == seeds["validation"], "more training tasks leave the validation tasks be"
    assert all(more["train"][world][:3] == train for world, train in seeds["train"].items()), "and add to the rest"
    suite = SUITES[config.agent.suite]
    for world, train in seeds["train"].items():
        validation = seeds["validation"][world]
        assert len(train) == 3 and len(validation) == 5 and not set(train) & set(validation)
        assert all(seed < HELD_OUT_FIRST_SEED and suite.admits(world, seed) for seed in train + validation)


def test_updates_take_only_groups_with_signal_and_say_when_there_are_too_few() -> None:
    rows = group("a", [1, 0, 0, 0]) + group("flat", [0, 0, 0, 0]) + group("b", [1, 1, 0, 1]) + group("c", [0, 1, 0, 0])
    assert zero_spread_share(rows) == (1, 4)
    batches = update_batches(rows, rows_per_update=8, updates=1)
    assert len(batches) == 1 and len(batches[0]) == 8
    assert {row.group for row in batches[0]} < {"a", "b", "c"}
    assert batches == update_batches(rows, rows_per_update=8, updates=1), "the same batches for every setting"
    with pytest.raises(SystemExit, match="3 groups with a learning signal; 2 updates of 8 rows need 4"):
        update_batches(rows, rows_per_update=8, updates=2)


def test_the_proxy_measures_on_a_hand_computed_case() -> None:
    old = [-10.0, -12.0, -9.0, -11.0]
    success = [1.0, 1.0, 0.0, 0.0]
    new = [old[0] + math.log(2), old[1] + math.log(2), old[2], old[3] - 1.0]  # successes twice as likely
    outcome = judge("x", new, old, success, sampled=[2, 2, 1, 4], seconds=1.0, tokens=10)
    assert outcome.snis == pytest.approx(4 / (4 + 1 + math.exp(-1)))  # weights 2, 2, 1, 1/e
    assert outcome.ess == pytest.approx((5 + math.exp(-1)) ** 2 / (9 + math.exp(-2)))
    assert outcome.gap == pytest.approx(math.log(2) + 0.5)
    assert outcome.auc == 1.0, "every solved play gained more than every failed one"
    assert outcome.kl == pytest.approx(-(2 * math.log(2) - 1) / 4)
    assert outcome.won_per_token == pytest.approx(math.log(2) / 2) and outcome.lost_per_token == pytest.approx(-0.125)
    unchanged = judge("same", old, old, success, sampled=[1, 1, 1, 1], seconds=1.0, tokens=10)
    assert unchanged.snis == pytest.approx(0.5) and unchanged.ess == pytest.approx(4) and unchanged.kl == 0
    assert unchanged.auc == 0.5, "no preference: all ties"


@pytest.mark.slow  # 13 s of forward passes for the sweep script: `just test-slow`
def test_validation_logprobs_with_a_shared_opening_match_one_pass_per_row() -> None:
    import torch

    from benchmarks.studies.grpo_sweep import sequence_logprobs
    from engine.local_models import default_gguf
    from trainers.checkpoint import load_policy

    model, tokenizer = load_policy(default_gguf())
    opening = tokenizer.encode("<|im_start|>system\nYou cancel orders with the tools.<|im_end|>\n<|im_start|>user\n")
    rows = []
    for ask, said in [("Cancel O-1.", 'cancel_order {"id": "O-1"}'), ("Cancel O-22 now.", "finish")]:
        prompt = opening + tokenizer.encode(f"{ask}<|im_end|>\n<|im_start|>assistant\n")
        reply, glue = tokenizer.encode(said + "<|im_end|>"), tokenizer.encode("\n<|im_start|>user\nok<|im_end|>")
        rows.append(TrainingRow(role="agent", group="g", prompt_ids=prompt, completion_ids=reply + glue + reply + glue,
                                logprobs=[0.0] * (2 * len(reply) + 2 * len(glue)),
                                env_mask=([1] * len(reply) + [0] * len(glue)) * 2, reward=0.0))  # fmt: skip
    shared = sequence_logprobs(model, rows, temperature=0.7)
    for row, total in zip(rows, shared, strict=True):
        ids = torch.tensor([row.prompt_ids + row.completion_ids])
        with torch.no_grad():
            logits = model(ids).logits[0, len(row.prompt_ids) - 1 : -1] / 0.7
        chosen = logits.log_softmax(-1).gather(1, ids[0, len(row.prompt_ids) :, None])[:, 0]
        expected = float(chosen[torch.tensor(row.env_mask, dtype=torch.bool)].sum())
        assert total == pytest.approx(expected, abs=1e-3)
