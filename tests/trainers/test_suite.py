"""The task suites: the same tasks for the same version, held-out seeds that training never draws, and the
reference-lite view of a world (its own tools only, compact, unshown tools refused)."""

from __future__ import annotations

import random

import anyio
import pytest

from toolworlds.core import ToolCall
from toolworlds.registry import builtin_worlds, load_world
from trainers.suite import HELD_OUT_FIRST_SEED, SUITES, HeldOutSeedError, check_not_held_out, compact_tool

LITE = SUITES["reference-lite"]


def plan_calls(world: str, seed: int) -> list[str]:
    instance = load_world(world)()
    instance.reset(seed)
    return [action.name for action in instance.solution() if isinstance(action, ToolCall)]


@pytest.mark.parametrize("world", sorted(builtin_worlds()))
def test_the_lite_suite_is_fixed_short_and_held_out(world: str) -> None:
    seeds = LITE.held_out_seeds(world, 30)
    assert seeds == LITE.held_out_seeds(world, 30) and len(set(seeds)) == 30
    assert seeds == sorted(seeds) and seeds[0] >= HELD_OUT_FIRST_SEED
    assert LITE.held_out_seeds(world, 10) == seeds[:10], "a longer suite extends a shorter one"
    shown = set(LITE.shown_tools(world))
    for seed in seeds:
        calls = plan_calls(world, seed)
        assert 1 <= len(calls) <= 3 and set(calls) <= shown
    assert len(shown) < len(load_world(world).tools())
    full = SUITES["reference"]
    assert full.held_out_seeds(world, 5) == list(range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + 5))


def test_training_seeds_are_below_the_held_out_range_and_in_the_suite() -> None:
    rng = random.Random(7)
    for world in sorted(builtin_worlds()):
        for _ in range(20):
            seed = LITE.training_seed(world, rng)
            assert seed < HELD_OUT_FIRST_SEED and LITE.admits(world, seed)


def test_a_held_out_reference_episode_is_refused_for_training() -> None:
    check_not_held_out("banking", HELD_OUT_FIRST_SEED - 1)
    check_not_held_out("library", HELD_OUT_FIRST_SEED + 5)  # a designed world: its seeds are its own
    with pytest.raises(HeldOutSeedError, match="banking/10000000 is on a held-out seed"):
        check_not_held_out("banking", HELD_OUT_FIRST_SEED)


def test_compact_tools_keep_names_types_and_enums_only() -> None:
    properties = {"ticket_id": {"type": "string", "description": "e.g. T-1001", "pattern": "^T"},
                  "status": {"enum": ["open", "closed"], "type": "string"},
                  "note": {"anyOf": [{"type": "string", "maxLength": 9}, {"type": "null"}]}}  # fmt: skip
    parameters = {"type": "object", "additionalProperties": False, "required": ["ticket_id", "status"],
                  "properties": properties}  # fmt: skip
    description = "Move a ticket on. Closed is final."
    spec = {"type": "function", "function": {"name": "change_status", "description": description,
                                             "parameters": parameters}}  # fmt: skip
    assert compact_tool(spec) == {"type": "function", "function": {
        "name": "change_status", "description": "Move a ticket on",
        "parameters": {"type": "object", "required": ["ticket_id", "status"], "properties": {
            "ticket_id": {"type": "string"}, "status": {"type": "string", "enum": ["open", "closed"]},
            "note": {"type": "string"}}}}}  # fmt: skip


def test_a_focused_episode_shows_the_suites_tools_and_refuses_the_others() -> None:
    async def play() -> None:
        world = LITE.world("ticketing")
        assert world.description == load_world("ticketing").description.splitlines()[0]
        shown = [entry["function"]["name"] for entry in world.openai_tools()]
        assert shown == list(LITE.shown_tools("ticketing")) == [tool.name for tool in world.tools()]
        env = await world.open()
        seed = LITE.held_out_seeds("ticketing", 1)[0]
        await env.reset(seed)
        refused = await env.step(ToolCall(name="assign_ticket", arguments={"ticket_id": "T-1001", "agent_id": "AG-1"}))
        assert "assign_ticket" not in shown and "assign_ticket" in load_world("ticketing").tool_specs
        assert refused.info["error"] == "unknown_tool" and not refused.done
        assert (await env.grade()).score < 1.0
        await env.close()

    anyio.run(play)
