"""The TRL adapter against the real library: tool schemas as transformers reads them from the generated methods,
an episode driven through the methods, and TRL's own `GRPOTrainer` training a step on the embedded model with
`environment_factory` (one world, and the dict form mixing two worlds with different tools)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from transformers.utils import get_json_schema

from tests.policy import embedded_policy, trainable  # noqa: F401  # the session's policy fixture
from toolworlds.adapters.trl import ToolworldEnvironment, task_rows, trl_environment, trl_environments
from toolworlds.core import named_call
from toolworlds.episode import LocalWorld
from toolworlds.examples import EXAMPLE_SPEC, EXAMPLE_WORLD
from toolworlds.registry import load_world


def _tools(environment: type[ToolworldEnvironment]) -> dict[str, dict[str, Any]]:
    """The schemas TRL renders into the prompt: transformers' own reading of each public method."""
    instance = environment()
    return {
        name: get_json_schema(getattr(instance, name))["function"]
        for name, _ in inspect.getmembers(environment, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


@pytest.mark.parametrize("world", ["banking", "ticketing", "orders"])
def test_every_tool_reaches_trl_with_its_arguments_types_and_enums(world: str) -> None:
    tools = _tools(trl_environment(world))
    offered = {entry["function"]["name"]: entry["function"] for entry in LocalWorld(load_world(world)).openai_tools()}
    assert set(tools) == {*offered, "finish"}
    for name, original in offered.items():
        read = tools[name]["parameters"]
        wanted = original["parameters"]
        assert set(read["properties"]) == set(wanted.get("properties", {})), name
        assert set(read.get("required", [])) == set(wanted.get("required", [])), name
        for argument, schema in wanted.get("properties", {}).items():
            if "enum" in schema:
                assert read["properties"][argument]["enum"] == schema["enum"], (name, argument)
            if schema.get("type") in ("string", "integer", "number", "boolean"):
                assert read["properties"][argument]["type"] == schema["type"], (name, argument)
            if "maxLength" in schema:
                assert f"maxLength {schema['maxLength']}" in read["properties"][argument]["description"]


def test_an_episode_through_the_methods_scores_as_the_world_grades_it(tmp_path: Path) -> None:
    spec = tmp_path / "library.json"
    spec.write_text(EXAMPLE_SPEC)
    written = tmp_path / "written.py"
    written.write_text(EXAMPLE_WORLD)
    for world in ("banking", str(spec), str(written)):  # a reference world, a spec, a model-written file
        environment = trl_environment(world)()
        instruction = environment.reset(seed=1, prompt=[{"role": "user", "content": ""}])
        assert instruction
        world_class = LocalWorld(load_world(world if world != str(written) else f"{written}:LibraryWorld"))
        solution = _solution(world_class, 1)
        assert environment.get_reward() < 1.0  # nothing done yet
        for name, arguments in solution:
            observation = getattr(environment, name)(**arguments)
            json.loads(observation)
        assert environment.get_reward() == 1.0, world
        assert "episode_over" in environment.finish()  # the episode has ended


@pytest.mark.parametrize("world", ["tau2-retail", "tau2-telecom"])  # airline: the same code, a 7 MB database
def test_the_tau2_worlds_reach_trl_and_their_reference_scores_one(world: str) -> None:
    """The plugin worlds' official schemas become methods transformers reads (telecom: the carrier's and the
    phone's tools), and a reference played through them is graded 1.0."""
    environment_class = trl_environment(world)
    offered = {entry["function"]["name"] for entry in LocalWorld(load_world(world)).openai_tools()}
    assert set(_tools(environment_class)) == {*offered, "finish"}
    environment = environment_class()
    environment.reset(seed=1)
    assert environment.get_reward() < 1.0
    for name, arguments in _solution(LocalWorld(load_world(world)), 1):
        getattr(environment, name)(**arguments)
    assert environment.get_reward() == 1.0


def _solution(world: LocalWorld, seed: int) -> list[tuple[str, dict[str, Any]]]:
    instance = world.world_class()
    instance.reset(seed)
    return [named_call(action) for action in instance.solution()]


def test_the_hint_is_given_only_when_asked() -> None:
    plain = trl_environment("banking")().reset(seed=2)
    hinted = trl_environment("banking", hinted=True)().reset(seed=2)
    assert "Hint:" not in plain and hinted.startswith(plain) and "\n\nHint: " in hinted


@pytest.mark.parametrize("form", ["one world", "two worlds"])
def test_trls_own_grpo_trainer_trains_with_the_environments(
    form: str,
    tmp_path: Path,
    embedded_policy: tuple[Any, Any],  # noqa: F811
) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    model, tokenizer = trainable(embedded_policy)
    # SmolLM2 speaks ChatML; TRL parses tool calls only from chat templates it knows, so the tokenizer gets
    # TRL's Qwen2.5 template (ChatML with tools), which SmolLM2's special tokens render.
    tokenizer.chat_template = qwen2_5_chat_template
    # the library's prompt (its tools and a task) is 403 tokens in this template, banking's 2,001: TRL's step costs
    # what its prompts are long (190 s with banking here), so the dict form mixes two short worlds: the library,
    # and the library's spec under another name (another world to TRL, with a class of its own)
    library = "toolworlds.examples.library:LibraryWorld"
    if form == "one world":
        factory: Any = trl_environment(library)
        rows = task_rows(library, range(4))
    else:
        shelf = tmp_path / "shelf.json"
        shelf.write_text(json.dumps({**json.loads(EXAMPLE_SPEC), "name": "shelf"}))
        factory = trl_environments([library, str(shelf)])
        rows = task_rows(library, range(2), environment=True) + task_rows(str(shelf), range(2), environment=True)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, max_steps=1,
                      max_completion_length=24, max_tool_calling_iterations=1, learning_rate=1e-5,
                      use_cpu=True, report_to=[], logging_steps=1, save_strategy="no", temperature=1.0)  # fmt: skip
    trainer = GRPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          environment_factory=factory)  # fmt: skip
    trainer.train()
    logged = {key for entry in trainer.state.log_history for key in entry}
    names = ["LibraryEnvironment"] if form == "one world" else ["LibraryEnvironment", "ShelfEnvironment"]
    for name in names:
        assert f"rewards/{name}/mean" in logged, sorted(logged)
    assert trainer.state.global_step == 1
