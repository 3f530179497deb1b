"""All the gates in order, failing closed: extract, repair, policy, sandbox load, sandbox smoke test, meaning.

A model-written spec (`toolworlds.spec`) has gates of its own, `SPEC_GATES`: parse (JSON, the schema and
the rules between parts), compile (trusted code builds the world and runs the reference plan) and the same
smoke test, in this process: nothing the model wrote is code, so nothing needs the sandbox.

The smoke test is the same contract check a hand-written world passes (`toolworlds.checks`), played
through the sandbox: schemas valid, deterministic per seed, every tool callable, the reference plan
scores 1.0, doing nothing does not, observations bounded JSON, a hint that helps without the answer.
A rejected world keeps the gate and the reason; whether the code would have passed without the repair
pass is measured too, because that is what tells whether repairing is worth it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from toolworlds.checks import (
    CheckResult,
    WorldClass,
    answer_leak_rate,
    check_episodes,
    task_meaning,
)
from toolworlds.episode import LocalWorld, World
from toolworlds.sandbox import SandboxError, SandboxPool, SandboxSettings, WorldInfo
from toolworlds.sandbox.described import SandboxWorld
from toolworlds.spec import SpecError, parse_spec
from toolworlds.spec_compile import compile_spec
from toolworlds.untrusted.extract import ExtractionError, extract_source
from toolworlds.untrusted.policy import check_policy
from toolworlds.untrusted.repair import repair

GATES = ("extract", "repair", "policy", "load", "smoke", "meaning")
SPEC_GATES = ("parse", "compile", "smoke", "meaning")
DEFAULT_SEEDS = range(8)


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool
    detail: str


@dataclass
class Verdict:
    """How far a model-written world got, and why it stopped."""

    gates: list[Gate] = field(default_factory=list)
    expected: tuple[str, ...] = GATES  # the gates a valid world passes
    source: str | None = None  # the code (or spec) the later gates judged: extracted, then repaired
    fixes: list[str] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    world: WorldInfo | None = None  # loaded in the pool while the world is valid (a spec world: id -1, unloaded)
    local: WorldClass | None = None  # a valid spec's compiled world, which runs in this process
    valid_without_repair: bool = False
    answer_leak: float | None = None  # share of seeds whose task text holds the reference answer

    @property
    def valid(self) -> bool:
        return len(self.gates) == len(self.expected) and all(gate.passed for gate in self.gates)

    @property
    def rejection(self) -> str | None:
        """`gate: reason` of the first gate that failed; None for a valid world."""
        failed = next((gate for gate in self.gates if not gate.passed), None)
        return f"{failed.name}: {failed.detail}" if failed else None

    def summary(self) -> dict[str, Any]:
        """The verdict as JSON: what `spadework toolworld validate --json` prints and metrics record."""
        return {
            "valid": self.valid,
            "valid_without_repair": self.valid_without_repair,
            "rejection": self.rejection,
            "world": self.world.name if self.world else None,
            "answer_leak": self.answer_leak,
            "fixes": self.fixes,
            "gates": [{"gate": g.name, "passed": g.passed, "detail": g.detail} for g in self.gates],
            "checks": [{"check": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks],
        }


async def validate(
    text: str, pool: SandboxPool, *, seeds: Sequence[int] = DEFAULT_SEEDS, filename: str = "<world>"
) -> Verdict:
    """Run `text` (a model's reply, or bare code) through every gate; the world stays loaded if valid."""
    verdict = Verdict()
    try:
        extracted = extract_source(text)
    except ExtractionError as error:
        verdict.gates.append(Gate("extract", False, str(error)))
        return verdict
    verdict.gates.append(Gate("extract", True, f"{len(extracted.splitlines())} lines"))
    repaired = repair(extracted)
    verdict.source, verdict.fixes = repaired.source, repaired.fixes
    verdict.gates.append(Gate("repair", True, "; ".join(repaired.fixes) or "nothing to repair"))
    await _judge(verdict, repaired.source, pool, seeds, filename)
    if verdict.valid and repaired.fixes:
        verdict.valid_without_repair = (await _judge(Verdict(), extracted, pool, seeds, filename, keep=False)).valid
    else:
        verdict.valid_without_repair = verdict.valid
    return verdict


async def _judge(
    verdict: Verdict, source: str, pool: SandboxPool, seeds: Sequence[int], filename: str, keep: bool = True
) -> Verdict:
    """Gates 3 to 5 on `source`, appended to `verdict`."""
    violations = check_policy(source, filename)
    if violations:
        verdict.gates.append(Gate("policy", False, _first_few(violations)))
        return verdict
    verdict.gates.append(Gate("policy", True, "allowed imports and names only"))
    try:
        world = await pool.load(source, filename)
    except SandboxError as error:
        verdict.gates.append(Gate("load", False, str(error)))
        return verdict
    verdict.gates.append(Gate("load", True, f"{world.name}: {len(world.tools)} tools"))
    await _smoke(verdict, SandboxWorld(pool, world), seeds)
    if verdict.valid and keep:
        verdict.world = world
    else:
        await pool.unload(world)
    return verdict


async def validate_spec(text: str, *, seeds: Sequence[int] = DEFAULT_SEEDS) -> Verdict:
    """Run `text` (a model's reply: one JSON spec, bare or in a fenced block) through the spec gates."""
    verdict = Verdict(expected=SPEC_GATES)
    source = _fenced_json(text)
    verdict.source = source
    try:
        spec = parse_spec(source)
    except SpecError as error:
        verdict.gates.append(Gate("parse", False, _first_few(error.problems)))
        return verdict
    verdict.gates.append(Gate("parse", True, f"{len(spec.tables)} tables, {len(spec.tools)} tools"))
    try:
        world = compile_spec(spec)
    except SpecError as error:
        verdict.gates.append(Gate("compile", False, _first_few(error.problems)))
        return verdict
    verdict.gates.append(Gate("compile", True, f"{len(spec.task.plan)} planned calls"))
    if not await _smoke(verdict, LocalWorld(world), seeds):
        return verdict
    verdict.valid_without_repair = True  # nothing is repaired in a spec
    verdict.local = world
    tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in world.tools()]
    verdict.world = WorldInfo(id=-1, name=world.name, class_name=world.__name__, description=world.description,
                              max_steps=world.max_steps, tools=tools)  # fmt: skip
    return verdict


