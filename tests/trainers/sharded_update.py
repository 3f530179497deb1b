"""Two GRPO updates of the embedded model on fixed rows, in as many processes as the launcher starts.

`python -m tests.trainers.sharded_update OUT SHARDING` alone, or under `torchrun --nproc-per-node N`: the
first process hands the rows to a `Learner` (which splits them over the processes like `spadework train`),
and saves, before and after each update, the weights its sync would push (`OUT/pushed-<n>.pt`), and the trainer's
logged loss and gradient norm with the share of the weights it held (`OUT/log.json`); each process writes its
peak memory (`OUT/peak-<rank>.json`). The test compares the runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from engine.call_grammar import call_grammar
from tests.trainers.test_constrained import TOOLS
from trainers.rows import TrainingRow, with_advantages


def fixed_rows(tokenizer: Any) -> list[TrainingRow]:
    """Two groups of two rows of different lengths, so how tokens are counted across processes matters: one
    group sampled under a call grammar (scored under the restricted softmax), the other free text. Each process
    gets one group, so the processes run different code around the same sharded model."""
    prompt = tokenizer.encode("<|im_start|>user\nWhere is order O-17?<|im_end|>\n<|im_start|>assistant\n")
    rows = []
    for order, reward in (("O-17", 1.0), ("O-1", 0.0)):
        completion = tokenizer.encode(f'{{"name": "get_order", "arguments": {{"order_id": "{order}"}}}}<|im_end|>')
        rows.append(TrainingRow(role="agent", group="grammar", prompt_ids=prompt, completion_ids=completion,
                                logprobs=[0.0] * len(completion), env_mask=[1] * len(completion),
                                grammar=call_grammar(TOOLS), reward=reward))  # fmt: skip
    for answer, reward in (("Blue.", 1.0), ("I would rather pick a number, seven.", 0.0)):
        prompt = tokenizer.encode("<|im_start|>user\nPick a colour.<|im_end|>\n<|im_start|>assistant\n")
        completion = tokenizer.encode(f"{answer}<|im_end|>")
        rows.append(TrainingRow(role="agent", group="text", prompt_ids=prompt, completion_ids=completion,
                                logprobs=[0.0] * len(completion), env_mask=[1] * len(completion),
                                reward=reward))  # fmt: skip
    return with_advantages(rows, scale="group")


class SavingSync:
    """The recipient of each push: writes the pushed model's whole state to disk."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.version = 0

    def push(self, model: Any) -> int:
        import torch

        self.version += 1
        weights = {name: value.detach().clone() for name, value in model.state_dict().items()}
        torch.save(weights, self.out / f"pushed-{self.version}.pt")
        return self.version


def main(out: Path, sharding: str) -> None:
    from transformers import set_seed

    from engine.local_models import default_gguf
    from trainers.checkpoint import load_policy
    from trainers.config import UpdateConfig
    from trainers.distributed import BroadcastRowFeed, Ranks
    from trainers.grpo import Learner, RowFeed, UpdateSettings, grpo_trainer

    ranks = Ranks.from_env()
    set_seed(0)
    model, tokenizer = load_policy(default_gguf())
    knobs = UpdateConfig(learning_rate=1e-4, importance_sampling="off", sharding=sharding)  # type: ignore[arg-type]
    settings = UpdateSettings(knobs, 4, wait_seconds=300)
    feed = BroadcastRowFeed(ranks, settings.wait_seconds) if ranks.world > 1 else RowFeed(settings.wait_seconds)
    trainer = grpo_trainer(model, tokenizer, feed, settings, out / "trainer", updates=2, processes=ranks.world)
    if not ranks.leader:
        trainer.train()
        write_peak(out, ranks.rank)
        return
    sync = SavingSync(out)
    sync.push(model)  # pushed-1: the weights before any update
    learner = Learner(trainer, feed, sync, {"agent": 4})
    rows = fixed_rows(tokenizer)
    learner.update(rows)
    learner.update(list(reversed(rows)))
    learner.close()
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    logged = [{key: entry[key] for key in ("loss", "grad_norm")} for entry in steps]
    (out / "log.json").write_text(json.dumps({"steps": logged, "held": held_share(trainer.model)}))
    write_peak(out, ranks.rank)


def write_peak(out: Path, rank: int) -> None:
    """This process's peak resident memory (`OUT/peak-<rank>.json`, bytes): what sharding is for."""
    import resource

    (out / f"peak-{rank}.json").write_text(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))


def held_share(model: Any) -> float:
    """The share of the policy's weights this process holds (1.0 unsharded)."""
    from torch.distributed.tensor import DTensor

    parameters = list(model.parameters())
    local = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in parameters)
    return local / sum(p.numel() for p in parameters)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
