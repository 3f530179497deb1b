"""The Gymnasium adapter against the real library: `gymnasium.make("spadework/...")`, gymnasium's own
`check_env`, and the reference solution replayed through `step` for a reference world, a trusted Python file, a
spec file and a model-written file (which runs in the sandbox, never in this process)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import toolworlds.adapters.gym  # noqa: F401  # registers spadework/<name>
from toolworlds.adapters.gym import ToolworldEnv
from toolworlds.examples import EXAMPLE_SPEC, EXAMPLE_WORLD
from toolworlds.sandbox.described import SandboxWorld

EXAMPLES = Path(__file__).parents[2] / "toolworlds" / "examples"


@pytest.fixture(params=["reference", "python-file", "spec-file", "model-written"])
def made(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[gymnasium.Env[str, str]]:
    kind = request.param
    if kind == "reference":
        env = gymnasium.make("spadework/banking")
    else:
        world = {"python-file": lambda: f"{EXAMPLES / 'library.py'}:LibraryWorld",
                 "spec-file": lambda: _written(tmp_path / "library.json", EXAMPLE_SPEC),
                 "model-written": lambda: _written(tmp_path / "written.py", EXAMPLE_WORLD)}[kind]()  # fmt: skip
        env = gymnasium.make("spadework/world", world=world)
    yield env
    env.close()


def _written(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_gymnasiums_checker_passes_and_the_reference_solution_scores_one(made: gymnasium.Env[str, str]) -> None:
    check_env(made.unwrapped)
    observation, info = made.reset(seed=1)
    assert observation and made.observation_space.contains(observation)
    assert info["tools"][-1]["function"]["name"] == "finish" and info["seed"] == 1
    again, _ = made.reset(seed=1)
    assert again == observation  # a seed is a task
    env = made.unwrapped
    assert isinstance(env, ToolworldEnv)
    total, ended = 0.0, False
    for action in env.solution_actions():
        observation, reward, terminated, truncated, info = made.step(action)
        assert json.loads(observation) is not None and made.observation_space.contains(observation)
        total += float(reward)
        ended = terminated or truncated
        if ended:
            break
    assert ended and total == 1.0 and info["score"] == 1.0


def test_a_model_written_world_runs_in_the_sandbox(tmp_path: Path) -> None:
    path = tmp_path / "written.py"
    path.write_text(EXAMPLE_WORLD)
    env = gymnasium.make("spadework/world", world=str(path))
    try:
        assert isinstance(env.unwrapped._world.world, SandboxWorld)  # type: ignore[attr-defined]
        assert not any(str(path) in str(getattr(m, "__file__", "")) for m in __import__("sys").modules.values())
    finally:
        env.close()


def test_the_hint_is_shown_only_when_asked() -> None:
    plain = gymnasium.make("spadework/banking")
    hinted = gymnasium.make("spadework/banking", hinted=True)
    try:
        shown, _ = plain.reset(seed=2)
        with_hint, _ = hinted.reset(seed=2)
        assert "Hint:" not in shown and with_hint.startswith(shown) and "\n\nHint: " in with_hint
    finally:
        plain.close()
        hinted.close()


def test_unreadable_actions_are_told_and_count_until_the_episode_is_cut() -> None:
    env = gymnasium.make("spadework/banking")
    try:
        _, info = env.reset(seed=0)
        steps = 0
        while True:
            observation, reward, terminated, truncated, step_info = env.step("transfer 100 please")
            steps += 1
            assert json.loads(observation)["error"]["code"] == "malformed_action"
            if terminated or truncated:
                break
        assert truncated and not terminated and steps == info["max_steps"]
        assert reward == step_info["score"] == 0.0  # nothing done: the grade of the state reached
        with pytest.raises(ValueError, match="render_mode"):
            ToolworldEnv("banking", render_mode="human")
    finally:
        env.close()


@pytest.mark.parametrize("kind", ["reference", "model-written"])
def test_an_environment_never_closed_does_not_hang_the_exit(kind: str, tmp_path: Path) -> None:
    """Its world lives in a thread of its own (and a model-written one in a sandbox): both go with the process."""
    world = "banking" if kind == "reference" else _written(tmp_path / "written.py", EXAMPLE_WORLD)
    code = (
        "import gymnasium, toolworlds.adapters.gym\n"
        f"env = gymnasium.make('spadework/world', world={world!r})\n"
        "env.reset(seed=0)\nprint('played')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "played" in done.stdout, done.stderr[-2000:]
