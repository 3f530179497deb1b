"""Data-parallel row feeding: two real processes joined by torch.distributed (gloo), as `torchrun` starts them."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from types import SimpleNamespace

from trainers.distributed import BroadcastRowFeed, Ranks
from trainers.grpo import SaveWhenAsked, TrainingStopped
from trainers.rows import TrainingRow

WORLD = 2


def row(index: int) -> TrainingRow:
    return TrainingRow(role="agent", group=f"g{index // 2}", prompt_ids=[index], completion_ids=[index, 0],
                       logprobs=[-1.0, None], env_mask=[1, 0], reward=1.0, advantage=float(index))  # fmt: skip


def play_rank(rank: int, init_file: str, out: str) -> None:
    """One process: rank 0 puts a step's rows and asks for a checkpoint, then stops; every rank reads."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    saver = SaveWhenAsked()
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[saver]))
    feed = BroadcastRowFeed(Ranks(rank, WORLD), wait_seconds=60)
    if rank == 0:
        saver.asked.set()
        feed.put([row(i) for i in range(4)])
        feed.stop()
    first = feed(["prompt", "prompt"], trainer)  # TRL asks each process for its own share
    asked = saver.asked.is_set()
    try:
        feed(["prompt", "prompt"], trainer)
        stopped = False
    except TrainingStopped:
        stopped = True
    dist.destroy_process_group()
    result = {"prompts": first["prompt_ids"], "rewards": first["env_reward"], "asked": asked, "stopped": stopped}
    Path(out, f"{rank}.json").write_text(json.dumps(result))


def test_each_process_gets_its_slice_and_the_first_ones_orders(tmp_path: Path) -> None:
    spawn = multiprocessing.get_context("spawn")
    processes = [
        spawn.Process(target=play_rank, args=(rank, str(tmp_path / "rendezvous"), str(tmp_path)))
        for rank in range(WORLD)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    results = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(WORLD)]
    assert [r["prompts"] for r in results] == [[[0], [1]], [[2], [3]]]  # disjoint slices, in order
    assert [r["rewards"] for r in results] == [[0.0, 1.0], [2.0, 3.0]]
    assert all(r["asked"] for r in results), "the checkpoint request reaches every process"
    assert all(r["stopped"] for r in results), "the stop reaches every process"
