"""Does a world keep the contract? The checks every world must pass, runnable on any world.

`spadework toolworld check NAME` runs them on a world you wrote; the designer's validation gate runs the
same checks on model-written worlds. Each check looks at many seeds and reports the first seed that
fails, so a broken world is one command away from a reproducible transcript.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolworlds.core import Finish, ToolCall, ToolWorld, WorldBugError
from toolworlds.episode import Episode, LocalWorld, World, tool_schemas
from toolworlds.play import Transcript, play_driven
from toolworlds.policies import ArgumentSampler, ScriptedPolicy

MAX_OBSERVATION_BYTES = 32_000
PROBES_PER_TOOL = 3
T = TypeVar("T")


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str


WorldClass = type[ToolWorld[Any]]


@dataclass(frozen=True)
class Evidence:
    """What the checks look at, gathered once: plays, replays, idle plays and tool probes, as data."""

    tools: list[dict[str, Any]]
    seeds: list[int]
    oracle: dict[int, Transcript]
    replay: dict[int, Transcript]
    idle: dict[int, float]
    crashes: dict[str, str] = field(default_factory=dict)  # tool -> how a schema-shaped call crashed it
    plans: dict[int, list[ToolCall | Finish]] = field(default_factory=dict)
    # The reference plays again in another interpreter with another hash seed (trusted worlds: a sandboxed
    # world's processes all hash with seed 0), where set and dict-of-set orders can differ.
    elsewhere: dict[int, Transcript] = field(default_factory=dict)
    description: str = ""


def check_world(world: WorldClass, seeds: Iterable[int] = range(50)) -> list[CheckResult]:
    """Run every check over `seeds` on a trusted world in this process, and its reference plays once more in
    another interpreter (determinism must hold across processes, whose hash seeds differ)."""
    chosen = list(seeds)

    async def checked() -> list[CheckResult]:
        return (await check_episodes(LocalWorld(world), chosen, lambda: replay_elsewhere(world, chosen)))[0]

    return anyio.run(checked)


def replay_elsewhere(world: WorldClass, seeds: list[int]) -> dict[int, Transcript]:
    """The reference plays of `seeds` in a fresh interpreter with a hash seed other than ours; {} for a world
    another interpreter cannot import by name (a spec, compiled here by spadework's own code from data)."""
    spec = _importable(world)
    if spec is None or not seeds:
        return {}
    ours = os.environ.get("PYTHONHASHSEED", "")
    theirs = "1" if ours == "2" else "2"  # any seed but ours: a random one, unless ours is fixed
    completed = subprocess.run(
        [sys.executable, "-m", "toolworlds.checks", spec, *map(str, seeds)], capture_output=True, text=True,
        timeout=600, env={**os.environ, "PYTHONHASHSEED": theirs},
    )  # fmt: skip
    if completed.returncode != 0:
        raise RuntimeError(f"replaying {spec} in another process failed: {completed.stderr.strip()[-500:]}")
    played = [Transcript.model_validate_json(line) for line in completed.stdout.splitlines()]
    return dict(zip(seeds, played, strict=True))


def _importable(world: WorldClass) -> str | None:
    """`module:Class`, or `file.py:Class` for a world loaded from a file, as `load_world` reads them."""
    module = sys.modules.get(world.__module__)
    if module is None or getattr(module, world.__qualname__, None) is not world:  # built at run time (a spec)
        return None
    if (
        module.__spec__ is not None
        and module.__spec__.name == world.__module__
        and not world.__module__.startswith("spadework_user_world_")
    ):
        return f"{world.__module__}:{world.__qualname__}"
    location = getattr(module, "__file__", None)
    return f"{location}:{world.__qualname__}" if location and location.endswith(".py") else None


def crash_site(error: BaseException) -> str:
    """The error and where the world's own code raised it (its innermost frame outside spadework's machinery)."""
    machinery = Path(__file__).parent
    worlds = (machinery / "reference", machinery / "examples")
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        path = Path(frame.filename)
        if not path.is_relative_to(machinery) or any(path.is_relative_to(folder) for folder in worlds):
            return f"{type(error).__name__}: {error} (in {frame.name}, {path.name} line {frame.lineno})"
    return f"{type(error).__name__}: {error}"


async def check_episodes(
    world: World, seeds: Sequence[int], elsewhere: Callable[[], dict[int, Transcript]] | None = None
) -> tuple[list[CheckResult], Evidence | None]:
    """Gather the evidence through `world`'s episodes (and `elsewhere`'s plays in another process), then judge
    it; a world that crashes while playing fails at once."""
    try:
        evidence = await gather(world, list(seeds))
        if elsewhere is not None:
            evidence = replace(evidence, elsewhere=elsewhere())
    except Exception as error:  # a world's own code may raise anything while it is played
        return [CheckResult("plays at all", False, f"the world crashed: {crash_site(error)}")], None
    return judge(evidence), evidence


def judge(evidence: Evidence) -> list[CheckResult]:
    """Every check on gathered evidence; a check that crashes fails with the exception as its detail."""
    results = []
    for name, check in CHECKS:
        try:
            passed, detail = check(evidence)
        except Exception as error:
            passed, detail = False, f"crashed: {error!r}"
        results.append(CheckResult(name, passed, detail))
    return results


async def gather(world: World, seeds: list[int]) -> Evidence:
    """Every play in an episode of its own, as real plays are (in the sandbox, a process of its own), and each
    reference plan asked of yet another episode (no agent asks a world for its solution): a world cannot tell
    the checks' plays from real ones by counting resets or by noticing it was asked for its plan."""
    plans, oracle = {}, {}
    for seed in seeds:
        plans[seed] = await reference_plan(world, seed)
        oracle[seed] = await play_plan(world, seed, plans[seed])
    replay = {seed: await play_plan(world, seed, await reference_plan(world, seed)) for seed in seeds}
    idle = {seed: (await play_plan(world, seed, [Finish()])).score for seed in seeds}
    crashes = await probe_tools(world, oracle[seeds[0]] if seeds else None)
    return Evidence(tool_schemas(world), seeds, oracle, replay, idle, crashes, plans, description=world.description)


async def in_fresh_episode(world: World, use: Callable[[Episode], Awaitable[T]]) -> T:
    episode = await world.open()
    try:
        return await use(episode)
    finally:
        await episode.close()


async def reference_plan(world: World, seed: int) -> list[ToolCall | Finish]:
    """The world's reference plan for `seed`, from an episode that plays nothing."""

    async def plan(episode: Episode) -> list[ToolCall | Finish]:
        await episode.reset(seed)
        return await episode.solution()

    return await in_fresh_episode(world, plan)


async def play_plan(world: World, seed: int, plan: list[ToolCall | Finish]) -> Transcript:
    """`plan` (then finish) played from `seed` in a fresh episode, until the episode ends."""
    return await in_fresh_episode(world, lambda episode: play_driven(episode, seed, ScriptedPolicy(plan), []))


async def probe_tools(world: World, seen: Transcript | None) -> dict[str, str]:
    """Call every tool with schema-shaped arguments (values taken from a reference play where possible), each
    call the first of a fresh episode.

    A refusal is fine, that is how a service says no; a crash is a bug the agent would hit.
    """
    sampler = ArgumentSampler(random.Random(0))
    if seen is not None:
        for turn in seen.turns:
            sampler.harvest(turn.result.observation)
            if isinstance(turn.action, ToolCall):
                sampler.harvest(dict(turn.action.arguments))
    crashes: dict[str, str] = {}
    for tool in tool_schemas(world):
        for attempt in range(PROBES_PER_TOOL):
            arguments = sampler.arguments(tool["input_schema"], optional_probability=0.5)
            try:
                await play_plan(world, attempt, [ToolCall(name=tool["name"], arguments=arguments)])
            except WorldBugError as error:
                if error.fatal:
                    raise  # the sandbox killed the process: no later call would tell us anything
                crashes[tool["name"]] = f"{json.dumps(arguments)[:200]}: {error}"
                break
    return crashes


def _schemas(evidence: Evidence) -> tuple[bool, str]:
    for tool in evidence.tools:
        for kind in ("input", "output"):
            try:
                Draft202012Validator.check_schema(tool[f"{kind}_schema"])
            except SchemaError as error:
                return False, f"{tool['name']} {kind} schema: {error.message}"
    return bool(evidence.tools), f"{len(evidence.tools)} tools, all schemas valid draft 2020-12"


def _deterministic(evidence: Evidence) -> tuple[bool, str]:
    for again, where in ((evidence.replay, "played twice"), (evidence.elsewhere, "played in another process")):
        for seed, other in again.items():
            difference = first_difference(evidence.oracle[seed].model_dump(mode="json"), other.model_dump(mode="json"))
            if difference is not None:
                return False, f"seed {seed} {where} differs at {difference}"
    across = " and in another process" if evidence.elsewhere else ""
    return True, f"same task and transcript twice{across} for {len(evidence.seeds)} seeds"


def first_difference(first: Any, second: Any, path: str = "") -> str | None:
    """Where two JSON values first differ (`turns[2].result.observation[0]: 'a' vs 'b'`), or None."""
    if isinstance(first, dict) and isinstance(second, dict):
        for key in [*first, *(key for key in second if key not in first)]:
            found = first_difference(first.get(key), second.get(key), f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        for index, (a, b) in enumerate(zip(first, second, strict=True)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if first == second:
        return None
    return f"{path or 'the top'}: {json.dumps(first)[:80]} vs {json.dumps(second)[:80]}"


def _tools_callable(evidence: Evidence) -> tuple[bool, str]:
    if evidence.crashes:
        tool, how = next(iter(evidence.crashes.items()))
        return False, f"{tool} crashed on {how}"
    return True, f"every tool answered {PROBES_PER_TOOL} schema-shaped calls without crashing"


def _oracle_solves(evidence: Evidence) -> tuple[bool, str]:
    for seed, transcript in evidence.oracle.items():
        refused = [turn for turn in transcript.turns if "error" in turn.result.info]
        if refused:
            return False, f"seed {seed}: the reference plan was refused: {refused[0].result.observation}"
        if transcript.score != 1.0:
            return False, f"seed {seed}: the reference plan scores {transcript.score}"
    return True, f"the reference plan scores 1.0 on all {len(evidence.seeds)} seeds"


def _doing_nothing_fails(evidence: Evidence) -> tuple[bool, str]:
    solved = [seed for seed, score in evidence.idle.items() if score >= 1.0]
    if solved:
        return False, f"seed {solved[0]}: finishing at once already scores 1.0"
    average = sum(evidence.idle.values()) / max(1, len(evidence.idle))
    return True, f"finishing at once scores {average:.3f} on average"


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
        task = evidence.oracle[seed].task
        if not task.hint.strip() or task.hint.strip() == task.instruction.strip():
            return False, f"seed {seed}: the hint is empty or repeats the instruction"
        for value in _typed_values(evidence.plans[seed]):
            if _mentions(task.hint, value) and not _mentions(task.instruction, value):
                return False, f"seed {seed}: the hint contains {value!r}, which the reference plan types"
    return True, "no hint contains an id, amount or answer from its reference plan"


def _written_for_the_agent(evidence: Evidence) -> tuple[bool, str]:
    """The agent sees the tools and what they return, never the code: what it reads must not send it to a
    constant, an attribute or a helper it cannot see (`see SLA_HOURS`, `self.state.today`)."""
    visible = _agent_visible_names(evidence)
    texts = [("the description", evidence.description)]
    texts += [(f"the tool {tool['name']}", text) for tool in evidence.tools for text in _schema_texts(tool)]
    for seed in evidence.seeds:
        task = evidence.oracle[seed].task
        texts += [(f"seed {seed}: the instruction", task.instruction), (f"seed {seed}: the hint", task.hint)]
    for where, text in texts:
        named = [name for name in code_names(text) if name not in visible]
        if named:
            return False, f"{where} names {named[0]!r}, code the agent cannot see"
    return True, f"the description, {len(evidence.tools)} tools and every task name only what the tools show"


def task_meaning(evidence: Evidence) -> tuple[bool, str]:
    """A task a person could act on, judged on a designed world (the `meaning` gate): the instruction is a
    sentence that names every value its reference plan types, as the tools show it (an id, or another value
    the tools showed beside it before the call: a title, a name), and the record its answer comes from; the
    hint is words that name a tool or a step. `{`, `type_21` or "Your pet has a petted." pass every contract
    check and mean nothing. Stricter than the contract: a hand-written task may paraphrase ("on their way"
    for `shipped`); a designed one names what it means."""
    for seed in evidence.seeds:
        task, plan = evidence.oracle[seed].task, evidence.plans[seed]
        observed = [turn.result.observation for turn in evidence.oracle[seed].turns]
        problem = _instruction_problem(task.instruction, plan, observed) or _hint_problem(task.hint, evidence.tools)
        if problem is not None:
            return False, f"seed {seed}: {problem}"
    return (
        True,
        f"every instruction names what its plan types, every hint a tool or a step ({len(evidence.seeds)} seeds)",
    )


SENTENCE_WORDS = 3  # an instruction of fewer words is not a sentence a person could act on
_WORD = re.compile(r"[^\W\d_]{2,}")
# The words of steps: what a hint may say instead of a tool's name ("search by title, then borrow it").
STEP_WORDS = frozenset({
    "get", "set", "find", "list", "lookup", "look", "search", "update", "create", "add", "new", "delete",
    "remove", "transfer", "move", "change", "check", "open", "close", "read", "call", "use", "ask", "answer",
    "first", "then", "before", "after", "filter", "query", "fetch", "show", "view", "mark", "pay", "send",
})  # fmt: skip


def _instruction_problem(instruction: str, plan: list[ToolCall | Finish], observed: list[Any]) -> str | None:
    words = _WORD.findall(instruction)
    if len(words) < SENTENCE_WORDS:
        return f"not a sentence: the instruction {instruction[:60]!r} has {len(words)} words"
    touched: list[str] = []
    for step, action in enumerate(plan):
        before = observed[:step]  # what the tools had shown when the plan typed this call
        objects = [value for _, value in _json_items(before) if isinstance(value, dict)]
        if isinstance(action, ToolCall):
            shown = {value for _, value in _json_items(before) if isinstance(value, str)}
            for value in _touched_values(action, shown):
                touched.append(value)
                if not any(c.isalnum() for c in value):
                    return f"punctuation for a name: the plan's call to {action.name} types {value!r}"
                if not _named(value, instruction, objects):
                    return f"a value it never names: the plan's call to {action.name} types {value!r}"
        elif action.answer and not _names_holder(instruction, action.answer, objects):
            return f"a record it never names: the answer {action.answer!r} comes from a record it never names"
    named = {word.casefold() for value in touched for word in _WORD.findall(value)}
    if not [word for word in words if word.casefold() not in named]:
        return f"nothing to do: the instruction {instruction[:60]!r} only names values"
    return None


def _touched_values(call: ToolCall, shown: set[str]) -> list[str]:
    """The values a call types that the instruction must name or lead to: ids, codes, amounts, texts the tools
    show. Text of several words that no tool shows is the agent's own wording (a reason, a reply) and flags
    are choices the instruction words as verbs: neither is named as typed."""
    values: list[str] = []
    for _, value in _json_items(dict(call.arguments)):
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        if isinstance(value, str) and ((len(value.split()) > 1 and value not in shown) or not value.strip()):
            continue
        values.append(str(int(value)) if isinstance(value, float) and value.is_integer() else str(value))
    return list(dict.fromkeys(values))


def _hint_problem(hint: str, tools: list[dict[str, Any]]) -> str | None:
    words = {word.casefold() for word in _WORD.findall(hint)}
    tool_words = {part for tool in tools for part in str(tool.get("name", "")).casefold().split("_") if len(part) >= 3}
    names = [str(tool.get("name", "")) for tool in tools]
    if any(_mentions(hint, name) or _mentions(hint, name.replace("_", " ")) for name in names if name):
        return None
    if words & (STEP_WORDS | tool_words):
        return None
    return f"a hint of no step: the hint {hint[:60]!r} names no tool and no step"


def _named(value: str, instruction: str, objects: list[dict[str, Any]]) -> bool:
    """`value` is in the instruction (a word of it, however spelled or inflected: `closed` in "close it"), or
    it stands in a record the tools show beside a value the instruction names (`B2` beside "Dune")."""
    if _mentions(instruction, value) or _inflected(value, instruction):
        return True
    return any(_names_object(instruction, holder, value) for holder in _holding(value, objects))


def _names_holder(instruction: str, value: str, objects: list[dict[str, Any]]) -> bool:
    """Whether the instruction names a record holding `value` by another of its texts; true where no observed
    record holds it (an answer counted or computed, not read off one record)."""
    holders = _holding(value, objects)
    return not holders or any(_names_object(instruction, holder, value) for holder in holders)


def _holding(value: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The observed records that hold `value` as one of their own fields."""
    return [o for o in objects if any(_same(item, value) for item in o.values() if not isinstance(item, dict | list))]


def _names_object(instruction: str, record: dict[str, Any], other_than: str) -> bool:
    """Whether the instruction names another text the record holds, in it or in its parts (its title, its
    owner's name, an item of an order)."""
    return any(
        isinstance(item, str) and len(item) >= 2 and not _same(item, other_than) and _mentions(instruction, item)
        for _, item in _json_items(record)
    )


def _same(item: Any, value: str) -> bool:
    if isinstance(item, bool) or item is None:
        return False
    if isinstance(item, int | float):
        return _NUMBER.fullmatch(value) is not None and float(value.replace(",", "")) == float(item)
    return str(item) == value


def _inflected(value: str, text: str) -> bool:
    """A word of text shares all but the ending of `value`, a word itself (`closed`: close; `shipped`: ship)."""
    if not value.isalpha() or len(value) < 4:
        return False
    stem = value.casefold()[: max(4, len(value) - 3)]
    return any(word.casefold().startswith(stem) for word in _WORD.findall(text))


_CONSTANT = re.compile(r"(?<![\w.])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?!\w)")  # SLA_HOURS, RETURN_WINDOW_DAYS()
_ATTRIBUTE = re.compile(r"(?<![\w.])(?:self|cls|state)\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")  # self.state.today
_QUOTED = re.compile(r"`([^`\n]+)`")
_QUOTED_CODE = re.compile(r"[A-Z][A-Z0-9_]+|_\w*|(?:self|cls|state)\.[\w.]+|([A-Za-z_][\w.]*)\(.*\)")


def code_names(text: str) -> list[str]:
    """Names in `text` written the way code is: constants (`UPPER_CASE`), attributes of `self`/`state`, and in
    backticks an all-caps name, a private name, or the function a call calls."""
    found = [match.group() for pattern in (_CONSTANT, _ATTRIBUTE) for match in pattern.finditer(text)]
    for quoted in _QUOTED.finditer(text):
        code = _QUOTED_CODE.fullmatch(quoted.group(1))
        if code is not None:
            found.append(code.group(1) or code.group())
    return found


def _agent_visible_names(evidence: Evidence) -> set[str]:
    """Every key and string the agent can meet: tool names, schema keys and values, the reference plays'
    observations and the values their plans type (an id `ACC_01` or a tool call `get_order(...)` is fine)."""
    seen = [evidence.tools, [turn.result.observation for t in evidence.oracle.values() for turn in t.turns]]
    seen += [_typed_values(plan) for plan in evidence.plans.values()]
    names: set[str] = set()
    for key, value in _json_items(seen):
        if key is not None:
            names.add(key)
        if isinstance(value, str) and len(value) <= 200:
            names.add(value)
    return names


def _schema_texts(tool: dict[str, Any]) -> list[str]:
    """A tool's description and every description in its schemas: what the agent reads about it."""
    schemas = [tool.get("input_schema"), tool.get("output_schema")]
    described = [text for key, text in _json_items(schemas) if key == "description" and isinstance(text, str)]
    return [str(tool.get("description") or ""), *described]


def _json_items(value: Any, key: str | None = None) -> Iterator[tuple[str | None, Any]]:
    """Every value in a JSON value, the value itself first, each with the key it stands under (None in lists)."""
    yield key, value
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _json_items(item, str(name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _json_items(item)


def answer_leak_rate(evidence: Evidence) -> float:
    """Share of seeds whose instruction already contains the answer the reference plan finishes with."""
    leaks = 0
    for seed in evidence.seeds:
        answers = [a.answer for a in evidence.plans[seed] if isinstance(a, Finish) and a.answer]
        instruction = evidence.oracle[seed].task.instruction
        leaks += any(leaks_answer(instruction, answer) for answer in answers)
    return leaks / len(evidence.seeds) if evidence.seeds else 0.0


def leaks_answer(instruction: str, answer: str, shortest: int = 2) -> bool:
    """Whether `instruction` already holds `answer` as a whole token, however it is spelled (`_mentions`): a
    task that says its answer asks nothing. The gate forgives an answer shorter than `shortest` characters."""
    return len(answer) >= shortest and _mentions(instruction, answer)


def _typed_values(plan: list[ToolCall | Finish]) -> list[str]:
    """The ids, amounts and answers a plan types (in lists and objects too), and the numbers and ids inside the
    text it types: what a hint must not give away. Numbers typed as numbers count at any length (a one-digit
    code is an answer too); text counts from two characters, or one digit; inside text, numbers of two digits
    or more and ids (`ACC-1042`) count."""
    typed = [dict(action.arguments) if isinstance(action, ToolCall) else action.answer for action in plan]
    found: list[str] = []
    for _, value in _json_items(typed):
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            found.append(str(int(value)) if isinstance(value, float) and value.is_integer() else str(value))
        elif isinstance(value, str):
            if len(value) >= 2 or value.isdigit():
                found.append(value)
            if len(value.split()) > 1:
                found.extend(_TOKENS_IN_TEXT.findall(value))
    return list(dict.fromkeys(found))


_TOKENS_IN_TEXT = re.compile(r"[A-Za-z]+[-_]?\d+|\d[\d,]*\.?\d*\d")  # ids (ACC-1042, B12), numbers of 2+ digits
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_ID_SEPARATORS = re.compile(r"[A-Za-z0-9]+(?:[-_ ./][A-Za-z0-9]+)+")


def _mentions(text: str, value: str) -> bool:
    """`value` stands in `text` as a whole token ("B1" is in "borrow B1." but not in "B12"), however it is
    spelled: a number with or without cents or thousands separators (`12.5`: `$12.50`; `1042`: `1,042`), an
    id with another separator or none (`ACC-1042`: `ACC 1042`, `ACC_1042`, `acc1042`)."""
    return any(
        re.search(rf"(?<![\w-]){pattern}(?![\w-])", text, flags=re.IGNORECASE) is not None
        for pattern in _spellings(value)
    )


def _spellings(value: str) -> list[str]:
    """Regular expressions for the ways `value` may be written."""
    if _NUMBER.fullmatch(value):
        number = float(value.replace(",", ""))
        forms = {value, f"{number:.2f}", f"{number:,.2f}"}
        if number.is_integer():
            forms |= {str(int(number)), f"{int(number):,}"}
        return [re.escape(form) + r"(?!\.\d)" for form in forms]  # 100 is not in 100.5
    if len(value) <= 40 and _ID_SEPARATORS.fullmatch(value) and any(c.isdigit() for c in value):  # an id
        return [r"[\W_]?".join(re.escape(run) for run in re.findall(r"[A-Za-z0-9]+", value))]
    return [re.escape(value)]


CHECKS: list[tuple[str, Callable[[Evidence], tuple[bool, str]]]] = [
    ("tool schemas", _schemas),
    ("deterministic per seed", _deterministic),
    ("every tool callable", _tools_callable),
    ("reference plan scores 1.0", _oracle_solves),
    ("doing nothing does not", _doing_nothing_fails),
    ("observations are bounded JSON", _observations_are_bounded_json),
    ("hint helps without the answer", _hint_does_not_leak),
    ("written for the agent", _written_for_the_agent),
]


def main() -> None:
    """`python -m toolworlds.checks SPEC SEED...`: the reference plays, one transcript per line (for
    `replay_elsewhere`, which runs this in another interpreter)."""
    from toolworlds.registry import load_world

    world = load_world(sys.argv[1])

    async def played() -> None:
        local = LocalWorld(world)
        for seed in map(int, sys.argv[2:]):
            transcript = await play_plan(local, seed, await reference_plan(local, seed))
            print(transcript.model_dump_json())

    anyio.run(played)


if __name__ == "__main__":
    main()
