"""FSDP2 across the training processes: each holds a shard of the weights, gradients and optimizer state.

accelerate (through the trainer's `fsdp_config`) wraps each decoder layer and the model with torch's
`fully_shard` when the trainer starts; a step gathers a layer's weights for its forward and backward and
reduce-scatters its gradients. Two seams are spadework's:

- the weight sync needs the whole policy after every update, and only the first process pushes. Gathering
  is a collective, so `GatherForPush` runs it on every process at the end of each batch's last optimiser
  step (a point every process reaches); the first keeps the result in a whole copy of the policy, which the
  sync pushes (`Learner.update`). That copy costs the first process one model's weights;
- accelerate only shards on accelerators: on CPU it takes every multi-process run for plain data parallel
  (`MULTI_CPU`) and drops the FSDP plugin. `shard_on_cpu` marks its state FSDP, which is all its FSDP2 path
  needs (torch's `fully_shard` runs on CPU over gloo), so the tests here run the path GPU users run.
"""

from __future__ import annotations

import copy
from typing import Any

from trainers.callbacks import Callback

FSDP_CONFIG: dict[str, Any] = {
    "version": 2,
    "reshard_after_forward": True,  # a layer's gathered weights are freed after its forward (ZeRO-3's memory)
    "state_dict_type": "FULL_STATE_DICT",  # checkpoints hold whole weights: any process count can resume them
}


class GatherForPush(Callback):
    """A transformers callback: after each batch's last optimiser step, every process joins in gathering the
    sharded policy's full weights; the first process loads them into `policy`, its whole copy for the sync."""

    def __init__(self, policy: Any | None, steps_per_batch: int = 1) -> None:
        self.policy = policy  # None on the other processes: they only take part in the gather
        self.steps_per_batch = steps_per_batch

    @classmethod
    def for_trainer(cls, trainer: Any, steps_per_batch: int) -> GatherForPush:
        """Copy the still whole model on the first process (the trainer shards it when training starts)."""
        policy = copy.deepcopy(trainer.model).eval() if trainer.accelerator.is_main_process else None
        return cls(policy, steps_per_batch)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> Any:
        if state.global_step % self.steps_per_batch == 0:
            self.gather(model)
        return control

    def gather(self, model: Any) -> None:
        """Collective: every process must call it at the same point."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)  # whole tensors on the first process only
        weights = get_model_state_dict(model, options=options)
        if self.policy is not None:
            self.policy.load_state_dict(weights)


def shard_on_cpu(trainer: Any) -> None:
    """Mark a CPU trainer's accelerate state FSDP with the plugin its `fsdp_config` describes, before it trains."""
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = trainer.accelerator.state
    if state.distributed_type not in (DistributedType.MULTI_CPU, DistributedType.NO):
        raise RuntimeError(f"shard_on_cpu expects accelerate's CPU state, found {state.distributed_type}")
    plugin = FullyShardedDataParallelPlugin(**trainer.args.fsdp_plugin_args)
    state.distributed_type = DistributedType.FSDP
    state.fsdp_plugin = plugin
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    trainer.is_fsdp_enabled = True
    if not trainer.accelerator.is_fsdp2:
        raise RuntimeError("accelerate did not take the FSDP2 plugin: sharding on CPU needs accelerate 1.16")


def policy_for_push(trainer: Any) -> Any:
    """The model a weight sync reads: the gathered whole copy when the policy is sharded, else the trainer's own."""
    gather = next((c for c in trainer.callback_handler.callbacks if isinstance(c, GatherForPush)), None)
    return gather.policy if gather is not None else trainer.model
