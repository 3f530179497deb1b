"""Data-parallel training over several processes (`accelerate launch` or `torchrun`): one plays, all learn.

Only the first process (rank 0) runs the self-play loop: the servers, the sandbox, the designer, the plays,
the journals and the weight sync. Every other process runs `follow`: the same model and TRL trainer,
fed by `BroadcastRowFeed`, which hands each process its slice of the rows rank 0 collected. TRL and
accelerate do the rest (gradients all-reduced, checkpoints written once with one RNG state per process).
The weights stay whole on every process (plain data parallelism), so rank 0 pushes them alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from trainers.grpo import RowFeed, SaveWhenAsked
from trainers.rows import TrainingRow


@dataclass(frozen=True)
class Ranks:
    """This process's place among the training processes (from the launcher's environment)."""

    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls) -> Ranks:
        return cls(rank=int(os.environ.get("RANK", "0")), world=int(os.environ.get("WORLD_SIZE", "1")))

    @property
    def leader(self) -> bool:
        return self.rank == 0


class BroadcastRowFeed(RowFeed):
    """`RowFeed` across processes: rank 0 takes the whole step's rows from its queue and broadcasts them
    (with whether to checkpoint after the step); each process returns its own slice.

    TRL calls the `rollout_func` on every process at the same point of each step, so the broadcast is a
    collective every process reaches. On rank 0 the self-play loop puts rows as with a plain `RowFeed`;
    the other processes never put anything.
    """

    def __init__(self, ranks: Ranks, wait_seconds: float = 3600.0) -> None:
        super().__init__(wait_seconds)
        self.ranks = ranks

    def _step_rows(self, share: int, trainer: Any) -> list[TrainingRow] | None:
        import torch.distributed as dist

        saver = next(c for c in trainer.callback_handler.callbacks if isinstance(c, SaveWhenAsked))
        payload: list[Any] = [None]
        if self.ranks.leader:
            rows = self._take(share * self.ranks.world)
            payload = [None if rows is None else (rows, saver.asked.is_set())]
        dist.broadcast_object_list(payload, src=0)
        if payload[0] is None:
            return None
        rows, checkpoint = payload[0]
        if checkpoint:
            saver.asked.set()
        mine: list[TrainingRow] = rows[self.ranks.rank * share : (self.ranks.rank + 1) * share]
        return mine
