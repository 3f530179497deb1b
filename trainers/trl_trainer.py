"""spadework's `GRPOTrainer`: TRL's, with what its `rollout_func` path does not do for rows a serving engine
sampled, in one subclass instead of attributes patched onto an instance.

- Each forward/backward pass reads only its own rows' tokens (`_prepare_inputs`): TRL pads a whole batch to
  its longest prompt (on the left) and longest completion (on the right), then cuts it into passes of
  `rows_per_pass` rows that keep that width. One designer row (a 1,000-token prompt and 768 sampled tokens)
  made every short agent row and every padding row of its update cost as much as itself: an update with a
  designer group took 102 s for 2,658 real tokens. A column that is padding in every row of a pass is masked
  out of attention and out of the loss, so cutting it leaves the loss and its gradient as they were.
- Grammar-sampled tokens are scored under the policy that sampled them (`_get_per_token_logps_and_entropies`,
  `trainers/constrained.py`).
- TRL's importance-sampling correction, which it applies only when it believes it generated with vLLM, is
  switched on: on this path that belief costs one `vllm_generation.sync_weights()` call per step, answered
  by a stand-in, since the `Learner` pushes weights itself.

The methods overridden are TRL 1.16's (pinned); their presence is checked when this module is imported.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from trl.trainer.grpo_trainer import GRPOTrainer

from trainers.constrained import GrammarRestrictions, causal_lm_of, check_plain_head, restricted_logps

for _method in ("_prepare_inputs", "_get_per_token_logps_and_entropies"):
    if not hasattr(GRPOTrainer, _method):
        raise ImportError(f"this TRL's GRPOTrainer has no {_method}: spadework's trainer needs TRL 1.16")

_PROMPT_KEYS = ("prompt_ids", "prompt_mask")


class SpadeworkGRPOTrainer(GRPOTrainer):
    """A `GRPOTrainer` fed engine rows: passes without padding columns, grammar-restricted logprobs (when
    `restrictions` is given) and the sampler correction (when `correct_for_sampler`)."""

    def __init__(self, *args: Any, restrictions: GrammarRestrictions | None = None, correct_for_sampler: bool = False,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.trim_padding = True
        self.restrictions = restrictions
        if restrictions is not None:
            check_plain_head(causal_lm_of(self.model))
        if correct_for_sampler:
            for attribute in ("use_vllm", "vllm_importance_sampling_correction"):
                if not hasattr(self, attribute):
                    raise RuntimeError(f"this TRL's GRPOTrainer has no {attribute}: the correction needs TRL 1.16")
            self.use_vllm = True
            self.vllm_generation = cast(Any, _WeightsPushedElsewhere())  # answers the one call TRL makes
            self._last_loaded_step = -1

    def _prepare_inputs(self, generation_batch: Any) -> Any:
        inputs = super()._prepare_inputs(generation_batch)
        return without_padding_columns(inputs) if self.trim_padding and self.model.training else inputs

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                           logits_to_keep: int, *args: Any, **kwargs: Any) -> Any:  # fmt: skip
        forward = super()._get_per_token_logps_and_entropies
        if self.restrictions is None:
            return forward(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        return restricted_logps(self.restrictions, self, forward, model, input_ids, attention_mask, logits_to_keep,
                                *args, **kwargs)  # fmt: skip


def without_padding_columns(inputs: dict[str, Any]) -> dict[str, Any]:
    """One pass's batch without the prompt columns no row uses (left) and the completion columns after every
    row's end (right); every per-completion-token tensor is cut like the completion. The rows' positions start
    at 0, as they did in the sampler."""
    prompt_used = inputs["prompt_mask"].bool().any(dim=0)
    completion_used = inputs["completion_mask"].bool().any(dim=0)
    width = inputs["completion_ids"].size(1)
    first = int(prompt_used.nonzero()[0]) if prompt_used.any() else prompt_used.numel()
    end = int(completion_used.nonzero()[-1]) + 1 if completion_used.any() else 1  # a pass keeps one column
    if first == 0 and end == width:
        return inputs
    cut = dict(inputs)
    for key in _PROMPT_KEYS:
        cut[key] = inputs[key][:, first:]
    for key, value in inputs.items():
        if key not in _PROMPT_KEYS and isinstance(value, torch.Tensor) and value.dim() >= 2 and value.size(1) == width:
            cut[key] = value[:, :end]
    return cut


class _WeightsPushedElsewhere:
    """Stands in for TRL's vLLM client: the `Learner` pushes weights itself after each update."""

    def sync_weights(self) -> None:
        return None