def _fenced_json(text: str) -> str:
    """The spec in a reply: the reply itself, or the body of its first fenced block."""
    stripped = text.strip()
    if stripped.startswith("```"):
        body = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        return body.rsplit("```", 1)[0].strip()
    return stripped


async def _smoke(verdict: Verdict, world: World, seeds: Sequence[int]) -> bool:
    """The contract checks (`toolworlds.checks`), then whether the task means something (`task_meaning`): the
    last two gates, appended to `verdict`; whether both passed."""
    verdict.checks, evidence = await check_episodes(world, list(seeds))
    verdict.answer_leak = answer_leak_rate(evidence) if evidence else None
    failed = [check for check in verdict.checks if not check.passed]
    if failed or evidence is None:
        verdict.gates.append(Gate("smoke", False, f"{failed[0].name}: {failed[0].detail}"))
        return False
    verdict.gates.append(Gate("smoke", True, f"{len(verdict.checks)} checks over {len(seeds)} seeds"))
    meaning, detail = task_meaning(evidence)
    verdict.gates.append(Gate("meaning", meaning, detail))
    return meaning


def _first_few(problems: Sequence[object], shown: int = 3) -> str:
    """The first problems in one line, and how many more there are."""
    more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
    return "; ".join(str(problem) for problem in problems[:shown]) + more


def run_validation(text: str, seeds: Sequence[int] = DEFAULT_SEEDS, filename: str = "<world>") -> Verdict:
    """`validate` with a pool of its own, from synchronous code (the CLI)."""

    async def validated() -> Verdict:
        async with SandboxPool(SandboxSettings(zygotes=1)) as pool:
            return await validate(text, pool, seeds=seeds, filename=filename)

    return anyio.run(validated)
