"""tau2's domains as training worlds: listed, valid by the toolworld checks, graded with partial credit, and
drawn only from the release's `train` split, so training never meets the benchmark's `test` tasks."""

from __future__ import annotations

import pytest

from benchmarks.tau2.data import load_domain
from benchmarks.tau2.world import AirlineWorld, RetailWorld, Tau2World, TelecomWorld
from toolworlds.checks import check_world
from toolworlds.core import Finish, ToolCall, replay

WORLDS = (AirlineWorld, RetailWorld, TelecomWorld)


@pytest.mark.parametrize("world", WORLDS)
def test_the_worlds_draw_only_train_tasks(world: type[Tau2World]) -> None:
    data = load_domain(world.domain)
    ids = {task.id for task in world.tasks()}
    assert ids <= set(data.splits["train"]) and not ids & set(data.splits["test"])
    drawn = {world().reset(seed).variant for seed in range(12)}
    assert drawn <= ids and len(drawn) > 1


@pytest.mark.slow  # about a minute a world: the checks replay in another process and call every tool
@pytest.mark.parametrize("world", WORLDS)
def test_the_toolworld_checks_pass(world: type[Tau2World]) -> None:
    failed = [result for result in check_world(world, seeds=range(3)) if not result.passed]
    assert not failed, failed


def test_partial_credit_for_a_partial_resolution() -> None:
    world = RetailWorld()
    seed = next(seed for seed in range(50) if len(_writes(world, seed)) >= 1)
    task = world.reset(seed)
    plan = world.solution()
    assert replay(world, seed, plan)[-1].reward == 1.0
    reads_only = [step for step in plan if isinstance(step, ToolCall) and not world.toolkit.mutates(step.name)]
    partial = replay(world, seed, [*reads_only, Finish(answer="done")])[-1].reward
    assert partial == 0.0  # no write made: no goal met
    wrong = replay(world, seed, [ToolCall(name="get_user_details", arguments={"user_id": 5}), Finish()])
    assert "Error:" in str(wrong[0].observation) and wrong[-1].reward == 0.0
    assert task.hint.startswith("The reference resolution calls, in order:")
    assert not any(str(value) in task.hint for step in plan if isinstance(step, ToolCall)
                   for value in step.arguments.values())  # fmt: skip


def _writes(world: RetailWorld, seed: int) -> list[ToolCall]:
    world.reset(seed)
    return [step for step in world.solution() if isinstance(step, ToolCall) and world.toolkit.mutates(step.name)]


def test_telecom_is_solo_the_agent_works_the_phone_and_is_graded_on_the_end_state() -> None:
    world = TelecomWorld()
    seed = next(seed for seed in range(50) if len(_plan(world, seed)) >= 3 and world.task_data.ticket)
    task = world.reset(seed)
    assert task.instruction.startswith(str(world.task_data.ticket))
    plan = _plan(world, seed)
    assert replay(world, seed, [*plan, Finish()])[-1].reward == 1.0
    status = replay(world, seed, [ToolCall(name="check_status_bar", arguments={}), Finish()])
    assert "Status Bar" in str(status[0].observation)  # a phone tool answers from the phone
    half = replay(world, seed, [*plan[: len(plan) // 2], Finish()])[-1].reward
    assert 0.0 < half < 1.0  # the gold actions made count, the end state does not hold yet
    bare = [ToolCall(name=step.name, arguments={}) for step in plan if step.arguments]
    if bare:  # the benchmark's ACTION match pays an argument-less call; the world does not
        assert replay(world, seed, [*bare, Finish()])[-1].reward < 1.0


def test_telecom_pays_nothing_for_working_every_switch_on_the_phone() -> None:
    """Most phone fixes take no arguments, so a play that calls every argument-less phone tool would meet their
    goals: each state-changing call beyond the reference's halves the credit, so it scores below doing nothing."""
    world = TelecomWorld()
    phone = world.data().user_tools or []
    switches = [ToolCall(name=entry["function"]["name"], arguments={}) for entry in phone
                if world.data().fresh_env().mutates(entry["function"]["name"])
                and not entry["function"]["parameters"].get("required")]  # fmt: skip
    spam, nothing = [], []
    for seed in range(10):
        plan = _plan(world, seed)
        assert replay(world, seed, [*plan, Finish()])[-1].reward == 1.0
        extra = [ToolCall(name="toggle_wifi", arguments={})] * 2  # undone at once, but not the reference's
        assert replay(world, seed, [*extra, *plan, Finish()])[-1].reward == 0.25
        spam.append(replay(world, seed, [*switches, Finish()])[-1].reward)
        nothing.append(replay(world, seed, [Finish()])[-1].reward)
    assert len(switches) >= 10 and max(spam) < 0.05 and sum(spam) <= sum(nothing)


def _plan(world: Tau2World, seed: int) -> list[ToolCall]:
    world.reset(seed)
    return [step for step in world.solution() if isinstance(step, ToolCall)]
