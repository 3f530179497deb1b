from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen2_5_chat_template

from engine.local_models import default_gguf
from toolworlds.adapters.trl import task_rows, trl_environment
from trainers.checkpoint import load_policy

world = "toolworlds.examples.library:LibraryWorld"  # any world: "banking", a file.py:Class, a spec, a model's .py
model, tokenizer = load_policy(default_gguf())  # the embedded SmolLM2-135M; any causal LM will do
tokenizer.chat_template = qwen2_5_chat_template  # ChatML with tools, a template TRL reads tool calls from
args = GRPOConfig(output_dir="runs/trl-library", max_steps=1, per_device_train_batch_size=4, num_generations=2,
                  max_completion_length=32, max_tool_calling_iterations=2, logging_steps=1, use_cpu=True,
                  report_to=[])  # fmt: skip
trainer = GRPOTrainer(
    model=model,
    args=args,
    processing_class=tokenizer,
    environment_factory=trl_environment(world),  # the world's tools as methods, its grade as get_reward()
    train_dataset=Dataset.from_list(task_rows(world, seeds=range(8))),  # a row's seed is its task
)
trainer.train()
print(trainer.state.log_history[0]["rewards/LibraryEnvironment/mean"])  # the world's mean grade this step
