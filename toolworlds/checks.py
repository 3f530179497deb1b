"""Does a world keep the contract? The checks every world must pass, runnable on any world.

`spadework toolworld check NAME` runs them on a world you wrote; the designer's validation gate runs the
same checks on model-written worlds. Each check looks at many seeds and reports the first seed that
fails, so a broken world is one command away from a reproducible transcript.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolworlds.core import Finish, ToolCall, ToolWorld
from toolworlds.play import Transcript, play
from toolworlds.policies import OraclePolicy

MAX_OBSERVATION_BYTES = 32_000


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str


WorldClass = type[ToolWorld[Any]]


@dataclass(frozen=True)
class Evidence:
    """What the checks look at: the world, the seeds, and one oracle play per seed."""

    world: WorldClass
    seeds: list[int]
    oracle: dict[int, Transcript]


def check_world(world: WorldClass, seeds: Iterable[int] = range(50)) -> list[CheckResult]:
    """Run every check over `seeds`; a check that crashes fails with the exception as its detail."""
    chosen = list(seeds)
    try:
        evidence = Evidence(world, chosen, {seed: play(world(), seed, OraclePolicy()) for seed in chosen})
    except Exception as error:
        return [CheckResult("plays at all", False, f"the reference plan crashed: {error!r}")]
    results = []
    for name, check in CHECKS:
        try:
            passed, detail = check(evidence)
        except Exception as error:
            passed, detail = False, f"crashed: {error!r}"
        results.append(CheckResult(name, passed, detail))
    return results


def _schemas(evidence: Evidence) -> tuple[bool, str]:
    world = evidence.world
    for spec in world.tools():
        for kind, schema in (("input", spec.input_schema), ("output", spec.output_schema)):
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as error:
                return False, f"{spec.name} {kind} schema: {error.message}"
    return bool(world.tools()), f"{len(world.tools())} tools, all schemas valid draft 2020-12"


def _deterministic(evidence: Evidence) -> tuple[bool, str]:
    for seed, first in evidence.oracle.items():
        if play(evidence.world(), seed, OraclePolicy()).model_dump() != first.model_dump():
            return False, f"seed {seed}: two plays of the same seed differ"
    return True, f"same task and transcript twice for {len(evidence.seeds)} seeds"


def _oracle_solves(evidence: Evidence) -> tuple[bool, str]:
    for seed, transcript in evidence.oracle.items():
        refused = [turn for turn in transcript.turns if "error" in turn.result.info]
        if refused:
            return False, f"seed {seed}: the reference plan was refused: {refused[0].result.observation}"
        if transcript.score != 1.0:
            return False, f"seed {seed}: the reference plan scores {transcript.score}"
    return True, f"the reference plan scores 1.0 on all {len(evidence.seeds)} seeds"


def _doing_nothing_fails(evidence: Evidence) -> tuple[bool, str]:
    scores, seeds = [], evidence.seeds
    for seed in seeds:
        idle = evidence.world()
        idle.reset(seed)
        scores.append(idle.step(Finish()).reward)
    solved = [seed for seed, score in zip(seeds, scores, strict=True) if score >= 1.0]
    if solved:
        return False, f"seed {solved[0]}: finishing at once already scores 1.0"
    return True, f"finishing at once scores {sum(scores) / len(scores):.3f} on average"


def _observations_are_bounded_json(evidence: Evidence) -> tuple[bool, str]:
    largest = 0
    for seed, transcript in evidence.oracle.items():
        for turn in transcript.turns:
            size = len(json.dumps(turn.result.observation))
            if size > MAX_OBSERVATION_BYTES:
                return False, f"seed {seed}: an observation of {size} bytes (limit {MAX_OBSERVATION_BYTES})"
            largest = max(largest, size)
    return True, f"largest observation {largest} bytes"


def _hint_does_not_leak(evidence: Evidence) -> tuple[bool, str]:
    for seed in evidence.seeds:
        instance = evidence.world()
        task = instance.reset(seed)
        if not task.hint.strip() or task.hint.strip() == task.instruction.strip():
            return False, f"seed {seed}: the hint is empty or repeats the instruction"
        for value in _typed_values(instance.solution()):
            if _mentions(task.hint, value) and not _mentions(task.instruction, value):
                return False, f"seed {seed}: the hint contains {value!r}, which the reference plan types"
    return True, "no hint contains an id, amount or answer from its reference plan"


def _typed_values(plan: list[ToolCall | Finish]) -> list[str]:
    """The ids, amounts and answers a plan types: what a hint must not give away."""
    values: list[Any] = []
    for action in plan:
        values += action.arguments.values() if isinstance(action, ToolCall) else [action.answer]
    plain = [v for v in values if isinstance(v, str | int | float) and not isinstance(v, bool)]
    return [str(v) for v in plain if len(str(v)) >= 2]


def _mentions(text: str, value: str) -> bool:
    """`value` stands in `text` as a whole token ("B1" is in "borrow B1." but not in "B12")."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, flags=re.IGNORECASE) is not None


CHECKS: list[tuple[str, Callable[[Evidence], tuple[bool, str]]]] = [
    ("tool schemas", _schemas),
    ("deterministic per seed", _deterministic),
    ("reference plan scores 1.0", _oracle_solves),
    ("doing nothing does not", _doing_nothing_fails),
    ("observations are bounded JSON", _observations_are_bounded_json),
    ("hint helps without the answer", _hint_does_not_leak),
]
